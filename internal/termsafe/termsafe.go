// Package termsafe makes untrusted text (a model's answer, a provider's error
// body, a user's message or session name) safe to put on a terminal or into a log
// a terminal will show. It is the one place that knows which characters a
// terminal acts on: C0 and C1 controls (ESC starts the CSI, OSC and DCS sequences
// that move the cursor, retitle the window or write the clipboard with OSC 52),
// DEL, and the Unicode bidirectional controls that make a line read differently
// from what it holds.
//
// Two ways to neutralise them:
//
//   - Strip removes them, whole escape sequences included: the console shows a
//     conversation this way (T4).
//   - Show and Line write each one as a visible escape (\x1b, \u009b, \u202e), so
//     an operator reading `bot history` or `bot check --probe` sees what the text
//     held while the terminal acts on none of it (T10). Fprintf applies Line to
//     every text argument of a format.
//
// JSON output gets the same protection from NewJSONWriter: Go's encoders already
// escape C0, and the writer escapes C1 and bidi controls too, which a JSON
// decoder reads back unchanged (logs, `bot history --format json`, the console's
// jsonl).
package termsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// isControl reports C0 controls, DEL and C1 controls.
func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)
}

// isBidiControl reports the Unicode bidirectional embedding, override and isolate
// controls (and the marks), which reorder how a line is shown.
func isBidiControl(r rune) bool {
	switch {
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}

// Show returns s with every control character a terminal would act on written as
// a visible Go-style escape: C0 controls and DEL as \xHH (\x1b for ESC), C1 and
// bidi controls as \uHHHH, invalid UTF-8 bytes as \xHH. Newline and tab are kept;
// everything else, the printable rest of an escape sequence included, is left as
// it is, so the reader sees what the text tried to do.
func Show(s string) string { return visible(s, false) }

// Line is Show for text printed on one line (a table cell, a log-like line):
// newline, carriage return and tab are escaped as \n, \r and \t too, so the text
// cannot start a row of its own or shift the columns.
func Line(s string) string { return visible(s, true) }

func visible(s string, oneLine bool) string {
	if isPlain(s, oneLine) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' && oneLine:
			b.WriteString(`\n`)
		case r == '\r' && oneLine:
			b.WriteString(`\r`)
		case r == '\t' && oneLine:
			b.WriteString(`\t`)
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x80 && isControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case isControl(r) || isBidiControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isPlain reports that s is printable ASCII (plus newline and tab unless
// oneLine), the common case that needs no copy.
func isPlain(s string, oneLine bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x7f || (c < 0x20 && (oneLine || (c != '\n' && c != '\t'))) {
			return false
		}
	}
	return true
}

// Fprintf is fmt.Fprintf for output that shows text from anyone: the format is
// the program's own, and every string, error and fmt.Stringer argument is passed
// through Line first. Other arguments (numbers, durations) print as fmt prints
// them.
func Fprintf(w io.Writer, format string, args ...any) (int, error) {
	safe := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			safe[i] = Line(v)
		case error:
			safe[i] = Line(v.Error())
		case fmt.Stringer:
			safe[i] = Line(v.String())
		default:
			safe[i] = a
		}
	}
	return fmt.Fprintf(w, format, safe...)
}

// NewJSONWriter returns a writer that passes JSON text to w with every DEL, C1
// and bidi control character written as a \uHHHH escape. In JSON such characters can
// only stand inside strings, where the escape means the same character, so a
// decoder reads the same values; a terminal showing the raw text sees no control.
// A character split across two writes is held until the second.
func NewJSONWriter(w io.Writer) io.Writer { return &jsonWriter{w: w} }

type jsonWriter struct {
	w       io.Writer
	partial []byte // the start of a multi-byte character the last write ended in
	buf     []byte
}

func (j *jsonWriter) Write(p []byte) (int, error) {
	in := p
	if len(j.partial) > 0 {
		in = append(j.partial, p...)
		j.partial = nil
	}
	if !needsJSONEscape(in) && !endsPartial(in) {
		if _, err := j.w.Write(in); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	out := j.buf[:0]
	for i := 0; i < len(in); {
		if in[i] == 0x7f {
			out = append(out, `\u007f`...)
			i++
			continue
		}
		if in[i] < utf8.RuneSelf {
			out = append(out, in[i])
			i++
			continue
		}
		if !utf8.FullRune(in[i:]) {
			j.partial = append([]byte(nil), in[i:]...)
			break
		}
		r, size := utf8.DecodeRune(in[i:])
		if r != utf8.RuneError && (isControl(r) || isBidiControl(r)) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, in[i:i+size]...)
		}
		i += size
	}
	j.buf = out
	if _, err := j.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// needsJSONEscape reports whether b holds DEL, a C1 control (UTF-8 0xc2 0x80-0x9f) or
// a bidi control (0xd8 0x9c; 0xe2 0x80 0x8e-0x8f, 0xaa-0xae; 0xe2 0x81 0xa6-0xa9).
func needsJSONEscape(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] == 0x7f {
			return true
		}
		if i+1 == len(b) {
			break
		}
		switch b[i] {
		case 0xc2:
			if b[i+1] >= 0x80 && b[i+1] <= 0x9f {
				return true
			}
		case 0xd8:
			if b[i+1] == 0x9c {
				return true
			}
		case 0xe2:
			if i+2 < len(b) && (b[i+1] == 0x80 || b[i+1] == 0x81) {
				if r, _ := utf8.DecodeRune(b[i:]); isBidiControl(r) {
					return true
				}
			}
		}
	}
	return false
}

// endsPartial reports whether b ends inside a multi-byte UTF-8 character.
func endsPartial(b []byte) bool {
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		c := b[i]
		if c < utf8.RuneSelf {
			return false
		}
		if utf8.RuneStart(c) {
			return !utf8.FullRune(b[i:])
		}
	}
	return false
}
