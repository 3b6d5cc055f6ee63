package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// corpusPaths are the classifier's corpora (classify/testdata/corpus).
var corpusPaths = []string{
	"../../classify/testdata/corpus/errors-public.jsonl",
	"../../classify/testdata/corpus/errors-peer.jsonl",
	"../../classify/testdata/corpus/errors-extra.jsonl",
}

type classifyResult struct {
	Reason       *string  `json:"reason"`
	Class        *string  `json:"class"`
	RecoveryAt   *string  `json:"recovery_at"`
	RetryAfterMS *float64 `json:"retry_after_ms"`
	Error        *string  `json:"error"`
}

func runClassifyOn(t *testing.T, input string, args ...string) ([]classifyResult, []string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runClassify(context.Background(), args, strings.NewReader(input), &out, &errb)
	var res []classifyResult
	var raw []string
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r classifyResult
		raw = append(raw, sc.Text())
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("output line %q is not JSON: %v", sc.Text(), err)
		}
		res = append(res, r)
	}
	return res, raw, code
}

// TestRunClassify_Corpus: every corpus line comes back with its expected reason
// and class, in order (covers C1-C12 through the CLI).
func TestRunClassify_Corpus(t *testing.T) {
	for _, p := range corpusPaths {
		t.Run(p[strings.LastIndexByte(p, '/')+1:], func(t *testing.T) { runClassifyCorpus(t, p) })
	}
}

func runClassifyCorpus(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	res, raw, code := runClassifyOn(t, string(data), "--now", "2026-03-15T12:00:00Z")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if len(res) != len(lines) {
		t.Fatalf("%d output lines for %d input lines", len(res), len(lines))
	}
	for i, l := range lines {
		var c struct {
			ID             string  `json:"id"`
			ExpectedReason string  `json:"expected_reason"`
			ExpectedClass  string  `json:"expected_class"`
			Hint           *string `json:"recovery_at_hint"`
		}
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatal(err)
		}
		r := res[i]
		if r.Error != nil || r.Reason == nil || *r.Reason != c.ExpectedReason || *r.Class != c.ExpectedClass {
			t.Errorf("%s: got %s, want %s/%s", c.ID, raw[i], c.ExpectedReason, c.ExpectedClass)
		}
		if c.Hint != nil && (r.RecoveryAt == nil || r.RetryAfterMS == nil) {
			t.Errorf("%s: hint %q not parsed: %s", c.ID, *c.Hint, raw[i])
		}
		if r.RecoveryAt != nil {
			if _, err := time.Parse(time.RFC3339Nano, *r.RecoveryAt); err != nil {
				t.Errorf("%s: recovery_at %q not RFC 3339", c.ID, *r.RecoveryAt)
			}
		}
	}
}

// TestRunClassify_GarbageLines: bad lines get an error line, order and count are
// kept, and processing goes on (C12).
func TestRunClassify_GarbageLines(t *testing.T) {
	input := strings.Join([]string{
		`{"provider":"anthropic","http_status":529,"headers":{},"body":"{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}","stream":false}`,
		`not json at all`,
		``,
		`{"provider":"x","http_status":"429","body":""}`,
		`{"provider":"x","http_status":429,"headers":{"retry-after":2},"body":""}`,
		`[1,2,3]`,
		`{"provider":"x","http_status":null,"headers":null,"body":"Request timed out."}`,
		`{"provider": "x", "body": "sk-CANARY-abcdefghijklmnop1234 {`,
		`{"provider":"openai","http_status":429,"headers":{"Retry-After":"2"},"body":"","stream":false}`,
		"\xff\xfe",
		`{"provider":"x","http_status":429.5}`,
		`{"provider":"x","http_status":-3}`,
		`{"provider":"openai","http_status":400,"body":"{\"error\":{\"message\":\"bad\"}}"}   `,
	}, "\n") // no final newline: the last line still counts
	res, raw, code := runClassifyOn(t, input, "--now", "2026-03-15T12:00:00Z")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	wantErr := []bool{false, true, true, true, true, true, false, true, false, true, true, true, false}
	if len(res) != len(wantErr) {
		t.Fatalf("%d output lines, want %d: %v", len(res), len(wantErr), raw)
	}
	for i, we := range wantErr {
		if (res[i].Error != nil) != we {
			t.Errorf("line %d: error=%v, want %v: %s", i, res[i].Error != nil, we, raw[i])
		}
		if strings.Contains(raw[i], "CANARY") {
			t.Errorf("line %d echoes input: %s", i, raw[i])
		}
	}
	if *res[0].Reason != "overloaded" || *res[6].Reason != "timeout" || *res[12].Reason != "format" {
		t.Fatalf("good lines misclassified: %v", raw)
	}
	if res[0].RecoveryAt != nil || res[0].RetryAfterMS != nil {
		t.Fatalf("no hint must give nulls: %s", raw[0])
	}
	if !strings.Contains(raw[0], `"recovery_at":null`) || !strings.Contains(raw[0], `"retry_after_ms":null`) {
		t.Fatalf("nulls not written: %s", raw[0])
	}
	if res[8].RetryAfterMS == nil || *res[8].RetryAfterMS != 2000 || *res[8].RecoveryAt != "2026-03-15T12:00:02Z" {
		t.Fatalf("retry-after not reported: %s", raw[8])
	}
}

