package llm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

// kind is one protocol as the tests speak it: the client's API, the fake's
// route, and the provider id both use.
type kind struct {
	api  API
	fake fakeprovider.API
}

var kinds = []kind{
	{APIOpenAI, fakeprovider.APIOpenAI},
	{APIAzure, fakeprovider.APIAzure},
	{APIAnthropic, fakeprovider.APIAnthropic},
	{APIGemini, fakeprovider.APIGemini},
}

// provider is the provider id the tests give a kind: its name.
func (k kind) provider() string { return string(k.api) }

// testDeployment is the Azure deployment of the tests' model "gpt-test": a name
// of its own, so the path is proved to carry it.
const testDeployment = "dep-gpt-test"

// config is the client configuration of k against the fake at srv.
func (k kind) config(srv *fakeprovider.Server, key string) Config {
	c := Config{Provider: k.provider(), API: k.api, BaseURL: srv.BaseURLFor(k.provider(), k.fake),
		ProfileID: k.provider() + ":main", APIKey: key}
	if k.api == APIAzure {
		c.APIVersion = "2024-10-21"
		c.Deployments = map[string]string{"gpt-test": testDeployment}
	}
	return c
}

// newKindRig is newRig for kind k.
func newKindRig(t *testing.T, k kind, idle time.Duration, rules ...fakeprovider.Rule) *rig {
	t.Helper()
	fake := fakeprovider.New(fakeprovider.WithRules(rules...))
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return clientRig(t, &rig{fake: fake}, k.config(fake, canary), idle, fake.Close)
}

// clientRig gives r a client of cfg with the idle timeout idle, its logs
// kept and its Responses watched; stop ends what serves it, after the test.
func clientRig(t *testing.T, r *rig, cfg Config, idle time.Duration, stop func()) *rig {
	t.Helper()
	r.logs = &syncbuf.Buffer{}
	cfg.IdleTimeout = idle
	cfg.Logger = slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.watch(c)
	r.client = c
	t.Cleanup(func() {
		c.CloseIdleConnections()
		stop()
	})
	return r
}

// outcome is what one call through a kind came to, in terms the engine decides on.
type outcome struct {
	reason  classify.Reason // "" = answered
	class   classify.Class
	idle    bool
	retry   bool // a stated wait or recovery time came with it
	status  int  // the failure's status
	text    string
	message string
}

func callKind(t *testing.T, k kind, rule fakeprovider.Rule, idle time.Duration) (outcome, *rig) {
	t.Helper()
	r := newKindRig(t, k, idle, rule)
	var deltas strings.Builder
	out, err := r.client.Chat(context.Background(), userReq("gpt-test", "hello"), func(s string) { deltas.WriteString(s) })
	if n := r.fake.CallCount(fakeprovider.Filter{}); n != 1 {
		t.Fatalf("%s: %d HTTP calls, want exactly 1 (no hidden retries, no redirect followed)", k.api, n)
	}
	if hits := r.fake.TrapHits(); len(hits) != 0 {
		t.Fatalf("T2: %s: the redirect target was reached: %+v", k.api, hits)
	}
	calls := r.fake.Calls()
	if c := calls[0]; c.API != k.fake || c.Provider != k.provider() || c.Model != "gpt-test" || c.KeyID != fakeprovider.KeyID(canary) {
		t.Fatalf("%s: the fake saw %+v", k.api, c)
	}
	if k.api == APIAzure && calls[0].Deployment != testDeployment {
		t.Fatalf("azure: deployment %q in the path, want %q", calls[0].Deployment, testDeployment)
	}
	if err == nil {
		if deltas.String() != out.Text || out.FinishReason != "stop" || !out.Progress || out.InputTokens == 0 || out.OutputTokens == 0 {
			t.Fatalf("%s: output %+v deltas %q", k.api, out, deltas.String())
		}
		return outcome{text: out.Text}, r
	}
	f := asFailure(t, err)
	if dump := fmt.Sprintf("%v %+v %s", err, *f, r.logs.String()); strings.Contains(dump, "CANARY") { // T8
		t.Fatalf("T8: %s: key in failure or logs: %s", k.api, dump)
	}
	if f.Provider != k.provider() || f.Model != "gpt-test" || f.Profile != k.provider()+":main" {
		t.Fatalf("%s: failure identity %+v", k.api, f)
	}
	if len(f.Message) > 1024 {
		t.Fatalf("T1: %s: message of %d bytes", k.api, len(f.Message))
	}
	return outcome{reason: f.Reason, class: f.Class, idle: f.Idle, retry: f.RetryAfter > 0 || !f.RecoveryAt.IsZero(),
		status: f.Status, message: f.Message}, r
}

