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

// TestClassify_C4_C6_C9_ChannelsStreamsPolicies: the families of issue 39's
// fifth pass, in other wordings than errors-unseen10's: a relay with no channel
// for the model and a router that cannot name the model's provider
// (model_not_found); a model called unavailable with no later try
// (model_not_found; with one, overloaded); a stream that could not be opened
// and a malformed chunk or event of the upstream stream (timeout, C6); a
// content-filter policy or configuration the request names wrongly (format,
// not content_filter); a stop reason printed as an enum; an error class that
// ends its line. Prose controls stay unclassified.
func TestClassify_C4_C6_C9_ChannelsStreamsPolicies(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 500, `no_available_channel: model gpt-x has no route`, ReasonModelNotFound},
		{"any", 0, `No channel available for model qwen-max under group default`, ReasonModelNotFound},
		{"any", 400, `Provider not specified for model 'foo'; use provider/model`, ReasonModelNotFound},
		{"any", 0, `could not infer the provider from model name 'x'`, ReasonModelNotFound},
		{"any", 0, `The selected model is unavailable.`, ReasonModelNotFound},
		{"any", 503, `The model is unavailable right now, please try again later`, ReasonOverloaded},
		{"any", 0, `Error: unable to open event stream`, ReasonTimeout},
		{"any", 200, `malformed SSE event received from upstream`, ReasonTimeout},
		{"any", 400, `Malformed request body`, ReasonFormat},
		{"any", 400, `Unknown content filtering configuration 'strict-v9'`, ReasonFormat},
		{"any", 400, `The response was filtered due to the prompt triggering Azure OpenAI's content management policy.`, ReasonContentFilter},
		{"any", 200, `finish_reason=FinishReason.SAFETY`, ReasonContentFilter},
		{"any", 0, `stop_reason: StopReason.ERROR`, ReasonTimeout},
		{"any", 0, "Unhandled rejection: AbortError\n    at x (y.js:1:1)", ReasonAborted},
		{"any", 0, `The caterer was unavailable, so the model train show was cancelled.`, ReasonUnclassified},
		{"any", 0, `Our store is unavailable on Sundays.`, ReasonUnclassified},
	})
}

// TestClassify_C4_C6_C9_ServesBugsFieldsRelays covers the families of issue 39's
// sixth pass, in other wordings than errors-unseen11's: a provider that does not
// serve a model, a server that reports its own bug or points at its console, a
// field or property the validator does not know, a stream said to have failed,
// and a relay whose param carries the upstream's status.
func TestClassify_C4_C6_C9_ServesBugsFieldsRelays(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 0, `This endpoint doesn't serve model "llama-9" for your key.`, ReasonModelNotFound},
		{"any", 400, `Sorry, we can't serve the requested model on the free plan.`, ReasonModelNotFound},
		{"any", 0, `EngineCore hit an assertion. This should never happen, please report this bug.`, ReasonTimeout},
		{"any", 0, `Generation failed; see the worker's logs for details.`, ReasonTimeout},
		{"any", 500, `Internal failure: please file an issue with the request id`, ReasonTimeout},
		{"any", 422, `{"detail":{"top_a":["Unknown field."]}}`, ReasonFormat},
		{"any", 400, `Unknown parameter: 'reasoning.summary_mode'.`, ReasonFormat},
		{"any", 400, `Additional properties are not allowed ('foo' was unexpected)`, ReasonFormat},
		{"any", 200, `Error: streaming request failed`, ReasonTimeout},
		{"any", 0, `stream connection failed before the first token`, ReasonTimeout},
		{"any", 0, `{"error":{"message":"","type":"upstream_error","param":"429","code":"bad_response_status_code"}}`, ReasonRateLimit},
		{"any", 0, `{"error":{"message":"(request id: 1)","type":"new_api_error","param":"401","code":"bad_response_status_code"}}`, ReasonAuth},
		{"any", 400, `{"error":{"message":"bad value","type":"invalid_request_error","param":"temperature"}}`, ReasonFormat},
		// prose controls
		{"any", 0, `The kitchen does not serve breakfast after ten; see the model menu.`, ReasonUnclassified},
		{"any", 0, `Open the console and see the logs scroll by.`, ReasonUnclassified},
	})
}
