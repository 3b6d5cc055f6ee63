package classify

import (
	"testing"
	"time"

	_ "time/tzdata" // IANA zone names resolve the same on every machine the tests run on
)

// TestClassify_C2_TextCauseOverGenericStatus: when the text names a specific
// cause and the status a generic one (400/403/409/429/500/502), the cause
// wins; the status alone decides only when the text says nothing specific.
// Wordings of issue 39's families that no corpus holds.
func TestClassify_C2_TextCauseOverGenericStatus(t *testing.T) {
	checkReasons(t, []reasonCase{
		// safety stops in any field or SDK's words, whatever the status
		{"gemini", 500, `upstream error: response blocked due to SAFETY`, ReasonContentFilter},
		{"gemini", 429, `{"error":{"message":"blocked: prompt: BlockedReasonSafety ()","type":"relay_error"}}`, ReasonContentFilter},
		{"gemini", 502, `gateway: empty candidate, block_reason: BLOCKLIST`, ReasonContentFilter},
		{"google-vertex", 200, `GenerateContentResponse(prompt_feedback=PromptFeedback(block_reason=<BlockedReason.SPII: 'SPII'>))`, ReasonContentFilter},
		{"any", 400, `The prompt was blocked by the provider.`, ReasonContentFilter},
		// suspension stated, even "temporary", when only a person lifts it
		{"any", 403, `Your account is temporarily locked. To restore access, contact customer support.`, ReasonAuthPermanent},
		{"any", 429, `This API key has been suspended. Please reach out to support to verify your identity.`, ReasonAuthPermanent},
		// plan allowances
		{"any", 429, `You have exceeded your monthly included request allowance for premium models.`, ReasonRateLimit},
		{"any", 403, `Premium request allowance exceeded. Enable paid premium requests in your settings.`, ReasonBilling},
		{"any", 402, `{"error":{"message":"No quota left on this plan","code":"quota_exceeded"}}`, ReasonBilling},
		{"any", 402, `{"error":{"message":"Daily quota used, it resets tomorrow","code":"quota_exceeded"}}`, ReasonRateLimit},
		// eligibility for one model
		{"any", 409, `Your account is not eligible to use the model o3-pro.`, ReasonModelNotFound},
		// a retired feature of the request, not a model
		{"any", 400, `The 'functions' parameter has been deprecated. Please migrate to tools.`, ReasonFormat},
		{"any", 0, `Legacy completions are no longer supported - please switch to the Responses API.`, ReasonFormat},
	})
}

// TestClassify_C2_StatusDecidesWithoutSpecificText: the same statuses with
// words that name no cause keep their status reading.
func TestClassify_C2_StatusDecidesWithoutSpecificText(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 403, `Forbidden`, ReasonAuth},
		{"any", 429, `Too Many Requests`, ReasonRateLimit},
		{"any", 502, `Bad Gateway`, ReasonTimeout},
		{"any", 402, `{"error":{"message":"Request failed","code":"quota_exceeded"}}`, ReasonBilling},
	})
}

// TestClassify_C5_C6_CancelCrashDrop: the caller's cancel (no response) is
// aborted, a dead local runtime says nothing of who must act (C7), a
// dropped connection is a timeout (C6), a busy model is overloaded (C5).
func TestClassify_C5_C6_CancelCrashDrop(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 0, `DOMException [AbortError]: signal is aborted without reason`, ReasonAborted},
		{"any", 0, `anyio: Cancelled by cancel scope 7f3a2c1d9e80`, ReasonAborted},
		{"any", 500, `signal is aborted without reason`, ReasonTimeout}, // a server that answered was not cancelled by us
		{"vllm", 500, `RuntimeError: Engine loop has died`, ReasonUnclassified},
		{"vllm", 0, `MQEngineDeadError: Engine loop is not running.`, ReasonUnclassified},
		{"ollama", 500, `{"error":"error reading llm response: unexpected EOF"}`, ReasonUnclassified},
		{"ollama", 0, `Post "http://127.0.0.1:11434/api/chat": read tcp 127.0.0.1:50000->127.0.0.1:11434: read: connection reset by peer`, ReasonTimeout},
		{"any", 0, `The engine is temporarily busy, please retry shortly.`, ReasonOverloaded},
	})
}

// TestClassify_C4_HedgeAndTemporaryBlockAreNotPermanent: a guess ("may be
// suspended") and a block that lifts by itself are not a revoked account.
func TestClassify_C4_HedgeAndTemporaryBlockAreNotPermanent(t *testing.T) {
	for _, c := range []reasonCase{
		{"any", 403, `Forbidden: the account might be suspended or lack permissions`, ReasonAuth},
		{"any", 403, `Your key is temporarily blocked for 10 minutes after repeated failures.`, ReasonAuth},
		{"any", 0, `Access denied (403): key possibly disabled`, ReasonAuth},
	} {
		if f := Classify(Response{Provider: c.p, Status: c.st, Body: c.b}, clNow); f.Reason == ReasonAuthPermanent {
			t.Errorf("%q: got auth_permanent (%s %q)", c.b, f.Why.Rule, f.Why.Evidence)
		}
	}
}

