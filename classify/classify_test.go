package classify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

var clNow = time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC)

type clCase struct {
	name     string
	provider string
	status   int
	headers  map[string]string
	body     string
	stream   bool
	err      error
	want     Reason
}

func runClCases(t *testing.T, cases []clCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Response{Provider: c.provider, Status: c.status, Headers: c.headers, Body: c.body, Stream: c.stream, Err: c.err}
			f := Classify(r, clNow)
			if f.Reason != c.want {
				t.Fatalf("reason = %s, want %s (code %q, message %q, why %+v)", f.Reason, c.want, f.Code, f.Message, f.Why)
			}
			if f.Class != ReasonClass(c.want) {
				t.Fatalf("class = %s, want %s", f.Class, ReasonClass(c.want))
			}
			if f.Status != c.status {
				t.Fatalf("status not kept: %d", f.Status)
			}
			if f.Why.Step == "" || f.Why.Rule == "" {
				t.Fatalf("no explanation: %+v", f.Why)
			}
		})
	}
}

func TestClassify_C1_DeterministicBeforeTransient(t *testing.T) {
	runClCases(t, []clCase{
		{name: "openai insufficient_quota on 429 is billing", provider: "openai", status: 429,
			body: `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			want: ReasonBilling},
		{name: "rate limit plus quota exhausted reset at is billing", provider: "alibaba-dashscope", status: 429,
			body: `{"code":"Throttling","message":"Rate limit hit: your token-plan quota has been exhausted. The quota will reset at 08-25 01:37:00 UTC."}`,
			want: ReasonBilling},
		{name: "account suspended beats 429", provider: "openai", status: 429,
			body: `{"error":{"message":"Your account has been suspended. Too many requests.","type":"access_terminated"}}`,
			want: ReasonAuthPermanent},
		{name: "invalid key with retry words", provider: "mistral", status: 401,
			body: `{"message":"Invalid API key. Please try again later."}`, want: ReasonAuth},
		{name: "model not found on 503", provider: "openai", status: 404,
			body: `{"error":{"message":"The model ` + "`gpt-9`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","code":"model_not_found"}}`,
			want: ReasonModelNotFound},
		{name: "google api key leaked", provider: "google-gemini", status: 403,
			body: `{"error":{"code":403,"message":"Your API key was reported as leaked. Please use another API key.","status":"PERMISSION_DENIED"}}`,
			want: ReasonAuthPermanent},
	})
}

func TestClassify_C2_TextBeatsStatus(t *testing.T) {
	runClCases(t, []clCase{
		{name: "billing text on 401", provider: "opencode-go", status: 401,
			body: `{"error":{"message":"Insufficient balance. Please top up your account to continue."}}`, want: ReasonBilling},
		{name: "billing text on 403", provider: "moonshot", status: 403,
			body: `{"error":{"message":"Your credit balance is too low","type":"invalid_request_error"}}`, want: ReasonBilling},
		{name: "billing text on 500", provider: "minimax", status: 500,
			body: `{"base_resp":{"status_code":1008,"status_msg":"insufficient balance"}}`, want: ReasonBilling},
		{name: "rate limit inside a 200 body", provider: "any", status: 200, stream: true,
			body: `data: {"error":{"message":"Rate limit exceeded, please retry in 5s","type":"rate_limit_error"}}`, want: ReasonRateLimit},
		{name: "auth on 400 API_KEY_INVALID", provider: "google-gemini", status: 400,
			body: `{"error":{"code":400,"message":"API key expired. Please renew the API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}`,
			want: ReasonAuth},
		{name: "openrouter 403 key limit is billing", provider: "openrouter", status: 403,
			body: `{"error":{"message":"Key limit exceeded (total limit). Manage it using https://openrouter.ai/settings/keys","code":403}}`, want: ReasonBilling},
		{name: "key limit elsewhere is not billing", provider: "acme", status: 403,
			body: `{"error":{"message":"Key limit exceeded"}}`, want: ReasonRateLimit},
		{name: "openrouter bare provider returned error is timeout", provider: "openrouter", status: 502,
			body: `{"error":{"message":"Provider returned error","code":502}}`, want: ReasonTimeout},
		{name: "openrouter provider returned error 200 stream is timeout", provider: "openrouter", status: 200, stream: true,
			body: `data: {"error":{"message":"Provider returned error","code":"provider_error"}}`, want: ReasonTimeout},
		{name: "provider returned error elsewhere is unclassified", provider: "acme", status: 0,
			body: `Provider returned error`, want: ReasonUnclassified},
		{name: "openrouter raw rate limit", provider: "openrouter", status: 429,
			body: `{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"{\"error\":{\"message\":\"Rate limit reached for requests\",\"type\":\"requests\"}}","provider_name":"OpenAI"}}}`,
			want: ReasonRateLimit},
		{name: "openrouter raw context", provider: "openrouter", status: 400,
			body: `{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"prompt is too long: 210000 tokens > 200000 maximum","provider_name":"Anthropic"}}}`,
			want: ReasonContextOverflow},
	})
}

func TestClassify_C3_TemporaryWindow402(t *testing.T) {
	runClCases(t, []clCase{
		{name: "weekly usage limit exhausted", provider: "acme", status: 402,
			body: `{"error":{"message":"Weekly usage limit exhausted. It resets on Monday."}}`, want: ReasonRateLimit},
		{name: "daily limit reached resets tomorrow", provider: "acme", status: 402,
			body: `{"error":"Daily limit reached, resets tomorrow"}`, want: ReasonRateLimit},
		{name: "organization spending limit exceeded", provider: "acme", status: 402,
			body: `{"error":{"message":"Organization spending limit exceeded for this billing period."}}`, want: ReasonRateLimit},
		{name: "five hour window", provider: "zhipu", status: 429,
			body: `{"error":{"code":"1308","message":"Usage limit reached for 5 hour. Your limit will reset at 2026-09-09 05:38:28"}}`, want: ReasonRateLimit},
		{name: "monthly limit chinese", provider: "dashscope", status: 429,
			body: `{"code":"Throttling.Quota","message":"本月调用额度已达上限，将于下月恢复"}`, want: ReasonRateLimit},
		{name: "plain 402 is billing", provider: "acme", status: 402, body: `{"error":{"message":"Payment Required"}}`, want: ReasonBilling},
		{name: "bare 402", provider: "acme", status: 402, want: ReasonBilling},
	})
}

func TestClassify_C4_RateLimitWiderThan429(t *testing.T) {
	runClCases(t, []clCase{
		{name: "too many concurrent", provider: "acme", status: 400, body: `Too many concurrent requests for this model`, want: ReasonRateLimit},
		{name: "throttling exception", provider: "aws-bedrock", status: 400, body: `{"message":"ThrottlingException: Rate exceeded"}`, want: ReasonRateLimit},
		{name: "bedrock header only", provider: "aws-bedrock", status: 400, headers: map[string]string{"X-Amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/"}, body: `{"message":"Please slow your rate."}`, want: ReasonRateLimit},
		{name: "concurrency limit reached", provider: "acme", status: 503, body: `concurrency limit reached`, want: ReasonRateLimit},
		{name: "workers ai quota limit exceeded", provider: "cloudflare-workers-ai", status: 400, body: `{"errors":[{"message":"AiError: workers_ai quota limit exceeded","code":3036}]}`, want: ReasonRateLimit},
		{name: "throttled", provider: "acme", status: 200, stream: true, body: `event: error` + "\n" + `data: {"message":"Request throttled"}`, want: ReasonRateLimit},
		{name: "resource exhausted", provider: "google-vertex", status: 429, body: `{"error":{"code":429,"message":"Resource exhausted. Please try again later.","status":"RESOURCE_EXHAUSTED"}}`, want: ReasonRateLimit},
		{name: "weekly limit reached", provider: "acme", status: 400, body: `weekly limit reached`, want: ReasonRateLimit},
		{name: "monthly limit exhausted", provider: "acme", status: 400, body: `monthly limit exhausted`, want: ReasonRateLimit},
		{name: "chinese too frequent", provider: "moonshot", status: 429, body: `{"error":{"message":"请求过于频繁，请稍后再试"}}`, want: ReasonRateLimit},
		{name: "chinese rate limited", provider: "zhipu", status: 429, body: `{"error":{"code":"1302","message":"您当前使用该API的并发数过高，请降低并发，或联系客服增加限额。"}}`, want: ReasonRateLimit},
		{name: "chinese throttle", provider: "minimax", status: 200, body: `{"base_resp":{"status_code":1002,"status_msg":"触发限流，请稍后再试"}}`, want: ReasonRateLimit},
		{name: "bare 429", provider: "acme", status: 429, want: ReasonRateLimit},
		{name: "gemini free tier daily with limit 20", provider: "google-gemini", status: 429,
			body: `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 20, model: gemini-2.5-flash","status":"RESOURCE_EXHAUSTED"}}`,
			want: ReasonRateLimit},
	})
}

func TestClassify_C5_Overloaded(t *testing.T) {
	runClCases(t, []clCase{
		{name: "529 no body", provider: "anthropic", status: 529, want: ReasonOverloaded},
		{name: "overloaded_error type", provider: "anthropic", status: 200, stream: true, body: "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}", want: ReasonOverloaded},
		{name: "model not ready exception", provider: "aws-bedrock", status: 429, body: `{"message":"ModelNotReadyException: Model is not ready"}`, want: ReasonOverloaded},
		{name: "high demand on 503", provider: "google-gemini", status: 503, body: `{"error":{"code":503,"message":"This model is currently experiencing high demand. Spikes in demand are usually temporary. Please try again later.","status":"UNAVAILABLE"}}`, want: ReasonOverloaded},
		{name: "at capacity as 429", provider: "openrouter", status: 429, body: `{"error":{"message":"Selected model is at capacity. Please try a different model.","code":429}}`, want: ReasonOverloaded},
		{name: "server busy deepseek", provider: "deepseek", status: 503, body: `{"error":{"message":"Server is busy, please try again later."}}`, want: ReasonOverloaded},
		{name: "chinese busy", provider: "dashscope", status: 503, body: `{"code":"ServiceUnavailable","message":"服务繁忙，请稍后重试"}`, want: ReasonOverloaded},
		{name: "zhipu heavy traffic", provider: "zhipu", status: 429, body: `{"error":{"code":"1305","message":"该模型当前访问量过大，请您稍后再试"}}`, want: ReasonOverloaded},
		{name: "bare 503 is not overload", provider: "acme", status: 503, body: `Service Unavailable`, want: ReasonTimeout},
	})
}

func TestClassify_C6_TimeoutLike(t *testing.T) {
	refused := dialClosedPort(t)
	dnsErr := &net.DNSError{Err: "no such host", Name: "api.invalid.example", IsNotFound: true}
	resetErr := fmt.Errorf("read response: %w", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)})
	runClCases(t, []clCase{
		{name: "connection refused dial", provider: "ollama", err: refused, want: ReasonTimeout},
		{name: "connection reset wrapped", provider: "openai", err: resetErr, want: ReasonTimeout},
		{name: "bare ECONNRESET wrapped", provider: "openai", err: fmt.Errorf("stream: %w", syscall.ECONNRESET), want: ReasonTimeout},
		{name: "dns no such host", provider: "openai", err: fmt.Errorf("post: %w", dnsErr), want: ReasonTimeout},
		{name: "unexpected EOF mid-stream", provider: "openai", status: 200, stream: true, err: fmt.Errorf("read chunk: %w", io.ErrUnexpectedEOF), want: ReasonTimeout},
		{name: "attempt timeout", provider: "openai", err: fmt.Errorf("attempt: %w", ErrAttemptTimeout), want: ReasonTimeout},
		{name: "deadline exceeded", provider: "openai", err: context.DeadlineExceeded, want: ReasonTimeout},
		{name: "i/o timeout text", provider: "openai", err: errors.New(`Post "https://api.openai.com/v1/chat/completions": dial tcp 1.2.3.4:443: i/o timeout`), want: ReasonTimeout},
		{name: "502", provider: "acme", status: 502, body: "upstream connect error or disconnect/reset before headers", want: ReasonTimeout},
		{name: "504 empty", provider: "acme", status: 504, want: ReasonTimeout},
		{name: "500 empty", provider: "acme", status: 500, want: ReasonTimeout},
		{name: "api_error internal server error", provider: "anthropic", status: 500, body: `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, want: ReasonTimeout},
		{name: "unknown error 520 json", provider: "anthropic", status: 500, body: `{"type":"error","error":{"type":"api_error","message":"unknown error, 520 (1000)"}}`, want: ReasonTimeout},
		{name: "upstream error", provider: "acme", status: 200, body: `{"error":{"message":"upstream error: do request failed"}}`, want: ReasonTimeout},
		{name: "backend error", provider: "acme", status: 500, body: `{"error":{"message":"Backend Error"}}`, want: ReasonTimeout},
		{name: "cloudflare 520 html", provider: "anthropic", status: 520, body: "<!DOCTYPE html><html><head><title>api.anthropic.com | 520: Web server is returning an unknown error</title><style>body{}</style></head><body><h1>Web server is returning an unknown error</h1></body></html>", want: ReasonTimeout},
		{name: "cloudflare 522 html", provider: "acme", status: 522, body: "<html><head><title>522: Connection timed out</title></head><body>x</body></html>", want: ReasonTimeout},
		{name: "unhandled stop reason", provider: "openai-compatible", body: "Unhandled stop reason: error", want: ReasonTimeout},
		{name: "stop reason error", provider: "any", body: "stream ended: stop reason: error", want: ReasonTimeout},
		{name: "an unknown error occurred", provider: "any", body: "An unknown error occurred", want: ReasonTimeout},
		{name: "408 request was aborted (server)", provider: "cloudflare-workers-ai", status: 408, body: "Request was aborted", want: ReasonTimeout},
		{name: "chinese internal error", provider: "dashscope", status: 500, body: `{"code":"InternalError","message":"系统内部错误，请稍后重试"}`, want: ReasonTimeout},
		{name: "chinese network error", provider: "zhipu", body: `网络错误，请求超时`, want: ReasonTimeout},
	})
}

func TestClassify_C6_IdleTimeoutSetsIdle(t *testing.T) {
	f := Classify(Response{Provider: "openai", Status: 200, Stream: true, Err: fmt.Errorf("no chunk for 30s: %w", ErrIdleTimeout)}, clNow)
	if f.Reason != ReasonTimeout || !f.Idle || f.Class != ClassTransient {
		t.Fatalf("got %+v, want idle timeout", f)
	}
	f = Classify(Response{Provider: "openai", Err: ErrAttemptTimeout}, clNow)
	if f.Idle {
		t.Fatal("attempt timeout must not be idle")
	}
}

func TestClassify_C1_AbortedOnlyForCaller(t *testing.T) {
	runClCases(t, []clCase{
		{name: "context canceled", provider: "openai", err: fmt.Errorf("call: %w", context.Canceled), want: ReasonAborted},
		{name: "sdk request was aborted", provider: "anthropic", body: "Request was aborted.", want: ReasonAborted},
		{name: "499 cancelled by user", provider: "acme", status: 499, body: "request cancelled by user", want: ReasonAborted},
		{name: "idle wins over cancel", provider: "openai", err: fmt.Errorf("%w: %w", ErrIdleTimeout, context.Canceled), want: ReasonTimeout},
	})
}

func TestClassify_C7_GenericTextIsUnclassified(t *testing.T) {
	runClCases(t, []clCase{
		{name: "llm request failed unknown", provider: "any", body: "LLM request failed with an unknown error.", want: ReasonUnclassified},
		{name: "ollama memory on 500", provider: "ollama", status: 500, body: `{"error":"model requires more system memory (5.3 GiB) than is available (3.3 GiB)"}`, want: ReasonUnclassified},
		{name: "plain words on 200", provider: "any", status: 200, body: "something odd happened", want: ReasonUnclassified},
	})
}

func TestClassify_C8_ContextOverflow(t *testing.T) {
	runClCases(t, []clCase{
		{name: "request_too_large 413", provider: "anthropic", status: 413, body: `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`, want: ReasonContextOverflow},
		{name: "limit requested on 429", provider: "openai", status: 429, body: `{"error":{"message":"Request too large for gpt-4o-mini in organization org-x on tokens per min (TPM): Limit 200000, Requested 250123.","type":"tokens","code":"rate_limit_exceeded"}}`, want: ReasonContextOverflow},
		{name: "limit requested smaller is rate limit", provider: "openai", status: 429, body: `{"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.","code":"rate_limit_exceeded"}}`, want: ReasonRateLimit},
		{name: "input token count exceeds", provider: "google-vertex", status: 400, body: `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`, want: ReasonContextOverflow},
		{name: "ollama context length exceeded", provider: "ollama", status: 500, body: `{"error":"ollama error: context length exceeded"}`, want: ReasonContextOverflow},
		{name: "mistral too large", provider: "mistral", status: 400, body: `{"object":"error","message":"Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length","type":"invalid_request_error"}`, want: ReasonContextOverflow},
		{name: "dashscope input length range", provider: "dashscope", status: 400, body: `{"code":"InvalidParameter","message":"Range of input length should be [1, 30720]"}`, want: ReasonContextOverflow},
		{name: "chinese context too long", provider: "moonshot", status: 400, body: `{"error":{"message":"输入内容超出最大长度限制，请压缩上下文"}}`, want: ReasonContextOverflow},
		{name: "max_tokens above limit is format", provider: "groq", status: 400, body: `max_tokens must be less than or equal to 16384`, want: ReasonFormat},
	})
}

func TestClassify_C9_Format(t *testing.T) {
	runClCases(t, []clCase{
		{name: "unsupported parameter", provider: "openai", status: 400, body: `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`, want: ReasonFormat},
		{name: "invalid request", provider: "anthropic", status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate between \"user\" and \"assistant\""}}`, want: ReasonFormat},
		{name: "422 unprocessable", provider: "acme", status: 422, body: `{"detail":[{"loc":["body","messages"],"msg":"field required","type":"value_error.missing"}]}`, want: ReasonFormat},
		{name: "chinese bad param", provider: "zhipu", status: 400, body: `{"error":{"code":"1210","message":"API 调用参数有误，请检查文档。"}}`, want: ReasonFormat},
		{name: "timeout param is still format", provider: "openai", status: 400, body: `{"error":{"message":"Unrecognized request argument supplied: timeout","type":"invalid_request_error"}}`, want: ReasonFormat},
	})
}

