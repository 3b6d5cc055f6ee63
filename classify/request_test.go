package classify

import "testing"

// TestRequestFault_C13: which format failures point at the request itself (they
// surface, C9) and which name nothing of it (C13 may try another provider once).
// Each body goes through Classify, as the engine's failures do.
func TestRequestFault_C13(t *testing.T) {
	cases := []struct {
		name string
		st   int
		body string
		want bool
	}{
		// the request's messages, roles, JSON shape, parameters, attachments
		{"roles", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"user\" roles in a row"}}`, true},
		{"named param", 400, `{"error":{"message":"Invalid value: 'xhigh'. Supported values are: 'low', 'medium', and 'high'.","type":"invalid_request_error","param":"reasoning.effort","code":"invalid_value"}}`, true},
		{"extra inputs loc", 422, `{"detail":[{"type":"extra_forbidden","loc":["body","store"],"msg":"Extra inputs are not permitted","input":false}]}`, true},
		{"malformed json", 400, `{"error":{"message":"We could not parse the JSON body of your request.","type":"invalid_request_error"}}`, true},
		{"unknown parameter", 400, `{"error":{"message":"Unrecognized request argument supplied: logit_bias","type":"invalid_request_error"}}`, true},
		{"invalid image", 400, `{"error":{"message":"You uploaded an unsupported image. Please make sure your image is valid.","type":"invalid_request_error","code":"invalid_image_format"}}`, true},
		{"max_tokens over the cap", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 64000 > 32000, which is the maximum allowed number of output tokens for claude-opus-4-20250514"}}`, true},
		{"must be", 400, `{"error":{"message":"max_tokens must be at least 1, got -186.","type":"BadRequestError","code":400}}`, true},
		{"chinese parameter", 400, `{"error":{"code":"1214","message":"max_tokens参数非法。请检查文档。"}}`, true},
		{"empty content", 400, `{"error":{"code":400,"message":"Unable to submit request because it has an empty text parameter.","status":"INVALID_ARGUMENT"}}`, true},
		// nothing of the request named
		{"no body", 400, ``, false},
		{"bare bad request", 400, `Bad Request`, false},
		{"no body text", 0, `400 status code (no body)`, false},
		{"generic invalid request", 400, `{"error":{"message":"Invalid request","type":"invalid_request_error"}}`, false},
		{"vague refusal", 400, `{"error":{"message":"Provider rejected the call","type":"invalid_request_error"}}`, false},
		{"html 400", 400, `<html><head><title>400 Bad Request</title></head><body><center><h1>400 Bad Request</h1></center><hr><center>nginx</center></body></html>`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Classify(Response{Provider: "any", Status: c.st, Body: c.body}, clNow)
			if v.Reason != ReasonFormat {
				t.Fatalf("setup: reason %s (%s), want format", v.Reason, v.Why.Rule)
			}
			if got := RequestFault(v); got != c.want {
				t.Fatalf("RequestFault = %v, want %v (message %q, param %q, rule %s)", got, c.want, v.Message, v.Param, v.Why.Rule)
			}
		})
	}
	// The verdict alone decides: a hand-built one with a parameter and no words.
	if !RequestFault(Verdict{Reason: ReasonFormat, Param: "messages[3].content"}) {
		t.Fatal("a named parameter is the request's")
	}
	if RequestFault(Verdict{Reason: ReasonFormat}) {
		t.Fatal("an empty verdict names nothing")
	}
}

// TestClassify_C13_ParamKept: the parameter a provider names is kept on the
// verdict (error.param, a validation error's loc), so RequestFault can read it.
func TestClassify_C13_ParamKept(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"error":{"message":"x","type":"invalid_request_error","param":"messages[1].content","code":null}}`, "messages[1].content"},
		{`{"detail":[{"type":"missing","loc":["body","messages"],"msg":"Field required"}]}`, "messages"},
		{`{"error":{"message":"x","param":null}}`, ""},
	} {
		if got := Classify(Response{Status: 400, Body: c.body}, clNow).Param; got != c.want {
			t.Errorf("%s: Param %q, want %q", c.body, got, c.want)
		}
	}
}
