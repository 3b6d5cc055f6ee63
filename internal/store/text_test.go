package store

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestScrub: LastError keeps no credential (redact.Secrets), no NUL or invalid
// UTF-8, and at most maxLastError bytes cut on a rune boundary.
// covers P4, M1
func TestScrub(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"rate_limit (HTTP 429): slow down", "rate_limit (HTTP 429): slow down"},
		{"bad key sk-proj-abcDEF123", "bad key [redacted]"},
		{"Bearer abc.def.ghi", "Bearer [redacted]"},
		{"url?api_key=zzzz1&x=1", "url?api_key=[redacted]&x=1"},
		{"xapp-1-A0123-456 and xoxp-1234567", "[redacted] and [redacted]"},
		{"nul\x00byte and \xff\xfe bad utf-8", "nul\uFFFDbyte and \uFFFD bad utf-8"},
		{strings.Repeat("é", 400), strings.Repeat("é", maxLastError/2)},
	}
	for _, tc := range tests {
		if got := scrub(tc.in); got != tc.want {
			t.Errorf("scrub(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestCleanText: NUL bytes and invalid UTF-8 become U+FFFD; clean text is
// returned as is.
// covers M1
func TestCleanText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain ascii", "plain ascii"},
		{"héllo wörld ✓", "héllo wörld ✓"},
		{"a\x00b", "a\uFFFDb"},
		{"\x00", "\uFFFD"},
		{"bad \xc3\x28 seq", "bad \uFFFD( seq"},
		{"é\x00\xff", "é\uFFFD\uFFFD"},
	}
	for _, tc := range tests {
		got := CleanText(tc.in)
		if got != tc.want || !utf8.ValidString(got) || strings.ContainsRune(got, 0) {
			t.Errorf("CleanText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