func TestClassify_C10_PreciseLabels(t *testing.T) {
	runClCases(t, []clCase{
		{name: "nothing at all", provider: "openai", want: ReasonEmptyResponse},
		{name: "200 empty body", provider: "openai", status: 200, want: ReasonEmptyResponse},
		{name: "empty output error", provider: "openai", status: 200, err: fmt.Errorf("turn: %w", ErrEmptyOutput), want: ReasonEmptyResponse},
		{name: "empty output from content filter", provider: "azure-openai", status: 200, body: `{"choices":[{"finish_reason":"content_filter","message":{"content":""}}]}`, err: ErrEmptyOutput, want: ReasonContentFilter},
		{name: "no error details literal", provider: "openai", body: "Unknown error (no error details in response)", want: ReasonNoErrorDetails},
		{name: "unclassified keeps preview", provider: "acme", body: "weird thing", want: ReasonUnclassified},
	})
	f := Classify(Response{Provider: "acme", Body: "weird thing"}, clNow)
	if f.Message != "weird thing" {
		t.Fatalf("raw preview not kept: %q", f.Message)
	}
}

func TestClassify_ContentFilter(t *testing.T) {
	runClCases(t, []clCase{
		{name: "gemini blockReason on 200", provider: "google-gemini", status: 200, body: `{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[]}}`, want: ReasonContentFilter},
		{name: "dashscope data inspection", provider: "dashscope", status: 400, body: `{"code":"DataInspectionFailed","message":"Input data may contain inappropriate content."}`, want: ReasonContentFilter},
		{name: "chinese sensitive", provider: "moonshot", status: 400, body: `{"error":{"message":"输入内容包含敏感信息","type":"content_filter"}}`, want: ReasonContentFilter},
		{name: "openai content_policy_violation", provider: "openai", status: 400, body: `{"error":{"code":"content_policy_violation","message":"Your request was rejected as a result of our safety system."}}`, want: ReasonContentFilter},
	})
}

