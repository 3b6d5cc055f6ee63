package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

func TestMain(m *testing.M) {
	if os.Getenv(rssChildEnv) != "" {
		os.Exit(rssChild()) // a child of TestT1_PeakRSS: run one call, report, exit
	}
	if os.Getenv(emfileChildEnv) != "" {
		os.Exit(emfileChild()) // a child of TestChat_A4_RealEMFILEIsLocal
	}
	goleak.VerifyTestMain(m)
}

const canary = "sk-CANARY-7f3a9c2e51d84b06a1e2"

// rig is a fake server plus a client pointed at it, recording what Classify saw.
type rig struct {
	fake   *fakeprovider.Server
	client *Client
	logs   *syncbuf.Buffer
	mu     sync.Mutex
	seen   []classify.Response
}

func newRig(t *testing.T, idle time.Duration, rules ...fakeprovider.Rule) *rig {
	t.Helper()
	fake := fakeprovider.New(fakeprovider.WithRules(rules...))
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	r := &rig{fake: fake, logs: &syncbuf.Buffer{}}
	r.client = r.newClient(t, fake.BaseURL("openai"), idle, nil)
	t.Cleanup(func() {
		fake.Close()
		r.client.CloseIdleConnections()
	})
	return r
}

func (r *rig) newClient(t *testing.T, base string, idle time.Duration, hc *http.Client) *Client {
	t.Helper()
	c, err := New(Config{
		Provider: "openai", BaseURL: base, ProfileID: "openai:main", APIKey: canary,
		IdleTimeout: idle, HTTPClient: hc,
		Logger: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	r.watch(c)
	return c
}

// watch records every Response c feeds Classify.
func (r *rig) watch(c *Client) {
	c.classify = func(resp classify.Response, now time.Time) classify.Verdict {
		r.mu.Lock()
		r.seen = append(r.seen, resp)
		r.mu.Unlock()
		return classify.Classify(resp, now)
	}
}

func (r *rig) lastResponse(t *testing.T) classify.Response {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		t.Fatal("Classify was not called")
	}
	return r.seen[len(r.seen)-1]
}

func userReq(model, text string) Request {
	return Request{Model: model, Messages: []Message{{Role: "user", Content: text}}}
}

// classifyLanded reports whether classify.Classify is the real one (the
// placeholder answers unclassified for everything).
func classifyLanded() bool {
	f := classify.Classify(classify.Response{Status: 429, Body: `{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}`}, time.Now())
	return f.Reason != classify.ReasonUnclassified
}

func asFailure(t *testing.T, err error) *failover.Failure {
	t.Helper()
	var f *failover.Failure
	if !errors.As(err, &f) {
		t.Fatalf("error %T %v is not a *failover.Failure", err, err)
	}
	return f
}

// modeCase is one fake mode and what the engine must receive.
type modeCase struct {
	mode   fakeprovider.Mode
	rule   fakeprovider.Rule
	reason classify.Reason // "" = success
	// what the client must feed Classify
	status  int
	stream  bool
	bodyHas string
	errIs   error
	errHas  string // in the text of the Err fed to Classify
	headers map[string]string
	idle    bool
	retry   time.Duration
}

func modeCases() []modeCase {
	return []modeCase{
		{mode: fakeprovider.ModeOK},
		{mode: fakeprovider.ModeSlowStream, rule: fakeprovider.Rule{Delay: 20 * time.Millisecond}},
		// covers C11: Retry-After and x-ratelimit-reset-* are captured although go-openai drops them.
		{mode: fakeprovider.ModeRateLimit, rule: fakeprovider.Rule{RetryAfter: 45 * time.Second}, reason: classify.ReasonRateLimit,
			status: 429, bodyHas: "rate_limit_exceeded", retry: 45 * time.Second,
			headers: map[string]string{"retry-after": "45", "retry-after-ms": "45000", "x-ratelimit-reset-requests": "45s"}},
		{mode: fakeprovider.ModeInsufficientQuota, reason: classify.ReasonBilling, status: 429, bodyHas: "insufficient_quota"},
		{mode: fakeprovider.ModeBilling402, reason: classify.ReasonBilling, status: 402, bodyHas: "Insufficient credits"},
		{mode: fakeprovider.ModeUnauthorized401, reason: classify.ReasonAuth, status: 401, bodyHas: "invalid_api_key"},
		{mode: fakeprovider.ModeRevoked403, reason: classify.ReasonAuthPermanent, status: 403, bodyHas: "revoked"},
		{mode: fakeprovider.ModeModelNotFound404, reason: classify.ReasonModelNotFound, status: 404, bodyHas: "model_not_found"},
		{mode: fakeprovider.ModeContextOverflow400, reason: classify.ReasonContextOverflow, status: 400, bodyHas: "context_length_exceeded"},
		{mode: fakeprovider.ModeFormat400, reason: classify.ReasonFormat, status: 400, bodyHas: "invalid_request_error"},
		{mode: fakeprovider.ModeServer500, reason: classify.ReasonTimeout, status: 500, bodyHas: "server_error"},
		// a non-JSON proxy page reaches Classify verbatim (go-openai's *RequestError).
		{mode: fakeprovider.ModeBadGateway502HTML, reason: classify.ReasonTimeout, status: 502, bodyHas: "<h1>502 Bad Gateway</h1>"},
		{mode: fakeprovider.ModeUnavailable503, reason: classify.ReasonTimeout, status: 503, bodyHas: "Service Unavailable"},
		{mode: fakeprovider.ModeOverloaded529, reason: classify.ReasonOverloaded, status: 529, bodyHas: "overloaded_error"},
		{mode: fakeprovider.ModeStallAfterFirstChunk, reason: classify.ReasonTimeout, status: 200, stream: true, errIs: classify.ErrIdleTimeout, idle: true},
		{mode: fakeprovider.ModeHangBeforeHeaders, reason: classify.ReasonTimeout, status: 0, errIs: classify.ErrIdleTimeout, idle: true},
		// covers R13: an empty 200 is an error carrying ErrEmptyOutput.
		{mode: fakeprovider.ModeEmptyReply, reason: classify.ReasonEmptyResponse, status: 200, errIs: classify.ErrEmptyOutput},
		// covers E4: keep-alives alone (comments, empty and whitespace chunks) are an idle stream.
		{mode: fakeprovider.ModeKeepAliveOnly, reason: classify.ReasonTimeout, status: 200, stream: true, errIs: classify.ErrIdleTimeout, idle: true},
		// covers E5, R13: an answer of reasoning alone is empty.
		{mode: fakeprovider.ModeReasoningOnly, reason: classify.ReasonEmptyResponse, status: 200, errIs: classify.ErrEmptyOutput},
		// covers R14: an unknown stop reason is an error before any decision.
		{mode: fakeprovider.ModeUnknownFinishReason, reason: classify.ReasonUnclassified, status: 200, stream: true, errHas: "unknown stop reason: weird_reason"},
		// an SSE error event mid-stream: APIError with status 0, rebuilt as the event JSON.
		{mode: fakeprovider.ModeMidstreamError, reason: classify.ReasonTimeout, status: 200, stream: true, bodyHas: `"type":"server_error"`},
		{mode: fakeprovider.ModeConnectionReset, reason: classify.ReasonTimeout, status: 200, stream: true},
		// covers C11 / B6: a year-less reset time in the body.
		{mode: fakeprovider.ModeQuotaResetText, rule: fakeprovider.Rule{ResetText: "08-25 01:37:00 UTC"}, reason: classify.ReasonBilling, status: 429, bodyHas: "will reset at 08-25 01:37:00 UTC"},
		// covers T1, A2: hostile bodies are cut at a cap and fail as refused_response naming it.
		{mode: fakeprovider.ModeGzipBomb, reason: classify.ReasonRefusedResponse, errIs: ErrRefused, errHas: `compressed body (Content-Encoding "gzip"`},
		{mode: fakeprovider.ModeEndlessStream, reason: classify.ReasonRefusedResponse, status: 200, stream: true, errIs: ErrRefused, errHas: "limits.max_response_bytes (8388608 bytes)"},
		{mode: fakeprovider.ModeHugeLine, reason: classify.ReasonRefusedResponse, status: 200, stream: true, errIs: ErrRefused, errHas: "stream line longer than 2162688 bytes"},
		{mode: fakeprovider.ModeHugeChunk, reason: classify.ReasonRefusedResponse, status: 200, stream: true, errIs: ErrRefused, errHas: "stream line longer than 2162688 bytes"},
		// an error body is read up to 64 KiB for classification: the status decides.
		{mode: fakeprovider.ModeHugeErrorBody, reason: classify.ReasonTimeout, status: 500, bodyHas: `"type":"server_error"`},
		// covers T2, A2: a redirect is a failed attempt naming it; nothing is sent to the new location.
		{mode: fakeprovider.ModeRedirectOtherPort, reason: classify.ReasonRefusedResponse, errIs: ErrRefused, errHas: "redirect to http://127.0.0.1:"},
		{mode: fakeprovider.ModeRedirectLoop, reason: classify.ReasonRefusedResponse, errIs: ErrRefused, errHas: "redirect to http://127.0.0.1:"},
	}
}

// TestChat_EveryMode runs the real go-openai client against the fake for every
// mode: what Classify receives (always checked), exactly one HTTP call (no
// hidden retries), and the reason the engine gets (once Classify has landed).
func TestChat_EveryMode(t *testing.T) {
	covered := map[fakeprovider.Mode]bool{}
	landed := classifyLanded()
	for _, tc := range modeCases() {
		covered[tc.mode] = true
		t.Run(string(tc.mode), func(t *testing.T) {
			rule := tc.rule
			rule.Mode = tc.mode
			idle := 3 * time.Second // generous: a loaded -race run must not look idle
			if tc.idle {
				idle = 300 * time.Millisecond
			}
			r := newRig(t, idle, rule)
			var deltas strings.Builder
			out, err := r.client.Chat(context.Background(), userReq("gpt-test", "hello"), func(s string) { deltas.WriteString(s) })
			if n := r.fake.CallCount(fakeprovider.Filter{}); n != 1 {
				t.Fatalf("%d HTTP calls, want exactly 1 (no hidden retries, no redirect followed)", n)
			}
			if hits := r.fake.TrapHits(); len(hits) != 0 {
				t.Fatalf("T2: the redirect target was reached: %+v", hits)
			}
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				want := "[openai/gpt-test] you said: hello"
				if out.Text != want || deltas.String() != want || out.FinishReason != "stop" || !out.Progress ||
					out.InputTokens == 0 || out.OutputTokens == 0 {
					t.Fatalf("output %+v deltas %q", out, deltas.String())
				}
				return
			}
			f := asFailure(t, err)
			if dump := fmt.Sprintf("%v %+v %s", err, *f, r.logs.String()); strings.Contains(dump, "CANARY") { // P4
				t.Fatalf("key in failure or logs: %s", dump)
			}
			if f.Provider != "openai" || f.Model != "gpt-test" || f.Profile != "openai:main" {
				t.Fatalf("failure identity %+v", f)
			}
			if f.Idle != tc.idle {
				t.Fatalf("Idle = %v, want %v", f.Idle, tc.idle)
			}
			resp := r.lastResponse(t)
			if len(resp.Body) > maxErrorBody || len(f.Message) > 1024 {
				t.Fatalf("T1: body of %d bytes, message of %d bytes fed on", len(resp.Body), len(f.Message))
			}
			if resp.Provider != "openai" || resp.Status != tc.status || resp.Stream != tc.stream {
				t.Fatalf("response fed to Classify: status %d stream %v, want %d %v (%+v)", resp.Status, resp.Stream, tc.status, tc.stream, resp)
			}
			if tc.bodyHas != "" && !strings.Contains(resp.Body, tc.bodyHas) {
				t.Fatalf("body %q lacks %q", resp.Body, tc.bodyHas)
			}
			if tc.errIs != nil && !errors.Is(resp.Err, tc.errIs) {
				t.Fatalf("Err %v, want %v", resp.Err, tc.errIs)
			}
			if tc.errHas != "" && (resp.Err == nil || !strings.Contains(resp.Err.Error(), tc.errHas)) {
				t.Fatalf("Err %v, want it to say %q", resp.Err, tc.errHas)
			}
			if tc.errIs == nil && tc.bodyHas == "" && resp.Err == nil {
				t.Fatal("transport failure without Err")
			}
			for k, v := range tc.headers {
				if resp.Headers[k] != v {
					t.Fatalf("header %s = %q, want %q (all %v)", k, resp.Headers[k], v, resp.Headers)
				}
			}
			if !landed {
				t.Logf("classify placeholder: reason assertions skipped (want %s)", tc.reason)
				return
			}
			if f.Reason != tc.reason {
				t.Fatalf("reason %s, want %s (%v)", f.Reason, tc.reason, f)
			}
			if tc.status != 0 && tc.status != 200 && f.Status != tc.status {
				t.Fatalf("failure status %d, want %d", f.Status, tc.status)
			}
			if tc.retry != 0 && f.RetryAfter != tc.retry {
				t.Fatalf("RetryAfter %v, want %v", f.RetryAfter, tc.retry)
			}
			if tc.mode == fakeprovider.ModeQuotaResetText {
				if f.RecoveryAt.IsZero() || f.RecoveryAt.Month() != time.August || f.RecoveryAt.Day() != 25 ||
					f.RecoveryAt.Hour() != 1 || f.RecoveryAt.Minute() != 37 || f.RecoveryAt.Year() < time.Now().UTC().Year() {
					t.Fatalf("RecoveryAt %v", f.RecoveryAt)
				}
			}
		})
	}
	for _, m := range fakeprovider.AllModes {
		if !covered[m] {
			t.Errorf("mode %s has no client test", m)
		}
	}
}