// want is what every kind must come to for the failure families failover
// turns on (C1-C5, C8); the status is each protocol's own.
var wantByMode = map[fakeprovider.Mode]struct {
	reason classify.Reason
	status map[API]int // 0 = not checked
}{
	fakeprovider.ModeRateLimit:          {classify.ReasonRateLimit, map[API]int{APIOpenAI: 429, APIAzure: 429, APIAnthropic: 429, APIGemini: 429}},
	fakeprovider.ModeQuotaResetText:     {classify.ReasonBilling, map[API]int{APIAnthropic: 429, APIGemini: 429}},
	fakeprovider.ModeInsufficientQuota:  {classify.ReasonBilling, map[API]int{APIAnthropic: 400, APIGemini: 429}},
	fakeprovider.ModeBilling402:         {classify.ReasonBilling, map[API]int{APIAnthropic: 402, APIGemini: 403}},
	fakeprovider.ModeUnauthorized401:    {classify.ReasonAuth, map[API]int{APIAzure: 401, APIAnthropic: 401, APIGemini: 400}},
	fakeprovider.ModeRevoked403:         {classify.ReasonAuthPermanent, map[API]int{APIAnthropic: 403, APIGemini: 403}},
	fakeprovider.ModeOverloaded529:      {classify.ReasonOverloaded, map[API]int{APIAzure: 503, APIAnthropic: 529, APIGemini: 503}},
	fakeprovider.ModeContextOverflow400: {classify.ReasonContextOverflow, map[API]int{APIAnthropic: 400, APIGemini: 400}},
	fakeprovider.ModeModelNotFound404:   {classify.ReasonModelNotFound, map[API]int{APIAzure: 404, APIAnthropic: 404, APIGemini: 404}},
	fakeprovider.ModeFormat400:          {classify.ReasonFormat, map[API]int{APIAnthropic: 400, APIGemini: 400}},
	fakeprovider.ModeServer500:          {classify.ReasonTimeout, map[API]int{APIAzure: 500, APIAnthropic: 500, APIGemini: 500}},
	fakeprovider.ModeKeepAliveOnly:      {classify.ReasonTimeout, nil},       // E4: idle
	fakeprovider.ModeReasoningOnly:      {classify.ReasonEmptyResponse, nil}, // E5, R13
}

// TestKinds_EveryModeAsOpenAI runs every mode of the fake through the real
// client of each protocol and holds it to what the OpenAI-compatible client
// gets for the same mode: the same reason, class, idle flag and stated
// recovery, so the engine rotates, cools down and falls back alike. The
// families failover turns on (429, quota, billing, auth, overloaded,
// overflow, ...) must also be the named reason, with the protocol's own
// status. covers C1-C6, C8-C11, R13, R14, T1, T2, T8, E4, E5
func TestKinds_EveryModeAsOpenAI(t *testing.T) {
	for _, mode := range fakeprovider.AllModes {
		rule := fakeprovider.Rule{Mode: mode}
		idle := 3 * time.Second
		switch mode {
		case fakeprovider.ModeStallAfterFirstChunk, fakeprovider.ModeHangBeforeHeaders, fakeprovider.ModeKeepAliveOnly:
			idle = 300 * time.Millisecond
		case fakeprovider.ModeRateLimit:
			rule.RetryAfter = 45 * time.Second
		case fakeprovider.ModeSlowStream:
			rule.Delay = 10 * time.Millisecond
		}
		t.Run(string(mode), func(t *testing.T) {
			base, _ := callKind(t, kinds[0], rule, idle)
			for _, k := range kinds[1:] {
				got, r := callKind(t, k, rule, idle)
				if got.reason != base.reason || got.class != base.class || got.idle != base.idle || got.retry != base.retry {
					// Anthropic reports a broken stream as overloaded_error, a
					// different but documented reason of the same class (C5).
					if !(k.api == APIAnthropic && mode == fakeprovider.ModeMidstreamError && got.reason == classify.ReasonOverloaded && got.class == base.class) {
						t.Errorf("%s: %+v, openai: %+v (fed to Classify: %+v)", k.api, got, base, r.lastResponse(t))
					}
				}
				if base.reason == "" && got.text != strings.Replace(base.text, "[openai/", "["+k.provider()+"/", 1) {
					t.Errorf("%s answered %q, openai %q", k.api, got.text, base.text)
				}
				w, ok := wantByMode[mode]
				if !ok {
					continue
				}
				if got.reason != w.reason {
					t.Errorf("%s: reason %s, want %s (%s)", k.api, got.reason, w.reason, got.message)
				}
				if s := w.status[k.api]; s != 0 && got.status != s {
					t.Errorf("%s: status %d, want %d", k.api, got.status, s)
				}
			}
			if w, ok := wantByMode[mode]; ok && base.reason != w.reason {
				t.Errorf("openai: reason %s, want %s", base.reason, w.reason)
			}
		})
	}
}

