package classify

import (
	"testing"
	"time"
)

var sinkVerdict Verdict

// benchCases are typical failures: the longest common body (an OpenAI 429 with
// headers), a short typed body, an HTML gateway page, a status-only 5xx JSON and a
// sentence no rule matches (every family is tried). Target: under 1 ms per
// Classify (BENCHMARKS.md: a person waits seconds for the call that failed).
var benchCases = []struct {
	name string
	r    Response
}{
	{"openai-429-json", Response{Provider: "openai", Status: 429, Headers: map[string]string{"x-ratelimit-reset-tokens": "18.642s", "x-ratelimit-remaining-tokens": "0"},
		Body: `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 14567, Requested 24754. Please try again in 18.642s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`}},
	{"anthropic-529", Response{Provider: "anthropic", Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CWEHV9jhQmHP74cqxu7XL"}`}},
	{"html-502", Response{Provider: "anthropic", Status: 502, Body: "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n"}},
	{"gateway-500-json", Response{Provider: "gemini", Status: 500, Body: `{"error":{"message":"server boom","code":500}}`}},
	{"prose-unclassified", Response{Provider: "any", Body: "The user terminated the session manually."}},
}

var benchNow = time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)

// corpusFiles are every corpus of testdata/corpus.
var corpusFiles = []string{"testdata/corpus/errors-public.jsonl", "testdata/corpus/errors-peer.jsonl",
	"testdata/corpus/errors-extra.jsonl", "testdata/corpus/errors-holdout.jsonl", "testdata/corpus/errors-holdout2.jsonl",
	"testdata/corpus/errors-families.jsonl", "testdata/corpus/errors-unseen.jsonl", "testdata/corpus/errors-unseen2.jsonl",
	"testdata/corpus/errors-unseen3.jsonl", "testdata/corpus/errors-unseen4.jsonl", "testdata/corpus/errors-unseen5.jsonl",
	"testdata/corpus/errors-unseen6.jsonl", "testdata/corpus/errors-unseen7.jsonl", "testdata/corpus/errors-unseen8.jsonl",
	"testdata/corpus/errors-unseen9.jsonl", "testdata/corpus/errors-unseen10.jsonl", "testdata/corpus/errors-unseen11.jsonl",
	"testdata/corpus/errors-unseen12.jsonl", "testdata/corpus/errors-unseen13.jsonl", "testdata/corpus/errors-unseen14.jsonl",
	"testdata/corpus/errors-unseen15.jsonl", "testdata/corpus/errors-unseen16.jsonl", "testdata/corpus/errors-unseen17.jsonl",
	"testdata/corpus/errors-unseen18.jsonl", "testdata/corpus/errors-unseen19.jsonl", "testdata/corpus/errors-unseen20.jsonl",
	"testdata/corpus/errors-unseen21.jsonl", "testdata/corpus/errors-unseen22.jsonl", "testdata/corpus/errors-unseen23.jsonl",
	"testdata/corpus/errors-unseen24.jsonl", "testdata/corpus/errors-unseen25.jsonl", "testdata/corpus/errors-unseen26.jsonl",
	"testdata/corpus/errors-unseen27.jsonl", "testdata/corpus/errors-unseen28.jsonl"}

// BenchmarkClassify runs Classify on typical failures, and on every corpus case
// in turn (corpus: time per case).
func BenchmarkClassify(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkVerdict = Classify(c.r, benchNow)
			}
		})
	}
	b.Run("corpus", func(b *testing.B) {
		var rs []Response
		for _, p := range corpusFiles {
			for _, c := range loadCorpus(b, p) {
				rs = append(rs, c.response())
			}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			sinkVerdict = Classify(rs[i%len(rs)], benchNow)
			i++
		}
	})
}