// covers R5/R8: a stalled stream is cut within the idle timeout (+10%) after its
// last chunk, and reported as an idle timeout with the partial text.
func TestChat_R8_IdleStallDetected(t *testing.T) {
	const idle = time.Second // 10% = 100 ms of slack for a loaded -race run
	r := newRig(t, idle, fakeprovider.Rule{Mode: fakeprovider.ModeStallAfterFirstChunk, Reply: "partial answer"})
	var last time.Time
	out, err := r.client.Chat(context.Background(), userReq("m", "x"), func(string) { last = time.Now() })
	elapsed := time.Since(last)
	f := asFailure(t, err)
	if !f.Idle || last.IsZero() {
		t.Fatalf("failure %+v, last delta %v", f, last)
	}
	if elapsed < idle || elapsed > idle+idle/10 {
		t.Fatalf("stall detected after %v, want within [%v, %v]", elapsed, idle, idle+idle/10)
	}
	// R8: the partial text is kept but is not completed progress (it is never
	// delivered), so a stall after one chunk feeds the breaker.
	if out.Text != "partial " || out.Progress || out.FinishReason != "" {
		t.Fatalf("partial output %+v", out)
	}
}

// covers R5: no response headers at all is also an idle timeout.
func TestChat_R5_HangBeforeHeadersDetected(t *testing.T) {
	const idle = time.Second
	r := newRig(t, idle, fakeprovider.Rule{Mode: fakeprovider.ModeHangBeforeHeaders})
	t0 := time.Now()
	_, err := r.client.Chat(context.Background(), userReq("m", "x"), nil)
	elapsed := time.Since(t0)
	f := asFailure(t, err)
	if !f.Idle || !errors.Is(r.lastResponse(t).Err, classify.ErrIdleTimeout) {
		t.Fatalf("failure %+v", f)
	}
	if elapsed > idle+idle/10+20*time.Millisecond {
		t.Fatalf("hang detected after %v", elapsed)
	}
}

