package termsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// covers T4
func TestStrip_T4(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain text untouched", "hello\n\tworld", "hello\n\tworld"},
		{"colour codes", "\x1b[31mred\x1b[0m text", "red text"},
		{"cursor movement and erase", "a\x1b[2J\x1b[1;1Hb\x1b[K", "ab"},
		{"window title (OSC, BEL)", "\x1b]0;owned\x07after", "after"},
		{"clipboard (OSC 52, ST)", "\x1b]52;c;ZXZpbA==\x1b\\after", "after"},
		{"hyperlink", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"DCS", "\x1bPq#0;2;0;0;0\x1b\\x", "x"},
		{"charset switch", "\x1b(0lqk\x1b(B", "lqk"},
		{"C1 CSI", "a\u009b31mb", "ab"},
		{"bell, backspace, carriage return", "a\x07b\x08c\rd", "abcd"},
		{"bidi override", "abc\u202edcba\u202c", "abcdcba"},
		{"unicode kept", "café ↪️ 日本", "café ↪️ 日本"},
		{"invalid utf-8 dropped", "a\xffb", "ab"},
		{"truncated escape", "a\x1b", "a"},
	} {
		if got := Strip(tc.in); got != tc.want {
			t.Errorf("%s: Strip(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

// covers T4: whatever the input, the output holds no ESC, no C0/C1 control other
// than newline and tab, no DEL, no bidi control, and is valid UTF-8.
func FuzzStrip(f *testing.F) {
	for _, s := range []string{"\x1b[31mx", "\x1b]0;t\x07", "\u009b2J", "a\u202eb", "\x1bP\x1b\\", "plain"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Strip(s)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8: %q", out)
		}
		for _, r := range out {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) || isBidiControl(r) {
				t.Fatalf("control %U left in %q (from %q)", r, out, s)
			}
		}
		if strings.Count(out, "\n") > strings.Count(s, "\n") {
			t.Fatal("newlines added")
		}
	})
}
