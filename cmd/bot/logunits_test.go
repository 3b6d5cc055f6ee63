package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// covers V1: the bot's logger writes durations in the milliseconds of the log
// contract (docs/operations.md, Logs), never nanoseconds beside duration_ms,
// in JSON and in text.
func TestNewLogger_DurationsInMilliseconds(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		log, closeLog, err := newLogger(runFlags{logFormat: format}, false, &buf)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("llm call failed", "dur", 1500*time.Millisecond, "duration_ms", 1834.2)
		closeLog()
		line := buf.String()
		if format == "json" {
			var got map[string]any
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatal(err)
			}
			if got["dur_ms"] != 1500.0 || got["dur"] != nil {
				t.Errorf("json: %s", line)
			}
			continue
		}
		if !strings.Contains(line, " dur_ms=1500 ") || strings.Contains(line, "1.5s") {
			t.Errorf("text: %s", line)
		}
	}
}