func TestClassify_AuthAndModel(t *testing.T) {
	runClCases(t, []clCase{
		{name: "401 no text", provider: "acme", status: 401, want: ReasonAuth},
		{name: "openresty 401 html", provider: "acme", status: 401, body: "<html>\r\n<head><title>401 Authorization Required</title></head>\r\n<body>\r\n<center><h1>401 Authorization Required</h1></center>\r\n<hr><center>openresty</center>\r\n</body>\r\n</html>", want: ReasonAuth},
		{name: "anthropic permission_error", provider: "anthropic", status: 403, body: `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`, want: ReasonAuth},
		{name: "chinese invalid key", provider: "dashscope", status: 401, body: `{"code":"InvalidApiKey","message":"无效的API Key"}`, want: ReasonAuth},
		{name: "chinese auth failed", provider: "zhipu", status: 401, body: `{"error":{"code":"1000","message":"身份验证失败。"}}`, want: ReasonAuth},
		{name: "chinese key disabled is permanent", provider: "zhipu", status: 401, body: `{"error":{"code":"1003","message":"您的账号已被封禁"}}`, want: ReasonAuthPermanent},
		{name: "chinese model not exist", provider: "zhipu", status: 400, body: `{"error":{"code":"1211","message":"模型不存在，请检查模型代码。"}}`, want: ReasonModelNotFound},
		{name: "azure deployment missing", provider: "azure-openai", status: 404, body: `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}`, want: ReasonModelNotFound},
		{name: "anthropic not_found_error", provider: "anthropic", status: 404, body: `{"type":"error","error":{"type":"not_found_error","message":"model: claude-3-5-sonnet-2024"}}`, want: ReasonModelNotFound},
		{name: "bare 404 html", provider: "acme", status: 404, body: "<html><head><title>404 Not Found</title></head></html>", want: ReasonModelNotFound},
		{name: "dotted model id", provider: "openai", status: 400, body: `The model gpt-3.5-turbo-0301 has been deprecated, transition to gpt-4o-mini`, want: ReasonModelNotFound},
		{name: "one-api no channel", provider: "one-api", status: 503, body: `{"error":{"message":"当前分组 default 下对于模型 gpt-4 无可用渠道","type":"new_api_error"}}`, want: ReasonModelNotFound},
	})
}