// The attempt timeout comes from the caller's deadline (R10) and is not idle.
func TestChat_R10_AttemptTimeoutFromCaller(t *testing.T) {
	r := newRig(t, 5*time.Second, fakeprovider.Rule{Mode: fakeprovider.ModeSlowStream, Delay: time.Second})
	ctx, cancel := context.WithTimeoutCause(context.Background(), 150*time.Millisecond, classify.ErrAttemptTimeout)
	defer cancel()
	_, err := r.client.Chat(ctx, userReq("m", "x"), nil)
	f := asFailure(t, err)
	resp := r.lastResponse(t)
	if f.Idle || !errors.Is(resp.Err, classify.ErrAttemptTimeout) || !resp.Stream {
		t.Fatalf("failure %+v response %+v", f, resp)
	}
	if classifyLanded() && f.Reason != classify.ReasonTimeout {
		t.Fatalf("reason %s", f.Reason)
	}
}

// A caller cancellation is aborted, never a provider failure; nothing leaks.
func TestChat_CallerCancelIsAborted(t *testing.T) {
	for _, mode := range []fakeprovider.Mode{fakeprovider.ModeStallAfterFirstChunk, fakeprovider.ModeHangBeforeHeaders} {
		t.Run(string(mode), func(t *testing.T) {
			fake := fakeprovider.New(fakeprovider.WithRules(fakeprovider.Rule{Mode: mode}))
			if err := fake.Start("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			r := &rig{fake: fake, logs: &syncbuf.Buffer{}}
			c := r.newClient(t, fake.BaseURL("openai"), 10*time.Second, nil)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			t0 := time.Now()
			_, err := c.Chat(ctx, userReq("m", "x"), nil)
			f := asFailure(t, err)
			if f.Reason != classify.ReasonAborted || f.Idle || !errors.Is(r.lastResponse(t).Err, context.Canceled) {
				t.Fatalf("failure %+v", f)
			}
			if time.Since(t0) > 2*time.Second {
				t.Fatal("cancel was not prompt")
			}
			fake.Close()
			c.CloseIdleConnections()
			goleak.VerifyNone(t)
		})
	}
}

// No goroutine or connection is left after an idle timeout.
func TestChat_NoLeakAfterIdleTimeout(t *testing.T) {
	fake := fakeprovider.New(fakeprovider.WithRules(fakeprovider.Rule{Mode: fakeprovider.ModeStallAfterFirstChunk}))
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	r := &rig{fake: fake, logs: &syncbuf.Buffer{}}
	c := r.newClient(t, fake.BaseURL("openai"), 100*time.Millisecond, nil)
	for range 3 {
		if _, err := c.Chat(context.Background(), userReq("m", "x"), nil); err == nil {
			t.Fatal("stall succeeded")
		}
	}
	fake.Close()
	c.CloseIdleConnections()
	goleak.VerifyNone(t)
}

// covers P4: the canary key appears in no error text, Failure field, Response
// fed to Classify, or log line, even when the provider echoes it in full.
func TestChat_P4_CanaryKeyNeverLeaks(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		key := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-ratelimit-reset-requests", key)
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s.","type":"invalid_request_error","code":"%s"}}`, key, key)
	})
	srv := httptest.NewServer(echo)
	defer srv.Close()
	r := &rig{logs: &syncbuf.Buffer{}}
	c := r.newClient(t, srv.URL+"/v1", time.Second, nil)
	defer c.CloseIdleConnections()

	var errs []error
	_, err := c.Chat(context.Background(), userReq("m", "x"), nil)
	errs = append(errs, err)
	errs = append(errs, c.Probe(context.Background(), "m"))

	// and through the fake: 401 (masked echo) and a transport failure.
	rg := newRig(t, time.Second, fakeprovider.Rule{Mode: fakeprovider.ModeUnauthorized401})
	_, err = rg.client.Chat(context.Background(), userReq("m", "x"), nil)
	errs = append(errs, err)

	for _, err := range errs {
		f := asFailure(t, err)
		dump := fmt.Sprintf("%v %+v %#v", err, *f, *f)
		if strings.Contains(dump, "CANARY") {
			t.Fatalf("canary in failure: %s", dump)
		}
	}
	for _, resp := range append(r.seen, rg.seen...) {
		dump := fmt.Sprintf("%+v %v", resp, resp.Err)
		if strings.Contains(dump, "CANARY") {
			t.Fatalf("canary in Response: %s", dump)
		}
	}
	for _, logs := range []string{r.logs.String(), rg.logs.String()} {
		if strings.Contains(logs, "CANARY") || !strings.Contains(logs, "llm call failed") {
			t.Fatalf("logs: %s", logs)
		}
	}
	for _, call := range rg.fake.Calls() {
		if call.KeyID != fakeprovider.KeyID(canary) {
			t.Fatalf("fake logged key id %q", call.KeyID)
		}
	}
}

