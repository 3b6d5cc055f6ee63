package termsafe

import (
	"strings"
	"unicode/utf8"
)

// Strip returns text safe to print on a terminal as part of a conversation (T4):
// escape sequences (CSI, OSC, DCS and the other ESC forms) are removed whole, and
// so are C0 and C1 control characters other than newline and tab, DEL, the
// bidirectional overrides and isolates that can make text read differently from
// what it is, and invalid UTF-8. Model output is untrusted: without this a reply
// could move the cursor, rewrite earlier lines, change the window title or set
// the clipboard. Text for an operator's eyes uses Show or Line instead, which
// keep what was there visible.
func Strip(s string) string {
	if isPlain(s, false) {
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
		case isControl(r) || isBidiControl(r):
			i += size
			continue
		}
		b.WriteString(s[i : i+size])
		i += size
	}
	return b.String()
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