// covers C11: each protocol's stated wait becomes the same recovery time on
// the injected clock: Retry-After (OpenAI, Azure, Anthropic; Anthropic's
// anthropic-ratelimit-requests-reset says the same moment), Gemini's RetryInfo.
func TestKinds_C11_RateLimitRecovery(t *testing.T) {
	at := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			fake := fakeprovider.New(fakeprovider.WithNow(func() time.Time { return at }),
				fakeprovider.WithRules(fakeprovider.Rule{Mode: fakeprovider.ModeRateLimit, RetryAfter: 90 * time.Second}))
			if err := fake.Start("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			defer fake.Close()
			cfg := k.config(fake, "sk-test-key")
			cfg.Now = func() time.Time { return at }
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseIdleConnections()
			_, err = c.Chat(context.Background(), userReq("gpt-test", "hi"), nil)
			f := asFailure(t, err)
			if want := at.Add(90 * time.Second); f.Reason != classify.ReasonRateLimit || !f.RecoveryAt.Equal(want) || f.RetryAfter != 90*time.Second {
				t.Fatalf("failure %+v, want rate_limit recovering at %v", f, want)
			}
		})
	}
}

// covers L2, R8: every protocol streams its answer word by word; the deltas
// are the answer, and the stop reason is the engine's "stop".
func TestKinds_L2_StreamsWordByWord(t *testing.T) {
	reply := "one two three four five six seven eight"
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			r := newKindRig(t, k, 5*time.Second, fakeprovider.Rule{Mode: fakeprovider.ModeSlowStream, Delay: 5 * time.Millisecond, Reply: reply})
			var deltas []string
			out, err := r.client.Chat(context.Background(), userReq("gpt-test", "hi"), func(s string) { deltas = append(deltas, s) })
			if err != nil || out.Text != reply || strings.Join(deltas, "") != reply || len(deltas) != 8 || out.FinishReason != "stop" {
				t.Fatalf("out %+v err %v deltas %q", out, err, deltas)
			}
		})
	}
}

// covers R5, R8: a stall after the first words is an idle timeout in every
// protocol, with the partial text kept but not counted as progress.
func TestKinds_R8_StallAfterFirstWords(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			r := newKindRig(t, k, 300*time.Millisecond, fakeprovider.Rule{Mode: fakeprovider.ModeStallAfterFirstChunk, Reply: "partial answer"})
			out, err := r.client.Chat(context.Background(), userReq("gpt-test", "hi"), nil)
			f := asFailure(t, err)
			if !f.Idle || f.Reason != classify.ReasonTimeout || out.Text != "partial " || out.Progress {
				t.Fatalf("failure %+v out %+v", f, out)
			}
		})
	}
}

// covers V5, T1, T2, A2: Probe works in every protocol (one smallest call) and
// obeys the caps and the refused redirects.
func TestKinds_V5_Probe(t *testing.T) {
	cases := []struct {
		rule   fakeprovider.Rule
		reason classify.Reason // "" = answered
		says   string
	}{
		{fakeprovider.Rule{}, "", ""},
		{fakeprovider.Rule{Mode: fakeprovider.ModeRateLimit}, classify.ReasonRateLimit, ""},
		{fakeprovider.Rule{Mode: fakeprovider.ModeUnauthorized401}, classify.ReasonAuth, ""},
		{fakeprovider.Rule{Mode: fakeprovider.ModeGzipBomb}, classify.ReasonRefusedResponse, `Content-Encoding "gzip"`},
		{fakeprovider.Rule{Mode: fakeprovider.ModeEndlessStream}, classify.ReasonRefusedResponse, "limits.max_response_bytes (8388608 bytes)"},
		{fakeprovider.Rule{Mode: fakeprovider.ModeHugeChunk, Size: 2 << 20}, classify.ReasonRefusedResponse, "limits.max_answer_bytes (1048576 bytes)"},
		{fakeprovider.Rule{Mode: fakeprovider.ModeRedirectOtherPort}, classify.ReasonRefusedResponse, "redirect to http://127.0.0.1:"},
	}
	for _, k := range kinds {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%s", k.api, tc.rule.Mode), func(t *testing.T) {
				// A long idle timeout: a probe reads its capped body in one go,
				// which takes seconds under -race on a loaded machine.
				r := newKindRig(t, k, 30*time.Second, tc.rule)
				err := r.client.Probe(context.Background(), "gpt-test")
				calls := r.fake.Calls()
				if len(calls) != 1 || calls[0].Stream || calls[0].API != k.fake || len(r.fake.TrapHits()) != 0 {
					t.Fatalf("calls %+v, trap %+v", calls, r.fake.TrapHits())
				}
				if tc.rule.Mode == "" {
					if err != nil {
						t.Fatalf("probe: %v", err)
					}
					return
				}
				f := asFailure(t, err)
				if tc.reason != "" && f.Reason != tc.reason {
					t.Fatalf("failure %+v, want %s", f, tc.reason)
				}
				if tc.says != "" && (!strings.Contains(f.Message, tc.says) || !errors.Is(r.lastResponse(t).Err, ErrRefused)) {
					t.Fatalf("failure %+v, want it to say %q", f, tc.says)
				}
				if strings.Contains(fmt.Sprintf("%v %+v", err, *f)+r.logs.String(), "CANARY") {
					t.Fatal("T8: the key leaked")
				}
			})
		}
	}
}

