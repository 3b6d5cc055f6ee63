package failover

// Reference versions of the helpers rewritten for speed (SPEC C12: Classify's
// results must not change). Each test checks the fast helper against its plain
// reference on the corpus, on tricky strings and under fuzzing.

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// stripURLsRef is the string version stripURLsInPlace replaced; it removes http(s) URLs so documentation links ("/rate-limits",
// "/settings/billing") do not match phrases.
func stripURLsRef(s string) string {
	if !strings.Contains(s, "http") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for {
		i := strings.Index(s, "http")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		rest := s[i:]
		n := 0
		if strings.HasPrefix(rest, "https://") {
			n = len("https://")
		} else if strings.HasPrefix(rest, "http://") {
			n = len("http://")
		}
		if n == 0 {
			b.WriteString(s[:i+4])
			s = s[i+4:]
			continue
		}
		b.WriteString(s[:i])
		j := n
		for j < len(rest) {
			c := rest[j]
			if c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '"' || c == '\'' || c == ')' || c == ']' || c == '>' || c == '<' || c == '`' {
				break
			}
			j++
		}
		// keep a trailing sentence dot
		if j > n && rest[j-1] == '.' {
			j--
		}
		b.WriteString(" ")
		s = rest[j:]
	}
}

func redactRef(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	prev := ""
	for i := 0; i < len(s); {
		if !isTokChar(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && isTokChar(s[j]) {
			j++
		}
		tok := s[i:j]
		b.WriteString(redactTokenRef(tok, s[:i], prev))
		prev = tok
		i = j
	}
	return b.String()
}

func redactTokenRef(tok, before, prev string) string {
	if len(tok) >= 9 {
		for _, p := range secretPrefixes {
			if len(tok) >= len(p)+6 && hasPrefixFold(tok, p) {
				return tok[:len(p)] + "[redacted]"
			}
		}
	}
	if n := len(before); n > 0 {
		switch before[n-1] {
		case '=':
			for _, p := range secretParams {
				if hasSuffixFold(before, p) {
					return "[redacted]"
				}
			}
		case ' ', ':':
			if before[n-1] == ' ' && len(tok) >= 8 && (strings.EqualFold(prev, "bearer") || strings.EqualFold(prev, "basic")) {
				return "[redacted]"
			}
			if t := strings.TrimRight(before, " "); strings.HasSuffix(t, ":") &&
				!strings.EqualFold(tok, "bearer") && !strings.EqualFold(tok, "basic") {
				for _, h := range secretHeaders {
					if strings.EqualFold(prev, h) {
						return "[redacted]"
					}
				}
			}
		}
	}
	if len(tok) >= 32 {
		digit, letter := false, false
		for k := 0; k < len(tok); k++ {
			c := tok[k]
			if c >= '0' && c <= '9' {
				digit = true
			} else if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
				letter = true
			}
		}
		if digit && letter {
			return "[redacted]"
		}
	}
	return tok
}

