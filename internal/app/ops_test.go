package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/slack"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/e2e"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// probe is a chat channel for these tests: messages are handed to it, its
// outbound messages are recorded, and it holds a "connection" the test turns
// on and off (adapters.Connector).
type probe struct {
	in        chan adapters.Inbound
	connected atomic.Bool
	mu        sync.Mutex
	out       []adapters.Outbound
	got       chan struct{}
}

func newProbe() *probe { return &probe{in: make(chan adapters.Inbound), got: make(chan struct{}, 100)} }

func (p *probe) Name() string    { return "probe" }
func (p *probe) Connected() bool { return p.connected.Load() }
func (p *probe) Run(ctx context.Context, inbox chan<- adapters.Inbound) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-p.in:
			inbox <- m
		}
	}
}

func (p *probe) Send(_ context.Context, o adapters.Outbound) error {
	p.mu.Lock()
	p.out = append(p.out, o)
	p.mu.Unlock()
	p.got <- struct{}{}
	return nil
}

// say sends text in session key and waits for its reply or error.
func (p *probe) say(t *testing.T, key, text string) adapters.Outbound {
	t.Helper()
	p.in <- adapters.Inbound{Channel: "probe", SessionKey: key, User: "probe:u1", Text: text, ReplyTo: key}
	deadline := time.After(e2e.Wait)
	for {
		p.mu.Lock()
		for _, o := range p.out {
			if o.SessionKey == key && (o.Kind == adapters.KindReply || o.Kind == adapters.KindError) {
				p.mu.Unlock()
				return o
			}
		}
		p.mu.Unlock()
		select {
		case <-p.got:
		case <-deadline:
			t.Fatalf("no answer in %s", key)
		}
	}
}

func startOps(t *testing.T, driver string, p *probe) *e2e.World {
	t.Helper()
	w := e2e.Start(t, e2e.Spec{
		Primary: "p1/alpha", Fallbacks: []string{"p2/beta"},
		Keys:      map[string]string{"p1:main": "sk-CANARY-ops-p1-000000", "p2:main": "sk-CANARY-ops-p2-000000"},
		ExtraYAML: "server: {listen: \"127.0.0.1:0\"}\n",
		Adapter:   p, Driver: driver,
	})
	if w.Sys.OpsAddr() == "" {
		t.Fatal("server.listen is set but no operations endpoint listens")
	}
	return w
}