// covers V5: Probe is the smallest request (max_tokens 1, not streamed).
func TestProbe_V5(t *testing.T) {
	fake := fakeprovider.New()
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		bodies = append(bodies, m)
		mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(b))
		fake.Handler().ServeHTTP(w, req)
	}))
	defer srv.Close()
	defer fake.Close()
	r := &rig{logs: &syncbuf.Buffer{}}
	c := r.newClient(t, srv.URL+"/openai/v1", time.Second, nil)
	defer c.CloseIdleConnections()

	if err := c.Probe(context.Background(), "gpt-4o-mini"); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if err := c.Probe(context.Background(), "o3-mini"); err != nil {
		t.Fatalf("probe reasoning model: %v", err)
	}
	if bodies[0]["max_tokens"] != float64(1) || bodies[0]["stream"] == true {
		t.Fatalf("probe body %v", bodies[0])
	}
	if bodies[1]["max_completion_tokens"] != float64(1) {
		t.Fatalf("reasoning probe body %v", bodies[1])
	}
	fake.Script(fakeprovider.Rule{Mode: fakeprovider.ModeRateLimit, RetryAfter: 2 * time.Minute})
	f := asFailure(t, c.Probe(context.Background(), "gpt-4o-mini"))
	resp := r.lastResponse(t)
	if resp.Status != 429 || resp.Stream || resp.Headers["retry-after"] != "120" || f.Model != "gpt-4o-mini" {
		t.Fatalf("probe failure %+v response %+v", f, resp)
	}
	fake.Script(fakeprovider.Rule{Mode: fakeprovider.ModeHangBeforeHeaders})
	fake.Reset()
	fake.Script(fakeprovider.Rule{Mode: fakeprovider.ModeHangBeforeHeaders})
	if f := asFailure(t, c.Probe(context.Background(), "gpt-4o-mini")); !f.Idle {
		t.Fatalf("hanging probe %+v", f)
	}
}

