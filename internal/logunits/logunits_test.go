package logunits

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// covers V1: the log contract writes durations in milliseconds, as
// duration_ms and llm_ms are (docs/operations.md, Logs): a time.Duration
// attribute "wait" is written as "wait_ms", in JSON and in text, in groups
// too, never as a count of nanoseconds or a Go duration string.
func TestOptions_DurationsInMilliseconds(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, Options(slog.LevelInfo)))
	log.Info("x", "wait", 1500*time.Millisecond, "duration_ms", 12.5, slog.Group("g", slog.Duration("dur", 250*time.Microsecond)), "n", 3)
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["wait_ms"] != 1500.0 || got["duration_ms"] != 12.5 || got["n"] != 3.0 {
		t.Errorf("json: %s", buf.String())
	}
	if g, _ := got["g"].(map[string]any); g["dur_ms"] != 0.25 {
		t.Errorf("json group: %s", buf.String())
	}
	if _, ns := got["wait"]; ns {
		t.Errorf("a duration still in nanoseconds: %s", buf.String())
	}

	buf.Reset()
	log = slog.New(slog.NewTextHandler(&buf, Options(slog.LevelDebug)))
	log.Debug("x", "dur", 2*time.Second, "startup", 1234567*time.Nanosecond)
	if s := buf.String(); !strings.Contains(s, " dur_ms=2000 ") || !strings.Contains(s, " startup_ms=1.235") || strings.Contains(s, "2s") {
		t.Errorf("text: %s", s)
	}
	if Options(slog.LevelWarn).Level.Level() != slog.LevelWarn {
		t.Error("the level is not kept")
	}
}