func get(t *testing.T, w *e2e.World, path string) (int, string) {
	t.Helper()
	var (
		resp *http.Response
		err  error
	)
	// Serve starts the endpoint on its own goroutine; the port is bound since New.
	for range 50 {
		resp, err = http.Get("http://" + w.Sys.OpsAddr() + path)
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// covers M5, V1, E6: after a turn that fell back from a rate-limited primary,
// /metrics counts one failed and one good call, one fallback step from→to with
// its reason, one fallback turn and its duration, and reads the profiles'
// availability from the engine's state; Go runtime and process metrics are
// there too.
func TestOps_M5_MetricsAfterFallback(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		p := newProbe()
		p.connected.Store(true)
		w := startOps(t, driver, p)
		// Overloaded, with no reset stated: a rate limit's Retry-After would
		// keep every call from p1 until then (E3).
		w.LLM.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOverloaded529, Times: 1})

		if o := p.say(t, "probe:s1", "hello"); o.Kind != adapters.KindReply || o.Model != "p2/beta" {
			t.Fatalf("answer = %+v, want a reply from p2/beta", o)
		}
		w.Drain()
		code, body := get(t, w, "/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics = %d\n%s", code, body)
		}
		for _, want := range []string{
			`detour_llm_calls_total{model="alpha",outcome="overloaded",provider="p1",status="529"} 1`,
			`detour_llm_calls_total{model="beta",outcome="ok",provider="p2",status=""} 1`,
			`detour_fallbacks_total{from="p1/alpha",reason="overloaded",to="p2/beta"} 1`,
			`detour_turns_total{channel="probe",outcome="fallback"} 1`,
			`detour_turn_duration_seconds_count{channel="probe"} 1`,
			`detour_turn_overhead_seconds_count 1`,
			`detour_llm_call_duration_seconds_count{provider="p1"} 1`,
			`detour_guard_rejections_total{guard="paid_calls_per_minute"} 0`,
			`detour_profile_available{profile="p1:main"} 0`, // cooling down after the rate limit (D1)
			`detour_profile_available{profile="p2:main"} 1`,
			`detour_model_available{model="p1/alpha"} 0`,
			`detour_model_available{model="p2/beta"} 1`,
			"\ngo_goroutines ",
			"\nprocess_resident_memory_bytes ",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		// Nothing else was counted: no other outcome, step or turn.
		if n := strings.Count(body, "\ndetour_llm_calls_total{"); n != 2 {
			t.Errorf("%d llm call series, want 2", n)
		}
		if n := strings.Count(body, "\ndetour_fallbacks_total{"); n != 1 {
			t.Errorf("%d fallback series, want 1", n)
		}
		if strings.Contains(body, "CANARY") {
			t.Error("P4: a key reached /metrics")
		}

		// A new session probes the primary, whose cooldown ends within two
		// minutes (R11), with the smallest request (E1: it is down); the check
		// answers, then the conversation, and the gauges read its recovery at
		// once. The check is counted apart from the calls (E6).
		if o := p.say(t, "probe:s2", "again"); o.Kind != adapters.KindReply || o.Model != "p1/alpha" {
			t.Fatalf("second answer = %+v, want a reply from p1/alpha", o)
		}
		w.Drain()
		_, body = get(t, w, "/metrics")
		for _, want := range []string{
			`detour_llm_calls_total{model="alpha",outcome="ok",provider="p1",status=""} 1`,
			`detour_llm_probes_total{model="alpha",outcome="ok",provider="p1",status=""} 1`,
			`detour_fallbacks_total{from="p1/alpha",reason="overloaded",to="p2/beta"} 1`,
			`detour_turns_total{channel="probe",outcome="ok"} 1`,
			`detour_turns_total{channel="probe",outcome="fallback"} 1`,
			`detour_profile_available{profile="p1:main"} 1`,
			`detour_model_available{model="p1/alpha"} 1`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("after the second turn /metrics lacks %s\n%s", want, detourLines(body))
			}
		}
	})
}

// covers M5: /healthz answers while the process is up; /readyz is 503 with the
// reason while a channel is disconnected, and 200 once it is connected.
func TestOps_M5_ReadyzFollowsTheChannelsConnection(t *testing.T) {
	p := newProbe()
	w := startOps(t, testdb.SQLite, p)

	tests := []struct {
		name      string
		connected bool
		path      string
		code      int
		body      string
	}{
		{"health while disconnected", false, "/healthz", http.StatusOK, "ok\n"},
		{"not ready while disconnected", false, "/readyz", http.StatusServiceUnavailable, "not ready: not connected: probe\n"},
		{"ready once connected", true, "/readyz", http.StatusOK, "ready\n"},
		{"not ready after the connection drops", false, "/readyz", http.StatusServiceUnavailable, "not ready: not connected: probe\n"},
		{"health while connected", true, "/healthz", http.StatusOK, "ok\n"},
	}
	for _, tc := range tests {
		p.connected.Store(tc.connected)
		code, body := get(t, w, tc.path)
		if code != tc.code || body != tc.body {
			t.Errorf("%s: %s = %d %q, want %d %q", tc.name, tc.path, code, body, tc.code, tc.body)
		}
	}
}