// TestClassify_C11_Recovery covers the recovery parsing of Classify.
func TestClassify_C11_Recovery(t *testing.T) {
	t.Run("retry-after two days as http date", func(t *testing.T) {
		at := clNow.Add(48 * time.Hour)
		f := Classify(Response{Provider: "openai", Status: 429, Headers: map[string]string{"Retry-After": at.Format("Mon, 02 Jan 2006 15:04:05 GMT")},
			Body: `{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}`}, clNow)
		if f.Reason != ReasonRateLimit || f.RetryAfter != 48*time.Hour || !f.RecoveryAt.Equal(at) {
			t.Fatalf("got %s %v %v", f.Reason, f.RetryAfter, f.RecoveryAt)
		}
	})
	t.Run("retry-after seconds two days", func(t *testing.T) {
		f := Classify(Response{Provider: "openai", Status: 429, Headers: map[string]string{"retry-after": "172800"}}, clNow)
		if f.RetryAfter != 48*time.Hour || !f.RecoveryAt.Equal(clNow.Add(48*time.Hour)) {
			t.Fatalf("got %v %v", f.RetryAfter, f.RecoveryAt)
		}
	})
	t.Run("year-less reset text", func(t *testing.T) {
		f := Classify(Response{Provider: "alibaba-dashscope", Status: 429,
			Body: `{"code":"Throttling.AllocationQuota","message":"Your token-plan 1-week quota has been exhausted. The quota will reset at 08-25 01:37:00 UTC."}`}, clNow)
		want := time.Date(2026, 8, 25, 1, 37, 0, 0, time.UTC)
		if f.Reason != ReasonBilling || !f.RecoveryAt.Equal(want) || f.RetryAfter != want.Sub(clNow) {
			t.Fatalf("got %s %v %v", f.Reason, f.RecoveryAt, f.RetryAfter)
		}
	})
	t.Run("year-less passed goes to next year", func(t *testing.T) {
		f := Classify(Response{Provider: "alibaba-dashscope", Status: 429,
			Body: `{"message":"Your token-plan quota has been exhausted. The quota will reset at 08-14 09:18:00 UTC."}`}, clNow)
		want := time.Date(2027, 8, 14, 9, 18, 0, 0, time.UTC)
		if !f.RecoveryAt.Equal(want) {
			t.Fatalf("got %v, want %v", f.RecoveryAt, want)
		}
	})
	t.Run("x-ratelimit reset headers only for rate limits", func(t *testing.T) {
		h := map[string]string{"x-ratelimit-reset-requests": "6ms", "x-ratelimit-reset-tokens": "1m30s"}
		f := Classify(Response{Provider: "openai", Status: 400, Headers: h, Body: `{"error":{"code":"invalid_prompt","message":"flagged"}}`}, clNow)
		if f.Reason != ReasonContentFilter || f.RetryAfter != 0 || !f.RecoveryAt.IsZero() {
			t.Fatalf("content filter got recovery %v %v", f.RetryAfter, f.RecoveryAt)
		}
		f = Classify(Response{Provider: "openai", Status: 429, Headers: h}, clNow)
		if f.RetryAfter != 90*time.Second {
			t.Fatalf("rate limit reset = %v, want 1m30s", f.RetryAfter)
		}
	})
	t.Run("retry-after-ms beats body stamp", func(t *testing.T) {
		f := Classify(Response{Provider: "zhipu", Status: 429, Headers: map[string]string{"Retry-After-Ms": "997000"},
			Body: `{"type":"error","error":{"type":"rate_limit_error","message":"Usage limit reached for 5 hour. Your limit will reset at 2026-09-12 00:35:41"}}`}, clNow)
		if f.RetryAfter != 997*time.Second || !f.RecoveryAt.Equal(clNow.Add(997*time.Second)) {
			t.Fatalf("got %v %v", f.RetryAfter, f.RecoveryAt)
		}
	})
	t.Run("long stated time kept uncapped", func(t *testing.T) {
		f := Classify(Response{Provider: "anthropic", Status: 400,
			Body: `{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified API usage limits. You will regain access on 2026-12-01 at 00:00 UTC."}}`}, clNow)
		want := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		if f.Reason != ReasonRateLimit || !f.RecoveryAt.Equal(want) {
			t.Fatalf("got %s %v", f.Reason, f.RecoveryAt)
		}
	})
	t.Run("google retryDelay", func(t *testing.T) {
		f := Classify(Response{Provider: "google-gemini", Status: 429,
			Body: `{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"34s"}]}}`}, clNow)
		if f.RetryAfter != 34*time.Second {
			t.Fatalf("retryDelay = %v", f.RetryAfter)
		}
	})
}

