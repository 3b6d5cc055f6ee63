package failover

import (
	"testing"
	"time"
)

var sinkFailure Failure

// classifyBenchCases are typical error bodies (performance target: under 20 µs
// per call; aim under 10 µs on the longest, the OpenAI 429).
var classifyBenchCases = []struct {
	name string
	r    Response
}{
	{"openai-429-json", Response{Provider: "openai", Status: 429, Headers: map[string]string{"x-ratelimit-reset-tokens": "18.642s", "x-ratelimit-remaining-tokens": "0"},
		Body: `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 14567, Requested 24754. Please try again in 18.642s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`}},
	{"anthropic-529", Response{Provider: "anthropic", Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CWEHV9jhQmHP74cqxu7XL"}`}},
	{"html-502", Response{Provider: "anthropic", Status: 502, Body: "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n"}},
}

var classifyBenchNow = time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)

// BenchmarkClassify runs Classify on typical error bodies.
func BenchmarkClassify(b *testing.B) {
	for _, c := range classifyBenchCases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkFailure = Classify(c.r, classifyBenchNow)
			}
		})
	}
}