// covers T8, P4: a provider that echoes the key, in its body and its headers,
// in each protocol's own error shape, never gets it into an error, a Failure,
// what Classify is fed, or a log line.
func TestKinds_T8_CanaryKeyNeverLeaks(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			echo := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				key := req.Header.Get("x-api-key") + req.Header.Get("api-key") + strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("retry-after", key)
				w.Header().Set("anthropic-ratelimit-requests-reset", key)
				w.WriteHeader(http.StatusUnauthorized)
				switch k.api {
				case APIAnthropic:
					fmt.Fprintf(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key %s"}}`, key)
				case APIGemini:
					fmt.Fprintf(w, "[{\n  \"error\": {\"code\": 400, \"message\": \"API key not valid: %s\", \"status\": \"INVALID_ARGUMENT\"}\n}\n]", key)
				default:
					fmt.Fprintf(w, `{"error":{"code":"401","message":"Access denied for key %s"}}`, key)
				}
			})
			srv := httptest.NewServer(echo)
			defer srv.Close()
			logs := &syncbuf.Buffer{}
			cfg := k.config(fakeprovider.New(), canary)
			cfg.BaseURL = srv.URL + "/x"
			cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseIdleConnections()
			var seen []classify.Response
			c.classify = func(resp classify.Response, now time.Time) classify.Verdict {
				seen = append(seen, resp)
				return classify.Classify(resp, now)
			}
			_, cerr := c.Chat(context.Background(), userReq("m", "x"), nil)
			perr := c.Probe(context.Background(), "m")
			for _, e := range []error{cerr, perr} {
				f := asFailure(t, e)
				if dump := fmt.Sprintf("%v %+v %#v", e, *f, *f); strings.Contains(dump, "CANARY") {
					t.Fatalf("canary in failure: %s", dump)
				}
				if f.Reason != classify.ReasonAuth {
					t.Errorf("reason %s, want auth", f.Reason)
				}
			}
			if len(seen) != 2 {
				t.Fatalf("Classify saw %d responses", len(seen))
			}
			for _, resp := range seen {
				if dump := fmt.Sprintf("%+v %v", resp, resp.Err); strings.Contains(dump, "CANARY") || !strings.Contains(resp.Body, "[redacted") {
					t.Fatalf("Response fed to Classify: %s", dump)
				}
			}
			if l := logs.String(); strings.Contains(l, "CANARY") || !strings.Contains(l, "llm call failed") {
				t.Fatalf("logs: %s", l)
			}
		})
	}
}

// covers T2: a redirect is refused in every protocol, the key never reaches
// the target, and the message names the redirect without the key.
func TestKinds_T2_RedirectRefused(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			for _, mode := range []fakeprovider.Mode{fakeprovider.ModeRedirectOtherPort, fakeprovider.ModeRedirectLoop} {
				got, r := callKind(t, k, fakeprovider.Rule{Mode: mode}, 3*time.Second)
				if !strings.Contains(got.message, "redirect") || !strings.Contains(got.message, "never followed") || got.status != 307 {
					t.Fatalf("%s: %+v", mode, got)
				}
				if !errors.Is(r.lastResponse(t).Err, ErrRefused) {
					t.Fatalf("%s: Err %v", mode, r.lastResponse(t).Err)
				}
			}
		})
	}
}

