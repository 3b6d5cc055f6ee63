package fakeprovider

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, opts ...Option) *Server {
	t.Helper()
	s := New(opts...)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		http.DefaultClient.CloseIdleConnections()
	})
	return s
}

func post(t *testing.T, ctx context.Context, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// settled waits until every logged call's handler has returned.
func settled(t *testing.T, s *Server) []Call {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		calls := s.Calls()
		done := true
		for _, c := range calls {
			done = done && c.Duration > 0
		}
		if done {
			return calls
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls did not settle: %+v", calls)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func chatBody(model, text string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model": model, "stream": stream,
		"stream_options": map[string]bool{"include_usage": true},
		"messages":       []map[string]string{{"role": "user", "content": text}},
	})
	return string(b)
}

func TestStreamFraming(t *testing.T) {
	s := start(t)
	resp := post(t, context.Background(), s.BaseURL("openai")+"/chat/completions", "k1", chatBody("gpt-x", "hello there", true))
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	raw, _ := io.ReadAll(resp.Body)
	events := strings.Split(strings.TrimSuffix(string(raw), "\n\n"), "\n\n")
	if got := events[len(events)-1]; got != "data: [DONE]" {
		t.Fatalf("last event %q", got)
	}
	var text strings.Builder
	var sawUsage, sawStop bool
	for _, e := range events[:len(events)-1] {
		payload, ok := strings.CutPrefix(e, "data: ")
		if !ok {
			t.Fatalf("event without data prefix: %q", e)
		}
		var ch struct {
			Choices []struct {
				Delta        struct{ Content string }
				FinishReason *string `json:"finish_reason"`
			}
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(payload), &ch); err != nil {
			t.Fatalf("bad chunk %q: %v", payload, err)
		}
		if ch.Usage != nil {
			sawUsage = true
			if len(ch.Choices) != 0 {
				t.Fatalf("usage chunk must have empty choices: %q", payload)
			}
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
			if c.FinishReason != nil && *c.FinishReason == "stop" {
				sawStop = true
			}
		}
	}
	if want := "[openai/gpt-x] you said: hello there"; text.String() != want {
		t.Fatalf("text %q, want %q", text.String(), want)
	}
	if !sawUsage || !sawStop {
		t.Fatalf("usage %v stop %v", sawUsage, sawStop)
	}
	calls := settled(t, s)
	if len(calls) != 1 || calls[0].Provider != "openai" || calls[0].Model != "gpt-x" || !calls[0].Stream ||
		calls[0].Status != 200 || calls[0].Mode != ModeOK || calls[0].KeyID != KeyID("k1") {
		t.Fatalf("calls %+v", calls)
	}
}

func TestDefaultProviderAndModels(t *testing.T) {
	s := start(t, WithModels("openai", "gpt-a"), WithModels("", "shared"))
	s.Script(Rule{Provider: "openai", Model: "gpt-b", Mode: ModeRateLimit})
	get := func(url string) []string {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Data []struct{ ID string } }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range out.Data {
			ids = append(ids, d.ID)
		}
		return ids
	}
	if got := strings.Join(get(s.BaseURL("openai")+"/models"), ","); got != "gpt-a,shared,gpt-b" {
		t.Fatalf("openai models %q", got)
	}
	if got := strings.Join(get(s.BaseURL("")+"/models"), ","); got != "shared" {
		t.Fatalf("default models %q", got)
	}
	resp := post(t, context.Background(), s.URL()+"/v1/chat/completions", "", chatBody("m", "hi", false))
	defer resp.Body.Close()
	var out struct {
		Choices []struct{ Message struct{ Content string } }
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if len(out.Choices) != 1 || out.Choices[0].Message.Content != "[default/m] you said: hi" {
		t.Fatalf("non-stream answer %+v", out)
	}
}

func TestRulesSpecificityAndTimes(t *testing.T) {
	s := start(t)
	s.Script(Rule{Mode: ModeServer500})                                      // any call
	s.Script(Rule{Provider: "p", Model: "m", Mode: ModeRateLimit, Times: 2}) // then falls through
	s.Script(Rule{Provider: "p", Model: "m", Mode: ModeOverloaded529, Times: 1})
	s.Script(Rule{Provider: "p", Model: "m", KeyID: KeyID("special"), Mode: ModeBilling402})
	status := func(model, key string) int {
		resp := post(t, context.Background(), s.BaseURL("p")+"/chat/completions", key, chatBody(model, "x", false))
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	got := []int{status("m", "k"), status("m", "special"), status("m", "k"), status("m", "k"), status("m", "k"), status("other", "k")}
	want := []int{429, 402, 429, 529, 500, 500}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("statuses %v, want %v", got, want)
		}
	}
	if n := s.CallCount(Filter{Model: "m", Mode: ModeRateLimit}); n != 2 {
		t.Fatalf("rate_limit calls %d", n)
	}
	s.Reset()
	if status("m", "k") != 200 || len(s.Calls()) != 1 {
		t.Fatal("reset did not clear rules and calls")
	}
}