// TestClassify_C11_ResetTimeZones: reset moments keep their offset or zone
// name ("Access resets at 10:57 PM GMT-3" is 01:57 UTC, not 22:57), in the
// usual formats: a GMT/UTC offset, a numeric offset, an abbreviation, an
// IANA name (summer time included), an hour alone with am/pm.
func TestClassify_C11_ResetTimeZones(t *testing.T) {
	now := time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		text string
		want time.Time
	}{
		{"Access resets at 10:57 PM GMT-3", time.Date(2026, 3, 16, 1, 57, 0, 0, time.UTC)},
		{"Limit reached. Try again at 9:00 UTC+8.", time.Date(2026, 3, 16, 1, 0, 0, 0, time.UTC)},
		{"rate limited until 21:00 +05:30", time.Date(2026, 3, 15, 15, 30, 0, 0, time.UTC)},
		{"quota resets at 8:15 PST", time.Date(2026, 3, 15, 16, 15, 0, 0, time.UTC)},
		{"Your limit will reset at 1pm (Etc/GMT+5).", time.Date(2026, 3, 15, 18, 0, 0, 0, time.UTC)},
		{"You've hit your limit · resets 2:30pm (Pacific/Auckland)", time.Date(2026, 3, 16, 1, 30, 0, 0, time.UTC)},
		{"usage window resets at 9am (America/New_York)", time.Date(2026, 3, 15, 13, 0, 0, 0, time.UTC)}, // EDT from 8 March
		{"The quota will reset at 03-20 01:37:00 CEST.", time.Date(2026, 3, 19, 23, 37, 0, 0, time.UTC)},
		{"resets at 2026-03-20 09:00 (Asia/Kolkata)", time.Date(2026, 3, 20, 3, 30, 0, 0, time.UTC)},
	} {
		f := Classify(Response{Provider: "any", Status: 429, Body: c.text}, now)
		if !f.RecoveryAt.Equal(c.want) {
			t.Errorf("%q: recovery %v, want %v", c.text, f.RecoveryAt, c.want)
		}
	}
	// no moment: an hour alone without am/pm, an unknown zone name
	for _, text := range []string{"We will meet at 5 and/or 6", "retry at 10:00 (Mars/Olympus)"} {
		if f := Classify(Response{Provider: "any", Status: 429, Body: text}, now); !f.RecoveryAt.IsZero() {
			t.Errorf("%q: recovery %v, want none", text, f.RecoveryAt)
		}
	}
	// a wait said in Chinese with an English unit
	f := Classify(Response{Provider: "any", Status: 429, Body: "请求受速率限制。请等待 70 seconds，然后重试。"}, now)
	if f.RetryAfter != 70*time.Second {
		t.Errorf("Chinese wait: %v, want 70s", f.RetryAfter)
	}
}

// TestClassify_C2_StatusPhraseIsNoCause: a status's reason phrase in the text
// ("Bad Request") names no cause, so the cause beside it decides; with nothing
// beside it the status does. Issue 39's second pass, other wordings than
// errors-unseen7's.
func TestClassify_C2_StatusPhraseIsNoCause(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 0, `InvokeBadRequestError: Bad Request, connection timed out while reading the response`, ReasonTimeout},
		{"any", 400, `Bad Request`, ReasonFormat},
		{"any", 0, `HTTP 400 Bad Request: request body exceeds the maximum allowed request size`, ReasonContextOverflow},
		{"any", 400, `The image exceeds the maximum allowed payload size`, ReasonFormat},
		{"any", 500, `Internal error. No credits were charged for this request.`, ReasonTimeout},
		{"any", 0, `The selected model doesn't work with your plan.`, ReasonBilling},
		{"any", 0, `You must specify a model.`, ReasonFormat},
		{"any", 400, `No model provided in the request body`, ReasonFormat},
	})
}

// TestClassify_C4_C6_C9_WrapperWords: the words tools that wrap providers print
// (issue 39's third pass, other wordings than errors-unseen8's): a client's
// enum names for a rate limit and Rust's io error kinds, and a request fault
// told as "check your inputs".
func TestClassify_C4_C6_C9_WrapperWords(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 0, `agent step failed: RateLimited`, ReasonRateLimit},
		{"any", 0, `provider error: QuotaExceeded (retry later)`, ReasonRateLimit},
		{"any", 0, `Transport(reqwest::Error { kind: Request, source: hyper::Error(Io, Kind(BrokenPipe)) })`, ReasonTimeout},
		{"any", 0, `stream read failed: Io(Kind(UnexpectedEof))`, ReasonTimeout},
		{"any", 0, `Invalid request. Please check the request parameters.`, ReasonFormat},
		{"any", 0, `Something went wrong with this call, check your inputs and retry`, ReasonFormat},
	})
}
