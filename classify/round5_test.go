package classify

import (
	"testing"
	"time"
)

// TestClassify_C5_C6_C9_BrowsersSDKAbortsReferences covers the families of issue
// 39's seventh pass, in other wordings than errors-unseen12's: a browser's
// network error codes (Chromium's net::ERR_*, Firefox's NS_ERROR_*), the SDKs'
// abort classes for the caller's own cancel, "temporarily unavailable" with no
// word of load (C6, not C5's overloaded), an LLM a RAG app cannot find, and a
// stored item the request points at that is gone (format: it fails again).
func TestClassify_C5_C6_C9_BrowsersSDKAbortsReferences(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 0, `GET http://localhost:11434/api/tags net::ERR_CONNECTION_RESET`, ReasonTimeout},
		{"any", 0, `Failed to load resource: net::ERR_NAME_NOT_RESOLVED`, ReasonTimeout},
		{"any", 0, `POST https://api.example.com/v1/chat net::ERR_INTERNET_DISCONNECTED`, ReasonTimeout},
		{"any", 0, `net::ERR_HTTP2_PROTOCOL_ERROR 200 (OK)`, ReasonTimeout},
		{"any", 0, `NS_ERROR_CONNECTION_REFUSED`, ReasonTimeout},
		{"any", 0, `Error: APIUserAbortError`, ReasonAborted},
		{"any", 0, `RequestAbortedError [AbortError]: Request aborted`, ReasonAborted},
		{"any", 499, `APIUserAbortError: Request was aborted.`, ReasonAborted},
		{"any", 0, `Service temporarily unavailable, please come back later`, ReasonTimeout},
		{"any", 500, `{"error":{"message":"The model is temporarily unavailable"}}`, ReasonTimeout},
		{"any", 503, `The server is temporarily unable to service your request due to maintenance downtime.`, ReasonTimeout},
		{"any", 0, `Error: LLM(glm-4@ZHIPU-AI) does not exist`, ReasonModelNotFound},
		{"any", 0, `LLM not found: please configure a chat model`, ReasonModelNotFound},
		{"any", 404, `{"error":{"message":"Previous response with id 'resp_1' not found.","code":"previous_response_not_found"}}`, ReasonFormat},
		{"any", 0, `Item with id 'rs_1' not found. Items are not persisted when store is set to false.`, ReasonFormat},
		{"any", 400, `Conversation with id 'conv_9' not found.`, ReasonFormat},
		// still overloaded where load is said, and prose stays prose
		{"any", 503, `The model is overloaded and temporarily unavailable.`, ReasonOverloaded},
		{"any", 0, `The network team will fix net access on Monday.`, ReasonUnclassified},
		{"any", 0, `The library item with id 42 was not found on the shelf.`, ReasonUnclassified},
	})
}

// TestClassify_C3_C6_C9_CountsStreamsBudgetsGuesses covers the families of issue
// 39's eighth pass, in other wordings than errors-unseen13's: a count the request
// may not pass (format, also behind a 5xx when AWS names a ValidationException),
// a stream said to be invalid or to end without valid content (C6), a budget over
// a period (C3: rate_limit, while a budget without one stays billing), and a
// crash that an app only guesses at beside a lost connection.
func TestClassify_C3_C6_C9_CountsStreamsBudgetsGuesses(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 400, `This model only supports one image per request.`, ReasonFormat},
		{"any", 0, `Error: at most 8 files can be attached to a message`, ReasonFormat},
		{"any", 400, `A maximum of 128 tools may be provided.`, ReasonFormat},
		{"bedrock", 502, `ValidationException: messages.2.content: text content blocks must be non-empty`, ReasonFormat},
		{"any", 0, `Error: the response stream was malformed`, ReasonTimeout},
		{"any", 200, `Generation finished without any valid output`, ReasonTimeout},
		{"any", 429, `Budget exceeded for team ml-research: 12.5 >= 10.0 (budget_duration=30d)`, ReasonRateLimit},
		{"any", 400, `Budget has been exceeded! Current cost: 26.0, Max budget: 0.25`, ReasonBilling},
		{"any", 0, `Lost connection to the local server; it might have crashed.`, ReasonTimeout},
		{"ollama", 500, `llama runner process has terminated: exit status 2`, ReasonUnclassified},
		// rates and prose stay what they are
		{"any", 429, `At most 3 requests can be sent per minute.`, ReasonRateLimit},
		{"any", 0, `The museum only supports one image per visitor badge.`, ReasonUnclassified},
	})
}