// Transport failures: refused, DNS (through a custom HTTPClient), truncated stream.
func TestChat_TransportFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/v1"
	ln.Close()

	dnsClient := &http.Client{Timeout: time.Nanosecond, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nil, &net.DNSError{Err: "no such host", Name: "provider.invalid", IsNotFound: true}
		},
	}}

	truncated := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"}}]}\n\n")
	}))
	defer truncated.Close()

	cases := []struct {
		name   string
		base   string
		hc     *http.Client
		stream bool
		check  func(error) bool
	}{
		{"refused", refused, nil, false, func(e error) bool { return strings.Contains(e.Error(), "refused") }},
		{"dns", "http://provider.invalid/v1", dnsClient, false, func(e error) bool { var d *net.DNSError; return errors.As(e, &d) }},
		{"truncated", truncated.URL + "/v1", nil, true, func(e error) bool { return errors.Is(e, errTruncated) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &rig{logs: &syncbuf.Buffer{}}
			c := r.newClient(t, tc.base, time.Second, tc.hc)
			defer c.CloseIdleConnections()
			_, err := c.Chat(context.Background(), userReq("m", "x"), nil)
			f := asFailure(t, err)
			resp := r.lastResponse(t)
			if resp.Err == nil || !tc.check(resp.Err) || resp.Stream != tc.stream || f.Idle {
				t.Fatalf("response %+v err %v", resp, resp.Err)
			}
			if !tc.stream && resp.Status != 0 {
				t.Fatalf("status %d without a response", resp.Status)
			}
			if classifyLanded() && f.Reason != classify.ReasonTimeout {
				t.Fatalf("reason %s, want timeout (C6)", f.Reason)
			}
		})
	}
	if dnsClient.Timeout != time.Nanosecond {
		t.Fatal("caller's client was modified")
	}
}