// TestRunClassify_LongLines: a 10 MiB line is accepted, a longer one gets an
// error line, and the next line is still answered.
func TestRunClassify_LongLines(t *testing.T) {
	if testing.Short() {
		t.Skip("large input")
	}
	body := strings.Repeat("a", maxClassifyLine-200)
	ok := `{"provider":"x","http_status":502,"body":"` + body + `"}`
	tooLong := `{"provider":"x","body":"` + strings.Repeat("b", maxClassifyLine+10) + `"}`
	next := `{"provider":"x","http_status":429}`
	res, raw, code := runClassifyOn(t, ok+"\r\n"+tooLong+"\n"+next+"\n")
	if code != exitOK || len(res) != 3 {
		t.Fatalf("exit %d, %d lines", code, len(res))
	}
	if res[0].Reason == nil || *res[0].Reason != "timeout" {
		t.Fatalf("10 MiB line: %.200s", raw[0])
	}
	if res[1].Error == nil {
		t.Fatalf("over-long line not rejected: %.200s", raw[1])
	}
	if res[2].Reason == nil || *res[2].Reason != "rate_limit" {
		t.Fatalf("line after the long one: %s", raw[2])
	}
}

func TestRunClassify_Flags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runClassify(context.Background(), []string{"--now", "yesterday"}, strings.NewReader(""), &out, &errb); code != exitUsage {
		t.Fatalf("bad --now: exit %d", code)
	}
	if code := runClassify(context.Background(), []string{"-h"}, strings.NewReader(""), &out, &errb); code != exitOK {
		t.Fatalf("-h: exit %d", code)
	}
	out.Reset()
	if code := runClassify(context.Background(), nil, strings.NewReader(""), &out, &errb); code != exitOK || out.Len() != 0 {
		t.Fatalf("empty input: exit %d, output %q", code, out.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := runClassify(ctx, nil, strings.NewReader("{}\n"), &out, &errb); code != exitFailed {
		t.Fatalf("cancelled: exit %d", code)
	}
}

// TestRunClassify_Explain: --explain adds the step, rule, evidence and plain
// words, redacted; without it the output is byte for byte what it always was.
func TestRunClassify_Explain(t *testing.T) {
	in := `{"provider":"openai","http_status":401,"body":"{\"error\":{\"message\":\"Incorrect API key provided: sk-CANARY-abcdefghijklmnop1234.\",\"code\":\"invalid_api_key\"}}"}` + "\n" +
		`{"provider":"x","http_status":503,"body":"{\"error\":{\"message\":\"Bearer CANARYtoken0123456789abcdef0123456789 rejected\",\"code\":429}}"}` + "\n" +
		`{"provider":"x","body":"402 items found in the database"}` + "\n"
	_, plain, code := runClassifyOn(t, in, "--now", "2026-03-15T12:00:00Z")
	if code != exitOK || len(plain) != 3 {
		t.Fatalf("exit %d, %d lines", code, len(plain))
	}
	want := []string{
		`{"reason":"auth","class":"deterministic","recovery_at":null,"retry_after_ms":null}`,
		`{"reason":"rate_limit","class":"transient","recovery_at":null,"retry_after_ms":null}`,
		`{"reason":"unclassified","class":"unknown","recovery_at":null,"retry_after_ms":null}`,
	}
	for i := range want {
		if plain[i] != want[i] {
			t.Errorf("line %d without --explain = %s, want %s", i, plain[i], want[i])
		}
	}
	_, raw, code := runClassifyOn(t, in, "--now", "2026-03-15T12:00:00Z", "--explain")
	if code != exitOK || len(raw) != 3 {
		t.Fatalf("exit %d, %d lines", code, len(raw))
	}
	type explained struct {
		Reason  string
		Explain *classifyExplain
	}
	wantWhy := []classifyExplain{
		{Step: "field", Rule: "field/invalid_api_key", Family: "auth", Field: "error.code", Status: 401, StatusFrom: "http", Says: "invalid API key"},
		{Step: "status", Rule: "status/429", Family: "status", Field: "body status", Status: 429, StatusFrom: "body", Says: "rate limit"},
		{Step: "default", Rule: "default/unclassified", Says: "unknown error"},
	}
	for i, line := range raw {
		var e explained
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Explain == nil {
			t.Fatalf("line %d: %s", i, line)
		}
		w, x := wantWhy[i], *e.Explain
		if x.Step != w.Step || x.Rule != w.Rule || x.Family != w.Family || x.Field != w.Field ||
			x.Status != w.Status || x.StatusFrom != w.StatusFrom || x.Says != w.Says || x.Evidence == "" || x.RequestFault != nil {
			t.Errorf("line %d: explain %+v, want %+v", i, x, w)
		}
		if strings.Contains(line, "CANARY") {
			t.Errorf("line %d leaks the key: %s", i, line)
		}
		if !strings.HasPrefix(line, strings.TrimSuffix(want[i], "}")+`,"explain":{`) {
			t.Errorf("line %d: explain must only add a field: %s", i, line)
		}
	}
}

// TestRunClassify_ExplainFamilyAndField: --explain names the family of meaning
// and the field that decided, for a provider's own code (structure first), a text
// family and a format verdict with its C13 judgement.
func TestRunClassify_ExplainFamilyAndField(t *testing.T) {
	in := `{"provider":"zhipu","http_status":429,"body":"{\"error\":{\"code\":\"1305\",\"message\":\"Request rejected\"}}"}` + "\n" +
		`{"provider":"lmstudio","body":"The number of tokens to keep from the initial prompt is greater than the context length."}` + "\n" +
		`{"provider":"x","http_status":400,"body":"400 status code (no body)"}` + "\n" +
		`{"provider":"x","http_status":400,"body":"{\"error\":{\"message\":\"bad\",\"param\":\"messages[0].role\"}}"}` + "\n" +
		`{"provider":"openrouter","http_status":400,"body":"{\"error\":{\"message\":\"Provider returned error\",\"code\":400,\"metadata\":{\"raw\":\"{\\\"error\\\":{\\\"message\\\":\\\"This model's maximum context length is 8192 tokens\\\"}}\"}}}"}` + "\n"
	_, raw, code := runClassifyOn(t, in, "--now", "2026-03-15T12:00:00Z", "--explain")
	if code != exitOK || len(raw) != 5 {
		t.Fatalf("exit %d, %d lines", code, len(raw))
	}
	want := []struct {
		reason, family, field string
		requestFault          *bool
	}{
		{"overloaded", "overloaded", "error.code", nil},
		{"context_overflow", "context-overflow", "body", nil},
		{"format", "status", "http status", ptr(false)},
		{"format", "status", "http status", ptr(true)},
		{"context_overflow", "context-overflow", "error.metadata.raw:error.message", nil},
	}
	for i, line := range raw {
		var e struct {
			Reason  string
			Explain *classifyExplain
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Explain == nil {
			t.Fatalf("line %d: %s", i, line)
		}
		w, x := want[i], e.Explain
		if e.Reason != w.reason || x.Family != w.family || x.Field != w.field ||
			(w.requestFault == nil) != (x.RequestFault == nil) || w.requestFault != nil && *w.requestFault != *x.RequestFault {
			t.Errorf("line %d: %s", i, line)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestRunClassify_ExplainNamesIssue39Families: --explain names the family of
// the text that beat a generic status (a safety stop on a 502, a suspension
// only a person lifts on a 403, a cancel) and where a zoned reset came from.
func TestRunClassify_ExplainNamesIssue39Families(t *testing.T) {
	in := `{"provider":"gemini","http_status":502,"body":"PROXY ERROR 502: Response blocked/empty due to SPII."}` + "\n" +
		`{"provider":"x","http_status":403,"body":"Your account is temporarily locked. Contact our support team to verify your identity."}` + "\n" +
		`{"provider":"x","body":"AbortError: signal is aborted without reason"}` + "\n" +
		`{"provider":"x","http_status":429,"body":"Access resets at 10:57 PM GMT-3"}` + "\n"
	out, raw, code := runClassifyOn(t, in, "--now", "2026-03-15T12:00:00Z", "--explain")
	if code != exitOK || len(raw) != 4 {
		t.Fatalf("exit %d, %d lines", code, len(raw))
	}
	for i, w := range []struct{ reason, family, recovery string }{
		{"content_filter", "content-filter", ""},
		{"auth_permanent", "auth-permanent", ""},
		{"aborted", "aborted", ""},
		{"rate_limit", "usage-window", "text"},
	} {
		var e struct {
			Reason  string
			Explain *classifyExplain
		}
		if err := json.Unmarshal([]byte(raw[i]), &e); err != nil || e.Explain == nil ||
			e.Reason != w.reason || e.Explain.Family != w.family || e.Explain.RecoveryFrom != w.recovery {
			t.Errorf("line %d: %s", i, raw[i])
		}
	}
	if at := out[3].RecoveryAt; at == nil || *at != "2026-03-16T01:57:00Z" {
		t.Errorf("GMT-3 reset: %v", at)
	}
}