// TestClassify_C6_C7_C9_ImagesToolsOrgsBusyRuns covers the families of issue 39's
// ninth pass, in other wordings than errors-unseen14's: an interrupted
// generation (C6), too many images or pages and an unsupported file (format), a
// deserializer's field and variant words (format), an organization or project
// that does not exist (auth), a resource busy with another run (C6, over a 400's
// format), and a local machine without the memory for a model (C7, no provider
// overload).
func TestClassify_C6_C7_C9_ImagesToolsOrgsBusyRuns(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 0, `Error: the generation was interrupted, please try again`, ReasonTimeout},
		{"any", 400, `Too many pages in the document: 612 > 600.`, ReasonFormat},
		{"any", 400, `Unsupported file type: application/x-msdownload`, ReasonFormat},
		{"any", 422, "messages[1]: unknown variant `developer`, expected one of `system`, `user`, `assistant`", ReasonFormat},
		{"any", 400, "invalid type: integer `3`, expected a string at line 1 column 40", ReasonFormat},
		{"any", 401, `No such project: proj_123`, ReasonAuth},
		{"any", 409, `Thread thread_abc already has an active run run_def.`, ReasonTimeout},
		{"any", 0, `Cannot load model: insufficient system resources on this machine`, ReasonUnclassified},
		{"any", 503, `The model is overloaded. Please try again later.`, ReasonOverloaded},
		// prose stays prose
		{"any", 0, `The meeting was interrupted twice by the fire alarm.`, ReasonUnclassified},
		{"any", 0, `There are too many images on this slide.`, ReasonUnclassified},
	})
}

// TestClassify_C5_C6_C9_GeminiStopsWorkersIdentifiers covers the families of
// issue 39's tenth pass, in other wordings than errors-unseen15's: Gemini's
// tool-call stops (a generation that went wrong, C6), its finish reasons as
// the SDKs print the enum's numbers (3 SAFETY, 4 RECITATION, 7 BLOCKLIST, 8
// PROHIBITED_CONTENT, 9 SPII: content_filter), a worker or server that threw (C6)
// and an account or object identifier that is invalid (auth: every model of the
// profile fails until the setting is fixed, as with a bad key).
func TestClassify_C5_C6_C9_GeminiStopsWorkersIdentifiers(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"gemini", 200, `{"candidates":[{"finishReason":"TOO_MANY_TOOL_CALLS","index":0}]}`, ReasonTimeout},
		{"any", 0, "candidates {\n  finish_reason: UNEXPECTED_TOOL_CALL\n  finish_message: \"Unexpected tool call\"\n}", ReasonTimeout},
		{"gemini", 200, `{"candidates":[{"finishReason":3,"index":0}]}`, ReasonContentFilter},
		{"vertex", 0, "finish_reason: 8\nindex: 0", ReasonContentFilter},
		{"any", 0, `GenerateContentResponse(done=True, result={"candidates": [{"finish_reason": 9, "index": 0}]})`, ReasonContentFilter},
		{"cloudflare", 500, `Error 1101: Worker threw exception`, ReasonTimeout},
		{"any", 0, `Error: the server threw an uncaught exception while handling the request`, ReasonTimeout},
		{"cloudflare", 404, `{"success":false,"errors":[{"code":7003,"message":"Could not route to /client/v4/accounts/abc/ai/run, perhaps your object identifier is invalid?"}]}`, ReasonAuth},
		{"any", 400, `The tenant identifier is invalid.`, ReasonAuth},
		// a finished stream and prose stay what they are
		{"gemini", 200, `{"candidates":[{"finishReason":1,"index":0,"content":{"parts":[{"text":"hi"}]}}]}`, ReasonUnclassified},
		{"any", 0, `The pitcher threw an exception to every rule of the game.`, ReasonUnclassified},
	})
}