func TestMarkers(t *testing.T) {
	s := start(t)
	s.Script(Rule{Model: "opted-in", HonourMarkers: true})
	status := func(model string) int {
		resp := post(t, context.Background(), s.BaseURL("p")+"/chat/completions", "", chatBody(model, "please #fail:unauthorized_401 now", false))
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("demo-primary"); got != 401 {
		t.Fatalf("primary: %d", got)
	}
	if got := status("fallback"); got != 200 {
		t.Fatalf("fallback honoured the marker: %d", got)
	}
	if got := status("opted-in"); got != 401 {
		t.Fatalf("opted-in: %d", got)
	}
	if m, _, _, ok := findMarker("x #fail:nope"); ok {
		t.Fatalf("unknown marker accepted: %q", m)
	}
}

func TestAdminEndpoints(t *testing.T) {
	s := start(t)
	resp := post(t, context.Background(), s.URL()+"/_fake/script", "",
		`[{"provider":"p","mode":"rate_limit","retry_after":"1m30s","times":1},{"model":"z","mode":"slow_stream","delay":0.5}]`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("script status %d", resp.StatusCode)
	}
	rules := s.Rules()
	if len(rules) != 2 || rules[0].RetryAfter != 90*time.Second || rules[1].Delay != 500*time.Millisecond {
		t.Fatalf("rules %+v", rules)
	}
	resp = post(t, context.Background(), s.BaseURL("p")+"/chat/completions", "sk-CANARY-admin-0000", chatBody("m", "x", false))
	if resp.Header.Get("Retry-After") != "90" || resp.Header.Get("x-ratelimit-reset-requests") != "1m30s" {
		t.Fatalf("headers %v", resp.Header)
	}
	resp.Body.Close()
	cr, err := http.Get(s.URL() + "/_fake/calls")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(cr.Body)
	cr.Body.Close()
	if strings.Contains(string(raw), "CANARY") || !strings.Contains(string(raw), `"mode":"rate_limit"`) {
		t.Fatalf("calls json %s", raw) // covers P4: only the key id is logged
	}
	resp = post(t, context.Background(), s.URL()+"/_fake/script", "", `{"mode":"bogus"}`)
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("bogus mode accepted: %d", resp.StatusCode)
	}
	resp = post(t, context.Background(), s.URL()+"/_fake/reset", "", "")
	resp.Body.Close()
	if len(s.Rules()) != 0 || len(s.Calls()) != 0 {
		t.Fatal("reset endpoint did not reset")
	}
}