func detourLines(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "detour_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// covers M5 through the real Slack channel: /readyz follows slack-go's Socket
// Mode link to a fake Slack that turns the link off and on again.
func TestOps_M5_ReadyzFollowsSlack(t *testing.T) {
	fs := fakeslack.New()
	fs.AppToken, fs.BotToken = "xapp-CANARY-ops-1", "xoxb-CANARY-ops-1"
	fs.Start()
	t.Cleanup(fs.Close)
	logs := &e2e.SyncBuffer{}
	a, err := slack.New(slack.Config{AppToken: fs.AppToken, BotToken: fs.BotToken, APIURL: fs.URL(), PingInterval: 2 * time.Second,
		Log: e2e.Logger(logs)})
	if err != nil {
		t.Fatal(err)
	}
	w := e2e.Start(t, e2e.Spec{
		Primary: "p1/alpha", Keys: map[string]string{"p1:main": "sk-CANARY-ops-p1-000000"},
		ExtraYAML: "server: {listen: \"127.0.0.1:0\"}\n", Adapter: a, Secrets: []string{fs.AppToken, fs.BotToken}, Logs: logs,
	})
	waitReady := func(code int, body string) {
		t.Helper()
		deadline := time.Now().Add(e2e.Wait)
		for {
			c, b := get(t, w, "/readyz")
			if c == code && b == body {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz = %d %q, want %d %q", c, b, code, body)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitReady(http.StatusOK, "ready\n")
	if err := fs.SendDisconnect("link_disabled"); err != nil {
		t.Fatal(err)
	}
	waitReady(http.StatusServiceUnavailable, "not ready: not connected: slack\n")
	if code, _ := get(t, w, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d while Slack is away", code)
	}
	fs.EnableLink()
	waitReady(http.StatusOK, "ready\n")
}

// covers M6: models people choose through an allow pattern (p1/*) are answered,
// and /metrics counts them as model "other": names nobody configured never
// become label values, however many are tried; configured names keep theirs.
func TestOps_M6_LabelsOnlyFromConfiguredNames(t *testing.T) {
	p := newProbe()
	p.connected.Store(true)
	w := e2e.Start(t, e2e.Spec{
		Primary: "p1/alpha", Fallbacks: []string{"p2/beta"}, Allow: []string{"p1/*"},
		Keys:      map[string]string{"p1:main": "sk-CANARY-ops-p1-000000", "p2:main": "sk-CANARY-ops-p2-000000"},
		ExtraYAML: "server: {listen: \"127.0.0.1:0\"}\n",
		Adapter:   p, Driver: testdb.SQLite,
	})
	const chosen = 5
	for i := range chosen {
		key := fmt.Sprintf("probe:s%d", i)
		model := fmt.Sprintf("p1/made-up-%d", i)
		if o := p.say(t, key, "/model "+model); o.Kind != adapters.KindReply {
			t.Fatalf("/model %s: %+v", model, o)
		}
		p.take()
		if o := p.say(t, key, "hello"); o.Kind != adapters.KindReply || o.Model != model {
			t.Fatalf("answer = %+v, want a reply from %s", o, model)
		}
		p.take()
	}
	if o := p.say(t, "probe:configured", "hello"); o.Kind != adapters.KindReply || o.Model != "p1/alpha" {
		t.Fatalf("answer = %+v, want a reply from p1/alpha", o)
	}
	w.Drain()
	_, body := get(t, w, "/metrics")
	if strings.Contains(body, "made-up") {
		t.Errorf("a name nobody configured became a label value:\n%s", detourLines(body))
	}
	for _, want := range []string{
		fmt.Sprintf(`detour_llm_calls_total{model="other",outcome="ok",provider="p1",status=""} %d`, chosen),
		`detour_llm_calls_total{model="alpha",outcome="ok",provider="p1",status=""} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s\n%s", want, detourLines(body))
		}
	}
}

// take forgets what was recorded, so the next say waits for a new answer.
func (p *probe) take() {
	p.mu.Lock()
	p.out = nil
	p.mu.Unlock()
}