// TestClassify_C4_C9_ModelIDsParamsRegionsFrequency covers the families of
// issue 39's eleventh pass, in other wordings than errors-unseen16's: a model
// id the provider says is not valid or that fails its pattern (model_not_found:
// another model answers), "invalid params" (format), Bedrock's plural wording of
// Anthropic's country refusal (auth), accounts or a request frequency "limited"
// (C4), and a session or connection closed at its lifetime cap (C6).
func TestClassify_C4_C9_ModelIDsParamsRegionsFrequency(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"openrouter", 400, `{"error":{"message":"openai/gpt-9 is not a valid model ID","code":400}}`, ReasonModelNotFound},
		{"any", 0, `mistral-huge is not a valid model name`, ReasonModelNotFound},
		{"bedrock", 400, `1 validation error detected: Value 'claude:0:9k' at 'modelId' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-z]+`, ReasonModelNotFound},
		{"minimax", 0, `invalid param: temperature out of range (2013)`, ReasonFormat},
		{"bedrock", 0, `An error occurred (AccessDeniedException) when calling the Converse operation: Requests are not allowed from unsupported countries, regions or territories.`, ReasonAuth},
		{"any", 0, `Token error: All keys are currently limited. Please wait 120s.`, ReasonRateLimit},
		{"any", 0, `Your request frequency has been temporarily limited.`, ReasonRateLimit},
		{"openai", 0, `The connection reached its maximum duration of 60 minutes.`, ReasonTimeout},
		// prose keeps its words
		{"any", 0, `Seating at the concert is limited to two hundred guests.`, ReasonUnclassified},
		{"any", 0, `The meeting reached the maximum duration the room allows.`, ReasonUnclassified},
	})
}

// TestClassify_C6_C11_EnginesUnreadableAnswers covers the families of issue
// 39's twelfth pass, in other wordings than errors-unseen17's: a local runtime
// that cannot load its engine (model_not_found: this model cannot be served
// here until a setting changes, as "Engine is not loaded yet"), and a client
// that says the API answered with JSON it cannot read (the answer was broken,
// C6, not the request: format would end the turn with no fallback).
func TestClassify_C6_C11_EnginesUnreadableAnswers(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 0, `Failed to start model: could not load engine onnxruntime`, ReasonModelNotFound},
		{"any", 0, `Error: unable to load the engine for model qwen2-7b`, ReasonModelNotFound},
		{"any", 0, `ERROR: the server responded with invalid JSON at line 1`, ReasonTimeout},
		{"any", 0, `Failed to parse JSON response: <html><body>upstream gone</body></html>`, ReasonTimeout},
		// a request the server could not parse stays the caller's
		{"any", 400, `Failed to parse JSON request body: expected value at line 1 column 1`, ReasonFormat},
		{"any", 0, `The new engine could not load the cargo in time.`, ReasonUnclassified},
	})
}

// TestClassify_C3_C6_AllowancesParsersBackends covers the families of issue
// 39's thirteenth pass, in other wordings than errors-unseen18's: an allowance
// per day, week or month written in parentheses (C3: a window, rate_limit even
// behind a 500), Firefox's JSON.parse on an answer that is not JSON (C6: the
// answer was broken), and a backend that does not implement the call
// (model_not_found: another model's backend does).
func TestClassify_C3_C6_AllowancesParsersBackends(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 500, `Request limit (1,000 per day) exceeded. Sign in for more.`, ReasonRateLimit},
		{"any", 0, `Token quota (2M per month) reached for this key`, ReasonRateLimit},
		{"any", 0, `SyntaxError: JSON.parse: unexpected end of data at line 1 column 1 of the JSON data`, ReasonTimeout},
		{"any", 0, `JSON.parse: unexpected non-whitespace character after JSON data at line 1 column 5`, ReasonTimeout},
		{"localai", 500, `{"error":{"code":500,"message":"rpc error: code = Unknown desc = unimplemented","type":""}}`, ReasonModelNotFound},
		{"any", 0, `the selected backend does not implement embeddings`, ReasonModelNotFound},
		// a server's parse of our request stays the request's, prose stays prose
		{"any", 400, `JSON.parse: unexpected character at line 1 column 1 of the JSON data`, ReasonFormat},
		{"any", 0, `The library has a limit (three books per week) for new members.`, ReasonUnclassified},
	})
}

