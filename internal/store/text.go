package store

import (
	"strings"
	"unicode/utf8"
)

// CleanText returns s as text every driver stores as given: invalid UTF-8 and
// NUL bytes become U+FFFD. PostgreSQL rejects both in a text column (so a
// provider error holding one would make a whole write fail, M1); SQLite stores
// them, and is cleaned the same way so both drivers keep the same data. Use it on
// values compared in a WHERE clause (keys) so they match the stored, cleaned text.
func CleanText(s string) string {
	if isClean(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func isClean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == 0 || c >= utf8.RuneSelf {
			return utf8.ValidString(s[i:]) && strings.IndexByte(s[i:], 0) < 0
		}
	}
	return true
}