// resetOf is the recovery moment Classify reads in a 429's text.
func resetOf(text string) (time.Time, bool) {
	v := Classify(Response{Provider: "any", Status: 429, Body: text}, clNow)
	return v.RecoveryAt, !v.RecoveryAt.IsZero()
}

// TestClassify_C11_ResetInText: waits and moments stated in a failure's text.
func TestClassify_C11_ResetInText(t *testing.T) {
	cases := []struct {
		text string
		want time.Time
		ok   bool
	}{
		{"Please try again in 18.642s.", clNow.Add(18642 * time.Millisecond), true},
		{"retry in 9m38.016s", clNow.Add(9*time.Minute + 38016*time.Millisecond), true},
		{"Please try again in 6ms.", clNow.Add(6 * time.Millisecond), true},
		{`"retryDelay": "34s"`, clNow.Add(34 * time.Second), true},
		{"Please retry after 9 seconds.", clNow.Add(9 * time.Second), true},
		{"try again after 1 hour and 30 minutes", clNow.Add(90 * time.Minute), true},
		{"You will regain access on 2026-04-01 at 00:00 UTC.", time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), true},
		{"Your limit will reset at 2026-09-09 05:38:28", time.Date(2026, 9, 9, 5, 38, 28, 0, time.UTC), true},
		{"The quota will reset at 08-25 01:37:00 UTC.", time.Date(2026, 8, 25, 1, 37, 0, 0, time.UTC), true},
		{"The quota will reset at 01-02 03:04:05 UTC.", time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC), true},
		{"请 30 秒后重试", clNow.Add(30 * time.Second), true},
		{"Upgrade to Plus, or try again after 11:34 AM.", time.Date(2026, 8, 20, 11, 34, 0, 0, time.UTC), true},
		{"Available again at 09:15 UTC", time.Date(2026, 8, 21, 9, 15, 0, 0, time.UTC), true},
		{"try again after 9:30 pm +02:00", time.Date(2026, 8, 20, 19, 30, 0, 0, time.UTC), true},
		{"The meeting is at 10:30.", time.Time{}, false},
		{"created at 2026-02-27T07:37:56Z by someone", time.Time{}, false},
		{"The quota will reset at 02-30 01:00:00 UTC.", time.Time{}, false},
		{"no time here", time.Time{}, false},
		{"", time.Time{}, false},
	}
	for _, c := range cases {
		got, ok := resetOf(c.text)
		if ok != c.ok || !got.Equal(c.want) {
			t.Errorf("%q: reset %v, %v; want %v, %v", c.text, got, ok, c.want, c.ok)
		}
		if ok && got.Year() == 2001 {
			t.Errorf("year 2001 for %q", c.text)
		}
	}
}

