package classify

import "testing"

// TestClassify_FamiliesRuntimesRelaysStacks: other wordings of the families that
// errors-unseen3 (testdata/corpus/README.md) found missing, none of them in a
// corpus, each the way a runtime, relay, provider or client library words it,
// with negative controls beside them. The set itself is not tuned against; this
// table is (C1-C10):
//
//   - a status in brackets before the message ("[400] Request for unknown model");
//   - a prompt whose length must not exceed an engine's budget (C8);
//   - every slot or worker of a local server busy (C5);
//   - an engine or runtime that is not loaded (model_not_found, R2);
//   - a local runtime's call to its own runner that died (C7, unknown);
//   - output blocklists and candidates blocked for recitation or safety;
//   - an SDK quoting the finish reason "error" it could not parse (C6);
//   - a card that must be entered to go on (billing);
//   - iFlytek Spark's header codes (provider codes, C2);
//   - a region refused by the upstream behind a router (model_not_found; auth
//     when the provider itself refuses it);
//   - a serverless deployment with no instance yet, scaling or starting up (C5);
//   - a model version that does not exist, a model that was unloaded (R2);
//   - a missing payment method that only lowers the rate limits (rate_limit).
func TestClassify_FamiliesRuntimesRelaysStacks(t *testing.T) {
	checkReasons(t, []reasonCase{
		// a bracketed status before the message
		{"triton", 0, "InferenceServerException: [400] Request for unknown model: 'llama3' is not found", "model_not_found"},
		{"triton", 0, "tritonclient.utils.InferenceServerException: [StatusCode.UNAVAILABLE] failed to connect to all addresses", "timeout"},
		{"any", 0, "Error: [429] Too many requests, slow down", "rate_limit"},
		// a prompt whose length must not exceed a budget of the engine (C8)
		{"tensorrt-llm", 0, "ValueError: The sum of prompt length (16385), query length (0) should not exceed max_num_tokens (16384)", "context_overflow"},
		{"tensorrt-llm", 400, `{"object":"error","message":"prompt length 9000 must not exceed max_input_len 8192","type":"BadRequestError","param":null,"code":400}`, "context_overflow"},
		{"any", 400, "input tokens length 40000 exceeds the maximum allowed 32768", "context_overflow"},
		{"openai", 400, `{"error":{"message":"max_tokens must not exceed 4096","type":"invalid_request_error"}}`, "format"},
		{"any", 429, "Input tokens per minute exceed the limit of 30000", "rate_limit"},
		// every slot or worker busy (C5)
		{"llamafile", 503, "slot unavailable", "overloaded"},
		{"llama.cpp", 503, "all slots are busy, try again later", "overloaded"},
		{"localai", 503, "no free slots available", "overloaded"},
		{"any", 0, "The meeting slot is unavailable next week.", "unclassified"},
		// an engine or runtime that is not loaded (model_not_found)
		{"jan", 400, `{"message":"Engine is not loaded yet"}`, "model_not_found"},
		{"cortex", 409, `{"message":"Model is not loaded yet!"}`, "model_not_found"},
		{"localai", 500, `{"error":{"code":500,"message":"backend is not loaded","type":""}}`, "model_not_found"},
		{"any", 0, "The engine is not loaded onto the truck until Monday.", "unclassified"},
		{"ollama", 503, `{"error":"model is loading, please wait"}`, "overloaded"},
		// a local runtime's call to its own runner that died (unknown)
		{"ollama", 500, `{"error":"POST predict: Post \"http://127.0.0.1:42577/completion\": EOF"}`, "unclassified"},
		{"ollama", 500, `{"error":"do load request: Post \"http://127.0.0.1:39613/load\": EOF"}`, "unclassified"},
		{"ollama", 500, `{"error":"an error was encountered while running the model: GGML_ASSERT(ctx->mem_buffer != NULL) failed"}`, "unclassified"},
		{"openai", 0, `Post "https://api.openai.com/v1/chat/completions": EOF`, "timeout"},
		// blocklists and candidates blocked for a filter
		{"oci", 400, `{"code":"400","message":"Inappropriate input content detected in input blocklist"}`, "content_filter"},
		{"azure-openai", 400, `{"error":{"message":"The prompt was blocked by the custom blocklist Profanity.","code":"content_filter"}}`, "content_filter"},
		{"google-gemini", 200, "[GoogleGenerativeAI Error]: Candidate was blocked due to SAFETY", "content_filter"},
		{"google-gemini", 200, "Response was blocked due to PROHIBITED_CONTENT", "content_filter"},
		{"google-gemini", 0, "StopCandidateException: finish_reason: RECITATION", "content_filter"},
		{"any", 0, "The request was blocked by your firewall.", "unclassified"},
		// an SDK quoting the finish reason "error" it could not parse (C6)
		{"mistral", 200, "1 validation error for ChatCompletionResponse\nchoices.0.finish_reason\n  Input should be 'stop', 'length' or 'tool_calls' [type=enum, input_value='error', input_type=str]", "timeout"},
		{"any", 200, `unexpected finish reason "error"`, "timeout"},
		{"mistral", 422, `{"detail":[{"type":"enum","loc":["body","tool_choice"],"msg":"Input should be 'auto', 'none' or 'any'","input":"required"}]}`, "format"},
		// a card that must be entered to go on using the service (billing)
		{"replicate", 402, `{"detail":"You have reached the free time limit. To continue using Replicate, set up billing at https://replicate.com/account/billing#billing."}`, "billing"},
		{"any", 403, "Please add a credit card to continue using the API.", "billing"},
		{"any", 0, "Enter your credit card details on the next page to finish the order.", "unclassified"},
		// iFlytek Spark's header codes (C2)
		{"iflytek-spark", 0, `{"header":{"code":10013,"message":"input content audit failed","sid":"cht000b8a1c@dx190ee5c","status":2}}`, "content_filter"},
		{"iflytek-spark", 0, `{"header":{"code":10907,"message":"the number of tokens exceeds the limit","sid":"cht000b8a1c@dx190ee5c","status":2}}`, "context_overflow"},
		{"iflytek-spark", 0, `{"header":{"code":11201,"message":"AppIdQpsOverFlowError: daily flow control","sid":"cht000b8a1c@dx190ee5c","status":2}}`, "rate_limit"},
		{"iflytek-spark", 0, `{"header":{"code":11200,"message":"AppIdNoAuthError:(12:17:04.432) tokens.total","sid":"cht000b5e72@dx18b988c77afb81b540","status":2}}`, "model_not_found"},
		{"xunfei", 0, `{"header":{"code":10110,"message":"service busy, please try again later","sid":"cht000b8a1c@dx190ee5c","status":2}}`, "overloaded"},
		{"openai", 0, `{"header":{"code":10013},"note":"a header object without Spark's status is not Spark"}`, "unclassified"},
		// a region refused by the upstream behind a router, and by the provider itself
		{"openrouter", 403, `{"error":{"message":"Provider returned error","code":403,"metadata":{"raw":"{\"error\":{\"code\":400,\"message\":\"User location is not supported for the API use.\",\"status\":\"FAILED_PRECONDITION\"}}","provider_name":"Google AI Studio"}}}`, "model_not_found"},
		{"openai", 403, `{"error":{"code":"unsupported_country_region_territory","message":"Country, region, or territory not supported","param":null,"type":"request_forbidden"}}`, "auth"},
		{"google-gemini", 400, `{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}`, "auth"},
		// a serverless deployment with no instance yet, scaling or starting (C5)
		{"chutes", 503, `{"detail":"No instances available (yet) for chute_id='5c2e9b21-8a4e-5b0e-9c3f-1f7d2a6c9e11'"}`, "overloaded"},
		{"chutes", 503, `{"detail":"Infrastructure is at maximum capacity, try again later"}`, "overloaded"},
		{"lepton", 503, `{"error":"deployment is scaling up, please retry in a few seconds"}`, "overloaded"},
		{"modal", 503, "modal-http: app for invoked web endpoint is stopped or is still starting up", "overloaded"},
		{"baseten", 503, `{"error":"Model is still warming up. Please try again shortly."}`, "overloaded"},
		{"any", 0, "We are scaling up the sales team next quarter.", "unclassified"},
		{"any", 0, "There is no time left to finish the report.", "unclassified"},
		// a model version that does not exist, and a model that was unloaded (R2)
		{"replicate", 422, `{"title":"Invalid version or not permitted","detail":"The specified version does not exist (or perhaps you don't have permission to use it?)","status":422}`, "model_not_found"},
		{"lmstudio", 400, `{"error":"Model unloaded."}`, "model_not_found"},
		{"any", 400, `{"error":"Invalid version: 'v2' is not a semantic version"}`, "format"},
		// a missing payment method whose cost is a lower rate, not a refusal (C4)
		{"voyage", 429, `{"detail":"You have not yet added your payment method in the billing page and will have reduced rate limits of 3 RPM and 10K TPM. To unlock our standard rate limits, please add a payment method in the billing page for the appropriate organization in the user dashboard."}`, "rate_limit"},
		{"ai21", 402, `{"detail":"Your account has insufficient credits. Please add a payment method."}`, "billing"},
		{"any", 402, "Payment required", "billing"},
	})
}

