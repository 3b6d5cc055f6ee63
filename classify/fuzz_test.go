package classify

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzClassify: Classify never panics and always answers a reason with its class,
// a bounded one-line message, an explanation and no negative wait (C12). The
// seeds are every corpus case plus testdata/fuzz/FuzzClassify.
func FuzzClassify(f *testing.F) {
	for _, path := range corpusFiles {
		for _, c := range loadCorpus(f, path) {
			st := 0
			if c.HTTPStatus != nil {
				st = *c.HTTPStatus
			}
			f.Add(c.Provider, st, c.Body, "Retry-After", "2", c.Stream)
		}
	}
	f.Add("openrouter", 400, `{"error":{"message":"Provider returned error","metadata":{"raw":"{\"error\":{\"metadata\":{\"raw\":\"x\"}}}"}}}`, "x-ratelimit-reset", "1741305600000", false)
	f.Add("", 0, "data: {\ndata: [DONE]", "retry-after-ms", "-1", true)
	f.Add("x", 520, "<html><title>520", "retry-after", "Mon, 02 Jan 2006 15:04:05 GMT", false)
	f.Add("aws", 400, `{"__type":"com.amazon#ThrottlingException","message":"x"}`, "x-amzn-errortype", "ThrottlingException:http://x", false)
	f.Fuzz(func(t *testing.T, provider string, status int, body, hk, hv string, stream bool) {
		var err error
		if strings.HasPrefix(body, "E") {
			err = errors.New(body)
		}
		r := Response{Provider: provider, Status: status, Headers: map[string]string{hk: hv}, Body: body, Stream: stream, Err: err}
		got := classify(r, time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)) // unrecovered: a panic fails
		if got.Reason == "" || got.Class != ReasonClass(got.Reason) {
			t.Fatalf("bad reason/class %q/%q", got.Reason, got.Class)
		}
		if utf8.RuneCountInString(got.Message) > MaxMessageRunes || !utf8.ValidString(got.Message) || strings.ContainsAny(got.Message, "\n\r") {
			t.Fatalf("bad message %q", got.Message)
		}
		if got.Why.Step == "" || got.Why.Rule == "" {
			t.Fatalf("no explanation: %+v", got.Why)
		}
		if got.RetryAfter < 0 {
			t.Fatalf("negative wait %v", got.RetryAfter)
		}
		_ = RequestFault(got) // C13's judgement never panics either
	})
}

// FuzzParseResetTime: the reset parsers, on a text and on headers, never panic
// and never answer year 2001 or a time before 1970 (C11, C12).
func FuzzParseResetTime(f *testing.F) {
	for _, s := range []string{"Please try again in 18.642s", "retry in 9m38.016s", `retryDelay: "34s"`,
		"resets at 2026-04-01 at 00:00 UTC", "The quota will reset at 08-25 01:37:00 UTC", "2026-09-09 05:38:28",
		"Mon, 02 Jan 2006 15:04:05 GMT", "1741305600000", "1e400", "99-99 99:99:99", "请 30 秒后重试", "wait 1 hour and 3",
		"try again after 11:34 AM", "available at 13:99 pm +14:00", "until 0:00 am", "您的限额将在 2026-08-24 00:09:21 重置",
		"resets_at 1775317531", "reset_after 9e999"} {
		f.Add(s)
	}
	now := time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range []Response{{Provider: "any", Status: 429, Body: s},
			{Provider: "any", Status: 429, Headers: map[string]string{"Retry-After": s, "x-ratelimit-reset-tokens": s}}} {
			v := Classify(r, now)
			if got := v.RecoveryAt; !got.IsZero() && (got.Year() == 2001 || got.Year() < 1970) {
				t.Fatalf("%q: reset %v", s, got)
			}
			if v.RetryAfter < 0 {
				t.Fatalf("negative wait %v", v.RetryAfter)
			}
		}
	})
}