// TestClassify_C11_RetryHeaders: the retry and reset headers of a 429.
func TestClassify_C11_RetryHeaders(t *testing.T) {
	cases := []struct {
		name string
		h    map[string]string
		wait time.Duration
		ok   bool
	}{
		{"seconds", map[string]string{"Retry-After": "2"}, 2 * time.Second, true},
		{"ms", map[string]string{"retry-after-ms": "1500"}, 1500 * time.Millisecond, true},
		{"http date", map[string]string{"RETRY-AFTER": clNow.Add(time.Hour).Format("Mon, 02 Jan 2006 15:04:05 GMT")}, time.Hour, true},
		{"past date is zero wait", map[string]string{"Retry-After": clNow.Add(-time.Hour).Format("Mon, 02 Jan 2006 15:04:05 GMT")}, 0, true},
		{"exhausted bucket wins", map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2m59.56s", "x-ratelimit-remaining-tokens": "100", "x-ratelimit-reset-tokens": "7.66s"}, 2*time.Minute + 59560*time.Millisecond, true},
		{"tokens by default", map[string]string{"x-ratelimit-reset-requests": "2m59.56s", "x-ratelimit-reset-tokens": "7.66s"}, 7660 * time.Millisecond, true},
		{"generic reset seconds", map[string]string{"X-RateLimit-Reset": "60"}, time.Minute, true},
		{"epoch ms", map[string]string{"X-RateLimit-Reset": fmt.Sprint(clNow.Add(10 * time.Minute).UnixMilli())}, 10 * time.Minute, true},
		{"anthropic rfc3339", map[string]string{"anthropic-ratelimit-tokens-reset": clNow.Add(5 * time.Minute).Format(time.RFC3339)}, 5 * time.Minute, true},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
		{"none", nil, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Classify(Response{Provider: "openai", Status: 429, Headers: c.h}, clNow)
			w, at, ok := v.RetryAfter, v.RecoveryAt, !v.RecoveryAt.IsZero()
			if ok != c.ok || w != c.wait {
				t.Fatalf("got %v %v %v, want %v %v", w, at, ok, c.wait, c.ok)
			}
			if ok && c.wait > 0 && !at.Equal(clNow.Add(c.wait)) {
				t.Fatalf("at = %v, want now+%v", at, c.wait)
			}
		})
	}
}

