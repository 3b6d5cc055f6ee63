package classify

import (
	"testing"
	"time"
)

// TestClassify_C2_C4_C5_C8_GatewayAndClientWords: the families of issue 39's
// fourth pass, in other wordings than errors-unseen9's: a gateway or relay
// that got no response from the provider, or whose own request failed; access
// to a gateway refused; a request count exceeded; traffic over an endpoint's
// capacity; a model that declined to answer; a context window reached or a
// length exceeded; prompt tokens that must stay under a bound; a provider that
// rejected the request's schema or payload; a client's guess of a passing
// outage beside a status that names a lasting cause. Prose controls stay
// unclassified.
func TestClassify_C2_C4_C5_C8_GatewayAndClientWords(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 400, `Proxy error: unable to receive a response from the model server`, ReasonTimeout},
		{"any", 200, `No response received from the provider`, ReasonTimeout},
		{"any", 0, `relay request failed after 3 attempts`, ReasonTimeout},
		{"any", 0, `You have exceeded the allowed number of requests for this key`, ReasonRateLimit},
		{"any", 429, `Request volume exceeds the available capacity of this endpoint`, ReasonOverloaded},
		{"any", 200, `The model declined to answer this prompt.`, ReasonContentFilter},
		{"any", 0, `Conversation hit the context window; start a new chat.`, ReasonContextOverflow},
		{"any", 400, `Error: prompt max length exceeded (limit 8192)`, ReasonContextOverflow},
		{"any", 400, `prompt tokens (9000) must be less than or equal to 8192`, ReasonContextOverflow},
		{"any", 400, `Upstream rejected the request payload: unknown field 'foo'`, ReasonFormat},
		{"any", 0, `The API refused the tool schema you sent`, ReasonFormat},
		{"any", 0, `API access refused: check AI_GATEWAY_API_KEY`, ReasonAuth},
		{"any", 403, `Request failed (403): the service might be overloaded, retry later`, ReasonAuth},
		{"any", 503, `The service may be overloaded, please retry later`, ReasonOverloaded},
		{"any", 0, `The committee declined to respond to reporters.`, ReasonUnclassified},
	})
}

// TestClassify_CorpusUnseen9 runs issue 39's fourth blind set
// (testdata/corpus/errors-unseen9.score.md): its stated rate is 27 of 27.
func TestClassify_CorpusUnseen9(t *testing.T) {
	cases := loadCorpus(t, "testdata/corpus/errors-unseen9.jsonl")
	right := 0
	for _, c := range cases {
		if f := Classify(c.response(), corpusNow); string(f.Reason) == c.ExpectedReason && string(f.Class) == c.ExpectedClass {
			right++
		} else {
			t.Logf("miss %s: got %s/%s (%s)", c.ID, f.Reason, f.Class, f.Why.Rule)
		}
	}
	if len(cases) < 27 || right < len(cases) {
		t.Fatalf("%d of %d right, want all of >= 27", right, len(cases))
	}
}

// covers C11: a date or a time of day after "retry after" is a moment, not a
// wait: "retry after 2026-03-16..." was read as 2,026 seconds and "retry after
// 10:25" as 10 seconds. A bare figure there is still a count of seconds.
func TestClassify_C11_RetryAfterDateIsMoment(t *testing.T) {
	now := time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		body string
		at   time.Time
	}{
		{"Rate limit exceeded, retry after 2026-03-16T08:00:00Z", time.Date(2026, 3, 16, 8, 0, 0, 0, time.UTC)},
		{"Rate limit exceeded, retry after 2026-03-16 08:00:00 UTC", time.Date(2026, 3, 16, 8, 0, 0, 0, time.UTC)},
		{"Rate limit exceeded; retry_after: 2026-03-15T18:30:00+02:00", time.Date(2026, 3, 15, 16, 30, 0, 0, time.UTC)},
		{"Too many requests. Retry after 10:25 UTC", time.Date(2026, 3, 16, 10, 25, 0, 0, time.UTC)},
		{"Too many requests. Retry after 120", now.Add(120 * time.Second)},
		{"Too many requests. retry_after: 45.5", now.Add(45500 * time.Millisecond)},
	} {
		v := Classify(Response{Provider: "any", Status: 429, Body: tc.body}, now)
		if v.Reason != ReasonRateLimit || !v.RecoveryAt.Equal(tc.at) {
			t.Errorf("%q: got %s, recovery %v (wait %v); want rate_limit at %v", tc.body, v.Reason, v.RecoveryAt, v.RetryAfter, tc.at)
		}
	}
	if goesOnAsMoment(" 120") || !goesOnAsMoment("-03-16") || !goesOnAsMoment(":25") || goesOnAsMoment("-") {
		t.Error("goesOnAsMoment: a figure followed by a separator and a digit starts a moment, nothing else")
	}
}
