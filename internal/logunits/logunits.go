// Package logunits gives the bot's log handlers one unit for durations: the
// log contract's milliseconds (docs/operations.md, Logs: "duration_ms",
// "llm_ms"). slog would write a time.Duration as a count of nanoseconds in
// JSON and as a Go duration string in text, beside those milliseconds.
package logunits

import (
	"log/slog"
	"math"
	"strings"
	"time"
)

// Options are the handler options of the bot's loggers at level: every
// time.Duration attribute is written in milliseconds under its key plus "_ms"
// ("wait" 1.5s is "wait_ms": 1500).
func Options(level slog.Leveler) *slog.HandlerOptions {
	return &slog.HandlerOptions{Level: level, ReplaceAttr: Milliseconds}
}

// Milliseconds is a slog ReplaceAttr that writes a time.Duration attribute
// as milliseconds (to the microsecond, as duration_ms is) under key+"_ms".
func Milliseconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindDuration {
		return a
	}
	d := a.Value.Duration()
	key := a.Key
	if !strings.HasSuffix(key, "_ms") {
		key += "_ms"
	}
	return slog.Float64(key, math.Round(float64(d)/float64(time.Microsecond))/1000)
}