// TestClassify_MessageBoundedNotRedacted: Verdict.Message is one bounded line
// of the provider's own words. Classify knows no secrets and does not redact
// (callers do, see llm and cmd/bot), so the contract is tested here: the key
// comes back as given, the line is single and bounded.
func TestClassify_MessageBoundedNotRedacted(t *testing.T) {
	body := `{"error":{"message":"Incorrect API key provided: sk-CANARY-abcdefghijklmnop1234.\nSecond line.","code":"invalid_api_key"}}`
	f := Classify(Response{Provider: "any", Status: 401, Body: body}, clNow)
	if f.Message != "Incorrect API key provided: sk-CANARY-abcdefghijklmnop1234. Second line." {
		t.Fatalf("message = %q", f.Message)
	}
	long := strings.Repeat("word ", 500)
	m := Classify(Response{Body: long}, clNow).Message
	if n := len([]rune(m)); n > MaxMessageRunes || !strings.HasSuffix(m, "…") {
		t.Fatalf("message %d runes: %q", n, m)
	}
	if m := Classify(Response{Body: "bad \xff\xfe utf8\r\nline"}, clNow).Message; !utf8.ValidString(m) || strings.ContainsAny(m, "\r\n") {
		t.Fatalf("message not one valid line: %q", m)
	}
}