// covers R8: a completed tool call is progress; output tokens alone are not.
func TestChat_R8_Progress(t *testing.T) {
	write := func(body string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, body)
		}))
	}
	tool := write(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" + "data: [DONE]\n\n")
	defer tool.Close()
	tokens := write(`data: {"choices":[{"index":0,"delta":{"content":""},"finish_reason":"length"}]}` + "\n\n" +
		`data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":50,"total_tokens":55}}` + "\n\n" + "data: [DONE]\n\n")
	defer tokens.Close()

	r := &rig{logs: &syncbuf.Buffer{}}
	c := r.newClient(t, tool.URL+"/v1", time.Second, nil)
	out, err := c.Chat(context.Background(), userReq("m", "x"), nil)
	c.CloseIdleConnections()
	if err != nil || !out.Progress || out.FinishReason != "tool_calls" {
		t.Fatalf("tool call: %+v %v", out, err)
	}
	c = r.newClient(t, tokens.URL+"/v1", time.Second, nil)
	out, err = c.Chat(context.Background(), userReq("m", "x"), nil)
	c.CloseIdleConnections()
	if err == nil || out.Progress || out.OutputTokens != 50 || !errors.Is(r.lastResponse(t).Err, classify.ErrEmptyOutput) {
		t.Fatalf("tokens only: %+v %v", out, err)
	}
}