// covers C7, C12: a stream event that is not JSON fails the attempt without
// the decoder's words, which the classifier would read as a bad key.
func TestAnthropic_BadEventIsNotAuth(t *testing.T) {
	c, err := New(Config{Provider: "anthropic", API: APIAnthropic, BaseURL: "http://x.invalid/v1", APIKey: "sk-ant-test",
		HTTPClient: &http.Client{Transport: bodyTransport("event: message_start\ndata: {not json, no key\n\n")}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Chat(context.Background(), userReq("m", "x"), nil)
	f := asFailure(t, err)
	if f.Reason == classify.ReasonAuth || f.Class == classify.ClassDeterministic || !strings.Contains(f.Message, "not JSON") {
		t.Fatalf("failure %+v", f)
	}
}

// The Messages API request detour sends: system messages (R13's retry
// instruction included) go to the top-level system field, empty turns are
// left out, and max_tokens is always set, as the API requires.
func TestAnthropicBody(t *testing.T) {
	temp := float32(0.3)
	got := anthropicBody(Request{Model: "claude-x", Temperature: &temp, Messages: []Message{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: "hi"},
		{Role: "assistant", Content: ""},
		{Role: "user", Content: "again"},
		{Role: "system", Content: "Your previous reply was empty."},
	}}, true)
	if got.MaxTokens != DefaultAnthropicMaxTokens || !got.Stream || got.Temperature == nil || *got.Temperature != temp {
		t.Fatalf("request %+v", got)
	}
	if len(got.System) != 2 || got.System[0].Text != "be brief" || got.System[1].Text != "Your previous reply was empty." {
		t.Fatalf("system %+v", got.System)
	}
	if len(got.Messages) != 2 || got.Messages[0].Role != "user" || got.Messages[1].Content[0].Text != "again" {
		t.Fatalf("messages %+v", got.Messages)
	}
	if p := anthropicBody(Request{Model: "m", MaxTokens: 1}, false); p.MaxTokens != 1 || p.Stream {
		t.Fatalf("probe body %+v", p)
	}
}

// covers R14: Anthropic's stop reasons map onto the engine's list; an unknown
// one stays unknown.
func TestAnthropicStop_R14(t *testing.T) {
	for in, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "model_context_window_exceeded": "length",
		"tool_use": "tool_calls", "refusal": "refusal", "pause_turn": "pause_turn",
	} {
		got, bad := classify.Finish(anthropicStop(in))
		if got != want {
			t.Errorf("%s -> %s, want %s", in, got, want)
		}
		if want := in == "refusal" || in == "pause_turn"; want != (bad != "") {
			t.Errorf("%s: failure %q", in, bad)
		}
	}
}

func TestNew_KindValidation(t *testing.T) {
	if _, err := New(Config{Provider: "p", API: "bedrock", BaseURL: "http://x"}); err == nil {
		t.Fatal("unknown api accepted")
	}
	if _, err := New(Config{Provider: "p", API: APIAzure, BaseURL: "http://x"}); err == nil {
		t.Fatal("azure without api version accepted")
	}
	c, err := New(Config{Provider: "p", API: APIAnthropic, BaseURL: "http://x"})
	if err != nil || c.cfg.APIVersion != DefaultAnthropicVersion || c.api != nil || c.API() != APIAnthropic {
		t.Fatalf("anthropic defaults: %v %+v", err, c)
	}
	if c, err := New(Config{Provider: "p", BaseURL: "http://x"}); err != nil || c.API() != APIOpenAI {
		t.Fatalf("default api: %v", err)
	}
}

// covers C11: a 429 from Anthropic with no retry-after still states its
// recovery through anthropic-ratelimit-requests-reset (an RFC 3339 time).
func TestAnthropic_C11_ResetHeaderAlone(t *testing.T) {
	at := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	reset := at.Add(3 * time.Minute)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("anthropic-ratelimit-requests-remaining", "0")
		w.Header().Set("anthropic-ratelimit-requests-reset", reset.Format(time.RFC3339))
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50 requests per minute."}}`)
	}))
	defer srv.Close()
	c, err := New(Config{Provider: "anthropic", API: APIAnthropic, BaseURL: srv.URL + "/v1", APIKey: "sk-ant-test", Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	_, err = c.Chat(context.Background(), userReq("claude-x", "hi"), nil)
	f := asFailure(t, err)
	if f.Reason != classify.ReasonRateLimit || !f.RecoveryAt.Equal(reset) || f.Status != 429 {
		t.Fatalf("failure %+v, want rate_limit recovering at %v", f, reset)
	}
}