func TestParseRulesFile(t *testing.T) {
	f, err := os.Open("testdata/script.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules, err := ParseRules(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 || rules[0].Mode != ModeRateLimit || rules[0].RetryAfter != 45*time.Second ||
		rules[1].Model != "demo-primary" || !rules[1].HonourMarkers {
		t.Fatalf("rules %+v", rules)
	}
	if _, err := ParseRules(strings.NewReader("{not json}\n")); err == nil {
		t.Fatal("bad line accepted")
	}
	b, _ := json.Marshal(rules[0])
	var back Rule
	if err := json.Unmarshal(b, &back); err != nil || back != rules[0] {
		t.Fatalf("round trip %s -> %+v (%v)", b, back, err)
	}
}

// Long-waiting modes end when the server closes, and leave no goroutine behind.
func TestCloseEndsWaitingHandlers(t *testing.T) {
	for _, m := range []Mode{ModeHangBeforeHeaders, ModeStallAfterFirstChunk, ModeSlowStream, ModeKeepAliveOnly} {
		t.Run(string(m), func(t *testing.T) {
			s := New(WithRules(Rule{Mode: m, Delay: time.Hour}))
			if err := s.Start("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			errc := make(chan error, 1)
			go func() {
				resp, err := (&http.Client{Transport: tr}).Post(s.BaseURL("p")+"/chat/completions", "application/json",
					strings.NewReader(chatBody("m", "x", true)))
				if err == nil {
					_, err = io.Copy(io.Discard, bufio.NewReader(resp.Body))
					resp.Body.Close()
				}
				errc <- err
			}()
			time.Sleep(50 * time.Millisecond) // let the handler start waiting
			t0 := time.Now()
			s.Close()
			<-errc
			if d := time.Since(t0); d > 2*time.Second {
				t.Fatalf("close took %v", d)
			}
			tr.CloseIdleConnections()
			goleak.VerifyNone(t)
		})
	}
}

func TestConnectionResetAndHangEndOnClientLeave(t *testing.T) {
	s := start(t)
	s.Script(Rule{Model: "reset", Mode: ModeConnectionReset})
	s.Script(Rule{Model: "hang", Mode: ModeHangBeforeHeaders})
	req, _ := http.NewRequest(http.MethodPost, s.BaseURL("p")+"/chat/completions", strings.NewReader(chatBody("reset", "x", false)))
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("reset mode returned a response")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, s.BaseURL("p")+"/chat/completions", strings.NewReader(chatBody("hang", "x", false)))
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("hang mode returned a response")
	}
	deadline := time.Now().Add(2 * time.Second)
	for c := s.Calls(); len(c) < 2 || c[1].Duration == 0; c = s.Calls() { // set when the handler returns
		if time.Now().After(deadline) {
			t.Fatal("hang handler did not end after the client left")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if c := s.Calls(); c[0].Status != 0 || c[1].Status != 0 {
		t.Fatalf("statuses %+v", c)
	}
}

func TestKeyID(t *testing.T) {
	id := KeyID("sk-CANARY-123")
	if len(id) != 8 || strings.Contains("sk-CANARY-123", id) || KeyID("") != "" || id == KeyID("sk-CANARY-124") {
		t.Fatalf("key id %q", id)
	}
}

// A marker that does nothing says why in the answer: an unknown mode is named
// (with a suggestion and the valid modes), and a valid marker that reaches a
// non-primary model without the primary having failed on it this turn says how
// to get back to the primary. The fallback attempt of a turn whose primary the
// marker did fail carries no note.
func TestMarkerNotes(t *testing.T) {
	s := start(t, WithModels("demo", "primary"), WithModels("backup", "fallback-1"))
	answer := func(provider, model, text string) (int, string) {
		t.Helper()
		resp := post(t, context.Background(), s.BaseURL(provider)+"/chat/completions", "", chatBody(model, text, false))
		defer resp.Body.Close()
		var out struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if len(out.Choices) == 0 {
			return resp.StatusCode, ""
		}
		return resp.StatusCode, out.Choices[0].Message.Content
	}
	allModes := "Valid modes: ok, rate_limit, insufficient_quota, billing_402, unauthorized_401, revoked_403, model_not_found_404, context_overflow_400, format_400, server_500, bad_gateway_502_html, unavailable_503, overloaded_529, stall_after_first_chunk, hang_before_headers, slow_stream, empty_reply, unknown_finish_reason, midstream_error, connection_reset, quota_reset_text, keepalive_only, reasoning_only, gzip_bomb, endless_stream, huge_line, huge_chunk, huge_error_body, redirect_other_port, redirect_loop."
	for _, tc := range []struct {
		name, provider, model, text string
		status                      int
		want                        string
	}{
		{"typo on the primary", "demo", "primary", "hi #fail:rate_limt", 200,
			"[demo/primary] you said: hi #fail:rate_limt\n(fake provider) unknown failure mode \"rate_limt\" in #fail:rate_limt, so nothing failed. Did you mean #fail:rate_limit? " + allModes},
		{"nothing after the colon", "demo", "primary", "hi #fail:", 200,
			"[demo/primary] you said: hi #fail:\n(fake provider) #fail: needs a failure mode after the colon, so nothing failed. " + allModes},
		{"no near mode", "backup", "fallback-1", "hi #fail:zzzzzzzzzzzz", 200,
			"[backup/fallback-1] you said: hi #fail:zzzzzzzzzzzz\n(fake provider) unknown failure mode \"zzzzzzzzzzzz\" in #fail:zzzzzzzzzzzz, so nothing failed. " + allModes},
		{"marker straight on the fallback", "backup", "fallback-1", "again #fail:server_500", 200,
			"[backup/fallback-1] you said: again #fail:server_500\n(fake provider) #fail:server_500 was not applied: markers act only on models whose name contains \"primary\", and this turn went straight to backup/fallback-1 (the conversation is on a fallback, or the primary is cooling down). To go back to the primary: /model default, /reset, or /recover demo/primary."},
		{"upper case is the same mode", "demo", "primary", "x #fail:Server_500", 500, ""},
		{"the primary failed on it", "demo", "primary", "turn #fail:server_500", 500, ""},
		{"the same turn's fallback", "backup", "fallback-1", "turn #fail:server_500", 200,
			"[backup/fallback-1] you said: turn #fail:server_500"},
	} {
		status, text := answer(tc.provider, tc.model, tc.text)
		if status != tc.status || text != tc.want {
			t.Errorf("%s: %d %q\nwant %d %q", tc.name, status, text, tc.status, tc.want)
		}
	}
	s.Reset()
	if _, text := answer("backup", "fallback-1", "turn #fail:server_500"); !strings.Contains(text, "was not applied") {
		t.Errorf("Reset kept the memory of acted markers: %q", text)
	}
}