func httpStatusValueRef(v any) int {
	var s string
	switch x := v.(type) {
	case float64:
		s = formatNumber(x)
	case string:
		s = x
	default:
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 400 || n > 599 {
		return 0
	}
	return n
}

func collapseSpaceRef(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
			c == ' ' && (i == 0 || i == len(s)-1 || s[i+1] == ' ') || c == 0xc2 || c == 0xe2 || c == 0xe3 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

func previewRef(s string) string {
	if s == "" {
		return ""
	}
	// Bound the work before redaction; redact before truncation so a secret
	// cut at the edge is never shown in part.
	if len(s) > 2048 {
		s = s[:2048]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "")
	}
	s = collapseSpaceRef(s)
	s = redactRef(s)
	if len(s) > maxPreviewRunes && utf8.RuneCountInString(s) > maxPreviewRunes {
		n, cut := 0, len(s)
		for i := range s {
			if n == maxPreviewRunes-1 {
				cut = i
				break
			}
			n++
		}
		s = strings.TrimSpace(s[:cut]) + "…"
	}
	return s
}

var helperSeeds = []string{
	"", "http", "https://", "see https://x.y/z. and http://a/b) or https://c.d/e.", "httpx http:/ https:/x", "a http://x.", "http://",
	"Rate limit reached for gpt-4o in organization org-abc. Visit https://platform.openai.com/account/rate-limits to learn more.",
	"Authorization: Bearer sk-proj-ABCDEFGHIJKLMNOP1234", "x-api-key:  abcdefghijklmnop", "X-API-KEY : bearer abc", "key=AIzaSyA1234567890abcdef&x=1",
	"token: 0123456789abcdef0123456789abcdef0123", "Basic dXNlcjpwYXNzd29yZA==", "bearer short", "\u212aey=abc", "İSTANBUL ÇAĞ",
	"  two  spaces\tand\nlines  ", "\u00a0nbsp\u2003em\u3000ideo", strings.Repeat("é", 250), strings.Repeat("ab ", 120), "\xff\xfe bad utf8",
	strings.Repeat("x", 199) + "  " + strings.Repeat("y", 5), strings.Repeat("a", 200), strings.Repeat("a", 201), strings.Repeat("日", 201),
}

// checkHelpers compares every rewritten helper with its reference on s.
func checkHelpers(t *testing.T, s string) {
	if got, want := string(stripURLsInPlace([]byte(s))), stripURLsRef(s); got != want {
		t.Fatalf("stripURLsInPlace(%q) = %q, want %q", s, got, want)
	}
	if got, want := string(appendLower([]byte("X | "), s)), "X | "+strings.ToLower(s); got != want {
		t.Fatalf("appendLower(%q) = %q, want %q", s, got, want)
	}
	if got, want := collapseSpace(s), collapseSpaceRef(s); got != want {
		t.Fatalf("collapseSpace(%q) = %q, want %q", s, got, want)
	}
	if got, want := redact(s), redactRef(s); got != want {
		t.Fatalf("redact(%q) = %q, want %q", s, got, want)
	}
	if got, want := Preview(s), previewRef(s); got != want {
		t.Fatalf("Preview(%q) = %q, want %q", s, got, want)
	}
	for _, v := range []any{s, strings.TrimSpace(s)} {
		if got, want := httpStatusValue(v), httpStatusValueRef(v); got != want {
			t.Fatalf("httpStatusValue(%q) = %d, want %d", s, got, want)
		}
	}
	if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
		if got, want := httpStatusValue(f), httpStatusValueRef(f); got != want {
			t.Fatalf("httpStatusValue(%v) = %d, want %d", f, got, want)
		}
	}
	if len(s) > 0 && utf8.ValidString(s) {
		lh := lowerHeaders(map[string]string{s: s})
		for k, v := range lh {
			if k != strings.ToLower(strings.TrimSpace(s)) || v != strings.TrimSpace(s) {
				t.Fatalf("lowerHeaders(%q) = %q", s, lh)
			}
		}
	}
}

// TestFastHelpers_MatchReference: the rewritten text helpers give the same
// answers as the plain versions (C12).
func TestFastHelpers_MatchReference(t *testing.T) {
	for _, s := range helperSeeds {
		checkHelpers(t, s)
	}
	for _, st := range []string{"429", " 429 ", "+429", "0429", "-429", "4e2", "429.0", "abc", "", "600", "99999999999999999999"} {
		checkHelpers(t, st)
	}
	for _, c := range loadCorpus(t) {
		checkHelpers(t, c.Body)
	}
	if got := redact("Bearer sk-ABCDEFGHIJKLMNOP"); got == "Bearer sk-ABCDEFGHIJKLMNOP" {
		t.Fatalf("redact left a key: %q", got)
	}
	if s := "plain text, nothing secret"; redact(s) != s {
		t.Fatalf("redact changed %q", s)
	}
}

// FuzzFastHelpers: the same comparison on arbitrary text.
func FuzzFastHelpers(f *testing.F) {
	for _, s := range helperSeeds {
		f.Add(s)
	}
	f.Fuzz(checkHelpers)
}