// TestClassify_C6_ClientStacksNotCredentialsOrRequests: transport and decoding
// errors of Go, Python, Node, Java, .NET and Rust clients, as the client's error
// and as a body. A response the client could not read is the provider's broken
// answer (C6), never the request (format, which would end the turn, C9) and never
// a bad key ("Unexpected token", "KeyNotFoundException" name no credential; auth
// would cool the key down for every model). A server's 4xx that could not read
// our JSON stays format, and so do caps on one request's shape or output ("10
// images per message", "max_tokens or model output limit was reached") and a
// named field over its length: the words "limit" and "maximum length" there
// are not a window (rate_limit) or the prompt (context_overflow).
func TestClassify_C6_ClientStacksNotCredentialsOrRequests(t *testing.T) {
	cases := []struct {
		text string
		want Reason
	}{
		// responses the client could not read
		{"SyntaxError: Unexpected token < in JSON at position 0", ReasonTimeout},
		{`SyntaxError: Unexpected token 'e', "error code: 502" is not valid JSON`, ReasonTimeout},
		{"com.fasterxml.jackson.core.JsonParseException: Unexpected character ('<' (code 60)): expected a valid value (JSON String, Number, Array, Object or token 'null', 'true' or 'false')", ReasonTimeout},
		{"System.Text.Json.JsonException: '<' is an invalid start of a value. Path: $ | LineNumber: 0 | BytePositionInLine: 0.", ReasonTimeout},
		{"json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)", ReasonTimeout},
		{"openai.APIResponseValidationError: Data returned by API invalid for expected schema.", ReasonTimeout},
		{"error decoding response body: expected value at line 1 column 1", ReasonTimeout},
		{`net/http: HTTP/1.x transport connection broken: malformed HTTP response "\x00\x00\x12\x04"`, ReasonTimeout},
		// transport wording outside Go's and Node's usual words
		{"requests.exceptions.ChunkedEncodingError: ('Connection broken: IncompleteRead(0 bytes read)', IncompleteRead(0 bytes read))", ReasonTimeout},
		{"asyncio.exceptions.TimeoutError", ReasonTimeout},
		{"Error: Client network socket disconnected before secure TLS connection was established", ReasonTimeout},
		{"Error: write EPROTO 00F8D8E7:error:0A00010B:SSL routines:ssl3_get_record:wrong version number", ReasonTimeout},
		{"java.io.EOFException: \\n not found: limit=0 content=…", ReasonTimeout},
		{"System.Net.Http.HttpRequestException: The SSL connection could not be established, see inner exception.", ReasonTimeout},
		{"System.Net.Http.HttpRequestException: An error occurred while sending the request.", ReasonTimeout},
		{"System.IO.IOException: Unable to read data from the transport connection: An existing connection was forcibly closed by the remote host.", ReasonTimeout},
		// key and token in another sense
		{"System.Collections.Generic.KeyNotFoundException: The given key 'choices' was not present in the dictionary.", ReasonUnclassified},
		{"KeyError: 'choices'", ReasonUnclassified},
		{"invalid request: message must be at least 1 token long or tool results must be specified.", ReasonFormat},
		{"At least 5 tokens are required to compute a perplexity score.", ReasonUnclassified},
		{"bufio.Scanner: token too long", ReasonUnclassified},
		// still credentials
		{"Incorrect API key provided: sk-abc***xyz. You can find your API key at https://platform.openai.com/account/api-keys.", ReasonAuth},
		{"The security token included in the request is invalid.", ReasonAuth},
		{"invalid x-api-key", ReasonAuth},
		{"Token is expired", ReasonAuth},
		{"API key not found", ReasonAuth},
	}
	for _, c := range cases {
		for _, r := range []Response{{Provider: "openai", Body: c.text}, {Provider: "openai", Err: errString(c.text)}} {
			if v := Classify(r, clNow); v.Reason != c.want {
				t.Errorf("%q (body %v): got %s (%s %q), want %s", c.text, r.Err == nil, v.Reason, v.Why.Rule, v.Why.Evidence, c.want)
			}
		}
	}
	// A cap on one request's shape or output is the request's (format, C9), not a
	// window (rate_limit would retry it); a named field over its length is a
	// parameter, not the prompt (context_overflow would compact the history).
	checkReasons(t, []reasonCase{
		{"any", 400, "Request exceeded the limit of 10 images per message", "format"},
		{"anthropic", 400, "Could not finish the message because max_tokens or model output limit was reached. Please try again with higher max_tokens.", "format"},
		{"openai-compatible", 400, "The 'user' field exceeds the maximum length of 256 characters", "format"},
		{"any", 400, "Invalid token in schema at position 14", "format"},
		{"any", 429, "You exceeded the limit of 60 requests per minute", "rate_limit"},
		{"any", 400, "Prompt exceeds the maximum length of 100000 characters", "context_overflow"},
	})
	// A server that could not read our JSON answers 400: the request (C9).
	if v := Classify(Response{Provider: "openai-compatible", Status: 400, Body: `{"error":"Unexpected token } in JSON at position 42"}`}, clNow); v.Reason != ReasonFormat {
		t.Errorf("server-side JSON parse of the request: got %s, want format", v.Reason)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