// TestClassify_ParsesCodeAndMessage checks the JSON envelopes (OpenAI, Anthropic,
// Google, arrays, SSE).
func TestClassify_ParsesCodeAndMessage(t *testing.T) {
	cases := []struct{ body, code, msg string }{
		{`{"error":{"message":"m1","type":"invalid_request_error","code":"invalid_api_key"}}`, "invalid_api_key", "m1"},
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error", "Overloaded"},
		{`{"error":{"code":503,"message":"m3","status":"UNAVAILABLE"}}`, "UNAVAILABLE", "m3"},
		{`[{"error":{"code":429,"message":"m4","status":"RESOURCE_EXHAUSTED"}}]`, "RESOURCE_EXHAUSTED", "m4"},
		{"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"m5\"}}\n\n", "api_error", "m5"},
		{`Error code: 401 - {"error":{"message":"m6","code":"invalid_api_key"}}`, "invalid_api_key", "m6"},
		{`{"error":"m7"}`, "", "m7"},
	}
	for _, c := range cases {
		f := Classify(Response{Provider: "x", Status: 500, Body: c.body}, clNow)
		if f.Code != c.code || f.Message != c.msg {
			t.Errorf("body %q: code %q msg %q, want %q %q", c.body, f.Code, f.Message, c.code, c.msg)
		}
	}
}

// TestClassify_C12_PureAndTotal: same input, same output; odd inputs do not panic.
func TestClassify_C12_PureAndTotal(t *testing.T) {
	r := Response{Provider: "openai", Status: 429, Headers: map[string]string{"Retry-After": "3", "retry-after": "3"}, Body: `{"error":{"message":"Rate limit reached. Please try again in 1s."}}`}
	a, b := Classify(r, clNow), Classify(r, clNow)
	if a != b {
		t.Fatalf("not deterministic: %+v vs %+v", a, b)
	}
	odd := []Response{
		{Body: "{"}, {Body: "[]"}, {Body: "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"},
		{Body: "data: \ndata: [DONE]"}, {Body: "<html"}, {Body: "<title>"}, {Body: "\xff\xfe\x00"},
		{Status: -1}, {Status: 99999}, {Headers: map[string]string{"retry-after": "1e309"}},
		{Headers: map[string]string{"retry-after-ms": "-5"}}, {Headers: map[string]string{"x-ratelimit-reset": "99999999999999999999"}},
		{Body: `{"error":{"metadata":{"raw":"{\"error\":{\"metadata\":{\"raw\":\"{}\"}}}"}}}`},
		{Body: "reset at 9999-12-31 23:59:59 UTC"}, {Body: "reset at 99-99 99:99:99"},
		{Err: errors.New("")}, {Body: strings.Repeat("a", 5<<20)},
	}
	for i, o := range odd {
		f := classify(o, clNow) // the unrecovered path: must not panic
		if f.Reason == "" || f.Class == "" {
			t.Errorf("case %d: empty reason/class", i)
		}
	}
	// year-less on 29 February resolves to the next leap year
	got, ok := resetOf("quota will reset at 02-29 00:00:00 UTC")
	if !ok || !got.Equal(time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("29 Feb: %v %v", got, ok)
	}
}

// dialClosedPort returns the real error of dialing a closed 127.0.0.1 port.
func dialClosedPort(t *testing.T) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
		t.Skip("port unexpectedly open")
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Fatalf("dial error %T is not *net.OpError", err)
	}
	return fmt.Errorf("post chat: %w", err)
}

// TestClassify_C11_OpenRouterBodyHeaders: OpenRouter copies the rate-limit headers
// into metadata.headers of the body.
func TestClassify_C11_OpenRouterBodyHeaders(t *testing.T) {
	reset := clNow.Add(3 * time.Hour)
	body := fmt.Sprintf(`{"error":{"message":"Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free model requests per day","code":429,"metadata":{"headers":{"X-RateLimit-Limit":"50","X-RateLimit-Remaining":"0","X-RateLimit-Reset":"%d"}}}}`, reset.UnixMilli())
	f := Classify(Response{Provider: "openrouter", Status: 429, Body: body}, clNow)
	if f.Reason != ReasonRateLimit || !f.RecoveryAt.Equal(reset) || f.RetryAfter != 3*time.Hour {
		t.Fatalf("got %s %v %v", f.Reason, f.RecoveryAt, f.RetryAfter)
	}
}