// TestClassify_C6_C9_ClientsWordsPlansReferences covers the families of issue
// 39's fourteenth pass, in other wordings than errors-unseen21's: a client
// that got an empty or unparsable answer (C6), a plan or credential that "can
// only be used in" one client (auth, not a spent allowance), an item issued to
// another caller (format: the history must change), a prompt that failed
// validation or carried no messages (format), a 4xx whose "please try again"
// is boilerplate (the status says: format), a status stated after "Request
// Failed:", and a provider "currently unavailable" (C6, as "temporarily").
func TestClassify_C6_C9_ClientsWordsPlansReferences(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 0, `Error: the server returned an unparseable response`, ReasonTimeout},
		{"any", 0, `Invalid API response: the provider returned an empty or unparsable response.`, ReasonTimeout},
		{"any", 403, `{"error":{"message":"This subscription can only be used with the official CLI"}}`, ReasonAuth},
		{"any", 400, `{"error":{"message":"The free tier can only be used from our own app","type":"invalid_request_error"}}`, ReasonAuth},
		{"any", 400, `Item 'rs_7' was not issued to this organization.`, ReasonFormat},
		{"any", 0, `Request failed: the prompt failed validation: tool result without a call`, ReasonFormat},
		{"any", 0, `Error: no messages were provided`, ReasonFormat},
		{"any", 400, `Something went wrong. Please try again.`, ReasonFormat},
		{"any", 0, `Oops. Request Failed: 400 Bad Request. Please try again.`, ReasonFormat},
		{"any", 503, `Something went wrong. Please try again.`, ReasonTimeout},
		{"any", 0, `The model provider is currently unavailable.`, ReasonTimeout},
		// a spent free tier stays billing, prose stays prose
		{"any", 429, `Your free tier is exhausted; add credits to continue.`, ReasonBilling},
		{"any", 0, `The coupon can only be used in our store.`, ReasonUnclassified},
	})
}

// TestClassify_C2_StreamWordsUnderAClientStatus covers issue 39's fifteenth
// pass, in other wordings than errors-unseen20's: an SDK that says "stream
// error" about a stream the server refused with a 4xx before it began (the
// status is the server's verdict, C2), while the same words after a 200 or
// with a 5xx stay a broken stream (C6).
func TestClassify_C2_StreamWordsUnderAClientStatus(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"anthropic", 404, `Messages stream error, type: not_found_error, message: model: claude-x`, ReasonModelNotFound},
		{"any", 401, `streaming error: 401 Unauthorized`, ReasonAuth},
		{"any", 200, `Messages stream error: the stream ended unexpectedly`, ReasonTimeout},
		{"any", 502, `stream error: upstream closed`, ReasonTimeout},
	})
}

// TestClassify_C9_ModelNotInTheList covers issue 39's sixteenth pass, in other
// wordings than errors-unseen19's: an SDK or server that does not have the model
// "in the list of supported models" refuses the model, not the request's shape
// (model_not_found, whatever its error class says).
func TestClassify_C9_ModelNotInTheList(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 0, `InvalidArgumentError: model "qwen-max-9" is not in the list of available models`, ReasonModelNotFound},
		{"any", 400, `{"error":{"message":"gpt-5-huge is not in the list of known models","type":"invalid_request_error"}}`, ReasonModelNotFound},
		{"any", 0, `Your name is not in the list of guests for tonight.`, ReasonUnclassified},
	})
}

