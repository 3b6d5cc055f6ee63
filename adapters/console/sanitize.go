package console

import (
	"strings"
	"unicode/utf8"
)

// Sanitize returns text safe to print on a terminal (T4): escape sequences (CSI,
// OSC, DCS and the other ESC forms), C0 and C1 control characters other than
// newline and tab, DEL, and the bidirectional overrides and isolates that can make
// text read differently from what it is, are all removed. Invalid UTF-8 is
// dropped. Model output is untrusted: without this a reply could move the
// cursor, rewrite earlier lines, change the window title or set the clipboard.
func Sanitize(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			i++
			continue
		case r == 0x1b:
			i += escapeLen(s[i:])
			continue
		case r == 0x9b: // C1 CSI
			i += size + csiLen(s[i+size:])
			continue
		case r == 0x9d || r == 0x90 || r == 0x98 || r == 0x9e || r == 0x9f: // C1 OSC, DCS, SOS, PM, APC
			i += size + stringLen(s[i+size:])
			continue
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			i += size
			continue
		case isBidiControl(r):
			i += size
			continue
		}
		b.WriteString(s[i : i+size])
		i += size
	}
	return b.String()
}

// isPlain reports that s is printable ASCII (plus newline and tab), the common
// case that needs no copy.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x7f || (c < 0x20 && c != '\n' && c != '\t') {
			return false
		}
	}
	return true
}

// escapeLen is the length of the escape sequence at the start of s (s[0] is ESC).
func escapeLen(s string) int {
	if len(s) < 2 {
		return len(s)
	}
	switch s[1] {
	case '[': // CSI: parameters and intermediates, then one final byte
		return 2 + csiLen(s[2:])
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC: up to BEL or ST
		return 2 + stringLen(s[2:])
	}
	if s[1] >= 0x20 && s[1] <= 0x2f { // intermediates, then a final byte (ESC ( B)
		n := 2
		for n < len(s) && s[n] >= 0x20 && s[n] <= 0x2f {
			n++
		}
		if n < len(s) {
			n++
		}
		return n
	}
	_, size := utf8.DecodeRuneInString(s[1:]) // a two-character sequence (ESC c, ESC 7)
	return 1 + size
}

// csiLen is the length of a CSI body: parameter and intermediate bytes, then the
// final byte (0x40-0x7e). Anything else ends it early.
func csiLen(s string) int {
	for n := 0; n < len(s); n++ {
		switch c := s[n]; {
		case c >= 0x20 && c <= 0x3f:
		case c >= 0x40 && c <= 0x7e:
			return n + 1
		default:
			return n
		}
	}
	return len(s)
}

// stringLen is the length of a control string's body up to and including its
// terminator: BEL, ESC \, or C1 ST.
func stringLen(s string) int {
	for n := 0; n < len(s); n++ {
		switch {
		case s[n] == 0x07:
			return n + 1
		case s[n] == 0x1b && n+1 < len(s) && s[n+1] == '\\':
			return n + 2
		case strings.HasPrefix(s[n:], "\u009c"):
			return n + len("\u009c")
		}
	}
	return len(s)
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
