// Package redact hides credentials in text before it is logged, shown, stored or
// returned in an error (P4, T8). It is the one place that knows what a secret
// looks like; every other package calls it, and every hidden part reads Marker.
package redact

import (
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Marker replaces every hidden secret.
const Marker = "[redacted]"

var (
	// Provider and platform key shapes: OpenAI/Anthropic sk-, Groq gsk_, xAI xai-,
	// Slack xox?-/xapp-, GitHub ghp_/gho_, Hugging Face hf_, Google AIza, GitLab glpat-.
	keyShape = regexp.MustCompile(`\b(?:sk|rk|pk|gsk|xai|xox[abeoprs]|xapp|ghp|gho|ghs|hf|glpat)[-_][A-Za-z0-9_\-]{6,}|\bAIza[0-9A-Za-z_\-]{20,}`)
	// A key shown masked, as providers echo a wrong one ("Incorrect API key
	// provided: sk-proj-****abcd"): its prefix and last characters still
	// name it.
	maskedKey = regexp.MustCompile(`\b(?:sk|rk|pk|gsk|xai|xox[abeoprs]|xapp|ghp|gho|ghs|hf|glpat)[-_][A-Za-z0-9_\-]*(?:\*{2,}|\.{3}|…)[A-Za-z0-9_\-]{2,}`)
	// The value after an auth scheme: "Bearer abc", "Basic dXNlcjpw".
	schemeValue = regexp.MustCompile(`(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=\-]{6,}`)
	// name=value or name: value for names that carry secrets, keeping the name.
	namedValue = regexp.MustCompile(`(?i)\b(api[_-]?key|x-api-key|apikey|access[_-]?token|refresh[_-]?token|token|secret|password|passwd|authorization|key)(["']?\s*[:=]\s*["']?)([^\s"',;&]{4,})`)
	// Credentials inside a URL: scheme://user:pass@host or scheme://token@host.
	urlUserinfo = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@"'<>]+@`)
	// A long opaque run of letters and digits (32+), the shape of most raw tokens.
	opaque = regexp.MustCompile(`[A-Za-z0-9_\-]{32,}`)
)

// Secrets hides everything in s that looks like a credential: known key shapes,
// the value after Bearer or Basic, values of secret-named fields (api_key=,
// "token": ...), credentials inside URLs, and long opaque tokens mixing letters
// and digits.
func Secrets(s string) string {
	if s == "" {
		return s
	}
	s = urlUserinfo.ReplaceAllString(s, "${1}"+Marker+"@")
	s = maskedKey.ReplaceAllString(s, Marker)
	s = keyShape.ReplaceAllString(s, Marker)
	s = schemeValue.ReplaceAllStringFunc(s, func(m string) string {
		sub := schemeValue.FindStringSubmatch(m)
		if strings.EqualFold(sub[0][len(sub[1])+len(sub[2]):], Marker) {
			return m
		}
		return sub[1] + sub[2] + Marker
	})
	s = namedValue.ReplaceAllStringFunc(s, func(m string) string {
		sub := namedValue.FindStringSubmatch(m)
		if strings.HasPrefix(sub[3], Marker) || strings.EqualFold(sub[3], "bearer") || strings.EqualFold(sub[3], "basic") {
			return m
		}
		return sub[1] + sub[2] + Marker
	})
	s = opaque.ReplaceAllStringFunc(s, func(m string) string {
		if strings.ContainsAny(m, "0123456789") && strings.ContainsFunc(m, isLetter) {
			return Marker
		}
		return m
	})
	return s
}

func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// Known hides each of the given secret values wherever it appears in s, then
// applies Secrets. Empty values are ignored.
func Known(s string, secrets ...string) string {
	for _, k := range secrets {
		if k != "" {
			s = strings.ReplaceAll(s, k, Marker)
		}
	}
	return Secrets(s)
}

// URL returns raw with any user information (user:password@) hidden, for printing
// a configured base URL (T8). A value that does not parse is passed through Secrets.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return Secrets(raw)
	}
	u.User = url.User(Marker)
	return strings.Replace(u.String(), url.QueryEscape(Marker), Marker, 1)
}

// Preview makes a short, single-line, redacted preview of a provider or platform
// message: whitespace collapsed, secrets hidden, at most max runes (with "…").
func Preview(s string, max int) string {
	if s == "" {
		return ""
	}
	// Bound the work, far beyond what is shown; redact before the final cut so a
	// secret at the edge is never shown in part.
	if len(s) > 64<<10 {
		s = s[:64<<10]
	}
	s = strings.ToValidUTF8(s, "")
	s = strings.Join(strings.Fields(s), " ")
	s = Secrets(s)
	if utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = strings.TrimSpace(string(r[:max-1])) + "…"
	}
	return s
}