func TestNew_Validation(t *testing.T) {
	if _, err := New(Config{BaseURL: "http://x"}); err == nil {
		t.Fatal("missing provider accepted")
	}
	if _, err := New(Config{Provider: "p"}); err == nil {
		t.Fatal("missing base url accepted")
	}
	c, err := New(Config{Provider: "p", BaseURL: "http://127.0.0.1:1/v1", APIKey: canary})
	if err != nil || c.cfg.IdleTimeout != DefaultIdleTimeout || c.Provider() != "p" {
		t.Fatalf("defaults: %v %+v", err, c)
	}
}

func TestCaptureTransport_Headers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.Header().Set("X-RateLimit-Reset-Tokens", "1m30s")
		w.Header().Set("Set-Cookie", "secret=1")
		w.WriteHeader(429)
		io.WriteString(w, "slow down")
	}))
	defer srv.Close()
	tr := &captureTransport{base: http.DefaultTransport}
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	h := &capture{}
	req, _ := http.NewRequestWithContext(withCapture(context.Background(), h), http.MethodGet, srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	got := h.headers()
	if string(b) != "slow down" || h.bodyText() != "slow down" || got["retry-after"] != "7" ||
		got["x-ratelimit-reset-tokens"] != "1m30s" || got["set-cookie"] != "" {
		t.Fatalf("body %q headers %v", b, got)
	}
}

// covers C11: stated waits become recovery times on the injected clock, so a
// fake clock in the engine and the client agree.
func TestChat_C11_InjectedClock(t *testing.T) {
	fake := fakeprovider.New(fakeprovider.WithRules(fakeprovider.Rule{Mode: fakeprovider.ModeRateLimit, RetryAfter: 45 * time.Second}))
	srv := httptest.NewServer(fake.Handler())
	defer srv.Close()
	defer fake.Close()
	at := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	c, err := New(Config{Provider: "p", BaseURL: srv.URL + "/p/v1", ProfileID: "p:main", APIKey: "sk-test", Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	_, err = c.Chat(context.Background(), Request{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}}, nil)
	var f *failover.Failure
	if !errors.As(err, &f) {
		t.Fatalf("err %v", err)
	}
	if want := at.Add(45 * time.Second); !f.RecoveryAt.Equal(want) {
		t.Fatalf("RecoveryAt %v, want %v (from the injected clock)", f.RecoveryAt, want)
	}
}

// TestChat_DeltasMatchText: onDelta sees each chunk's text once, in order, and
// together they are the answer.
func TestChat_DeltasMatchText(t *testing.T) {
	var words []string
	for i := range 300 {
		words = append(words, fmt.Sprintf("w%03d", i))
	}
	reply := strings.Join(words, " ")
	r := newRig(t, 5*time.Second, fakeprovider.Rule{Reply: reply})
	var deltas []string
	out, err := r.client.Chat(context.Background(), userReq("gpt-4o", "hi"), func(s string) { deltas = append(deltas, s) })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(deltas, ""); got != out.Text || out.Text != reply {
		t.Fatalf("deltas joined = %q, text = %q", got, out.Text)
	}
	if len(deltas) != len(words) {
		t.Fatalf("%d deltas, want %d", len(deltas), len(words))
	}
	for i, d := range deltas {
		if strings.TrimSpace(d) != words[i] {
			t.Fatalf("delta %d = %q, want %q", i, d, words[i])
		}
	}
}