// TestClassify_C6_C9_DeadlinesThroughputOrgModels covers issue 39's seventeenth
// pass, in other wordings than errors-unseen22's: a client's retry deadline "of
// N s exceeded" (C6), a model served only with provisioned throughput or an
// inference profile (model_not_found: another id or model answers), and a model
// blocked at the organization's level while the key works (model_not_found).
func TestClassify_C6_C9_DeadlinesThroughputOrgModels(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 0, `RetryError: Deadline of 60s exceeded while calling target function`, ReasonTimeout},
		{"bedrock", 400, `ValidationException: Invocation of model ID meta.llama3 with on-demand throughput is not supported.`, ReasonModelNotFound},
		{"bedrock", 0, `The selected model doesn't support on-demand throughput`, ReasonModelNotFound},
		{"groq", 403, `{"error":{"message":"The model llama-x is blocked at the project level","type":"permissions_error"}}`, ReasonModelNotFound},
		{"any", 0, `The deadline of 5 days exceeded our patience.`, ReasonUnclassified},
	})
}

// TestClassify_C6_C9_C11_RelaysKeysModesAnswersMonthDates covers issue 39's
// eighteenth pass, in other wordings than errors-unseen23's: a relay with no
// provider that supports the model (model_not_found, in Chinese too), an
// "invalid model key" (auth, a key), a setting's mode the model does not offer
// (model_not_found), an answer an SDK's schema check or Python's json could not
// read (C6), missing secrets (auth), and a reset written with its month's name
// (C11: "try again at Aug 20, 2026, 3:27 PM", an HTTP date in prose).
func TestClassify_C6_C9_C11_RelaysKeysModesAnswersMonthDates(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 503, `503: 无可用的渠道支持该模型 gpt-9`, ReasonModelNotFound},
		{"any", 401, `Invalid model key provided`, ReasonAuth},
		{"bedrock", 0, `inference mode 'batch' is not available for this model`, ReasonModelNotFound},
		{"any", 0, `Type validation failed: Value: {"error":"upstream failed"}. Error message: expected array`, ReasonTimeout},
		{"any", 0, `Expecting value: line 1 column 1 (char 0)`, ReasonTimeout},
		{"any", 400, `Invalid secrets: the provider's secrets are missing`, ReasonAuth},
		{"any", 0, `The invalid was given fresh secrets by the nurse.`, ReasonUnclassified},
	})
	now := time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)
	for body, want := range map[string]time.Time{
		`You've hit your usage limit. Try again at Aug 20, 2026, 3:27 PM.`:                time.Date(2026, 8, 20, 15, 27, 0, 0, time.UTC),
		`Quota exhausted; it resets on 2 September 2026 at 09:05 UTC+2`:                   time.Date(2026, 9, 2, 7, 5, 0, 0, time.UTC),
		`rate limited, retry after Tue, 17 Mar 2026 08:00:00 GMT`:                         time.Date(2026, 3, 17, 8, 0, 0, 0, time.UTC),
		`Too many requests: available again January 3, 2027, 12:30 am (America/New_York)`: time.Date(2027, 1, 3, 5, 30, 0, 0, time.UTC),
	} {
		f := Classify(Response{Provider: "any", Status: 429, Body: body}, now)
		if !f.RecoveryAt.Equal(want) {
			t.Errorf("%q: recovery %v, want %v", body, f.RecoveryAt, want)
		}
	}
	// a date from a history of the past, or in prose without a reset word, is no reset
	for _, body := range []string{`rate limited since Mon, 01 Jan 2001 00:00:00 GMT`, `Too many requests. The team met on Aug 20, 2026, 3:27 PM.`} {
		if f := Classify(Response{Provider: "any", Status: 429, Body: body}, now); !f.RecoveryAt.IsZero() {
			t.Errorf("%q: recovery %v, want none", body, f.RecoveryAt)
		}
	}
}

// TestClassify_C6_C9_FinalEventsSitesAllowedModels covers issue 39's
// nineteenth pass, in other wordings than errors-unseen26's: a client that
// never received the stream's final event (C6), "does not exist" said of a web
// site or path rather than of the model (no missing model), and a server that
// allows only another model (model_not_found).
func TestClassify_C6_C9_FinalEventsSitesAllowedModels(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 0, `Error: never received a finish event from the stream`, ReasonTimeout},
		{"any", 0, `did not receive the done message before the connection closed`, ReasonTimeout},
		{"any", 0, `Failed to reach model(qwen2). <html><title>Page does not exist</title></html>`, ReasonUnclassified},
		{"any", 400, `{"message":"Only llama-3-8b is allowed now, your model mistral-7b"}`, ReasonModelNotFound},
		{"any", 0, `We never received a final answer from the committee.`, ReasonUnclassified},
	})
}

// TestClassify_C8_Aborted_SessionsAndClientsGone covers issue 39's twentieth
// pass, in other wordings than errors-unseen25's: a prompt past a serving
// engine's session length (C8: context_overflow, compaction helps), and a
// request the server dropped because the client went away (aborted: the
// caller's own cancel, with no response).
func TestClassify_C8_Aborted_SessionsAndClientsGone(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 0, "ERROR: the prompt exceeds the session max length (8192); please start a new session", ReasonContextOverflow},
		{"any", 0, "total sequence length 70000 exceeds `session_len` 65536", ReasonContextOverflow},
		{"any", 0, "Error: connection was disconnected by the client side, aborting generation", ReasonAborted},
		{"any", 499, "request has been disconnected from the client", ReasonAborted},
		// a server that answered was not cancelled by us
		{"any", 500, "request is disconnected from the client side", ReasonTimeout},
		{"any", 0, "The meeting's session exceeded the maximum length we booked.", ReasonUnclassified},
	})
}

// TestClassify_Auth_ContentFilter_ScopesAndBlacklists covers issue 39's
// twenty-first pass, in other wordings than errors-unseen27's: a credential
// whose scopes do not cover the call (auth), and GigaChat's censor stop,
// finish reason "blacklist", beside Gemini's BLOCKLIST (content_filter).
func TestClassify_Auth_ContentFilter_ScopesAndBlacklists(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 403, `{"error":"insufficient scope for this endpoint"}`, ReasonAuth},
		{"any", 0, `the requested scope is not granted to this client`, ReasonAuth},
		{"gigachat", 200, `{"choices":[{"message":{"content":"..."},"finish_reason":"blacklist"}]}`, ReasonContentFilter},
		{"any", 0, "generation stopped with reason: blacklist", ReasonContentFilter},
		{"any", 0, `The scope of the project is not fully included in the budget.`, ReasonUnclassified},
	})
}

// TestClassify_C2_C4_GatewaysQueuesBusyPaths covers issue 39's twenty-second
// pass, in other wordings than errors-unseen24's: a gateway's 5xx quoting its
// upstream's 4xx (the upstream's verdict: here format), a batch queue's enqueued
// token limit (C4, not a prompt too long), a conversation busy with an active
// response (C6, as a thread with an active run), and "key" as a JSON path's
// segment in a schema error (format, no credential).
func TestClassify_C2_C4_GatewaysQueuesBusyPaths(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 502, `{"error":"Upstream API error: 400 Bad Request","details":{"message":"temperature must be at most 2"}}`, ReasonFormat},
		{"any", 500, `{"error":"upstream returned 401 Unauthorized"}`, ReasonAuth},
		{"any", 500, `{"error":"internal error"}`, ReasonTimeout},
		{"openai", 0, `Enqueued token limit reached for gpt-4.1 in organization org-x. Limit: 90,000 enqueued tokens.`, ReasonRateLimit},
		{"openai", 0, `Conversation already has an active response in progress: resp_1.`, ReasonTimeout},
		{"any", 400, `schema is not valid: '/properties/auth/properties/token/required' must be an array`, ReasonFormat},
	})
}

// TestClassify_C6_ServerReturnedInvalidOutput covers issue 39's twenty-third
// pass, in other wordings than errors-unseen28's: a client saying the server or
// model returned an invalid or malformed response (the answer was broken, C6;
// "malformed" there says nothing of the request).
func TestClassify_C6_ServerReturnedInvalidOutput(t *testing.T) {
	checkReasons(t, []reasonCase{
		{"any", 0, `ApiError: the model returned malformed output. Raw: {"choi`, ReasonTimeout},
		{"any", 0, `Error: API returned an unexpected response (empty body)`, ReasonTimeout},
		{"any", 400, `malformed request: the body is not valid JSON`, ReasonFormat},
	})
}
