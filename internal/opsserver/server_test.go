package opsserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/sessions"
)

// serve starts a server for t on a free loopback port and stops it at the end.
func serve(t *testing.T, m *Metrics, c Checks) string {
	t.Helper()
	return "http://" + serveLimited(t, m, c, DefaultLimits)
}

func fetch(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// covers M5, T8: /readyz names what is not ready (a database that does not
// answer, with any credential in its error hidden; channels; shutdown) and
// /healthz stays 200 meanwhile.
func TestReadyz_M5_Reasons(t *testing.T) {
	var pingErr atomic.Pointer[error]
	var down atomic.Pointer[[]string]
	var stopping atomic.Bool
	base := serve(t, NewMetrics(nil, Names{}, nil), Checks{
		Ping: func(ctx context.Context) error {
			if e := pingErr.Load(); e != nil {
				return *e
			}
			return nil
		},
		Disconnected: func() []string {
			if d := down.Load(); d != nil {
				return *d
			}
			return nil
		},
		Stopping: stopping.Load,
	})
	tests := []struct {
		name     string
		ping     error
		down     []string
		stopping bool
		code     int
		body     string
	}{
		{"all well", nil, nil, false, 200, "ready\n"},
		{"database down", errors.New("dial postgres://detour:hunter2@db:5432/detour: connection refused"), nil, false, 503,
			"not ready: database: dial postgres://[redacted]@db:5432/detour: connection refused\n"},
		{"two channels down", nil, []string{"slack", "discord"}, false, 503, "not ready: not connected: slack, discord\n"},
		{"shutting down", nil, nil, true, 503, "not ready: shutting down\n"},
	}
	for _, tc := range tests {
		if tc.ping != nil {
			pingErr.Store(&tc.ping)
		} else {
			pingErr.Store(nil)
		}
		down.Store(&tc.down)
		stopping.Store(tc.stopping)
		if code, body := fetch(t, base+"/readyz"); code != tc.code || body != tc.body {
			t.Errorf("%s: /readyz = %d %q, want %d %q", tc.name, code, body, tc.code, tc.body)
		}
		if code, _ := fetch(t, base+"/healthz"); code != 200 {
			t.Errorf("%s: /healthz = %d", tc.name, code)
		}
	}
}

// covers M5: a failed read of the engine's state leaves the availability gauges
// out of a scrape; the counters are still served.
func TestMetrics_M5_AvailabilityReadFails(t *testing.T) {
	m := NewMetrics(func(ctx context.Context) (Availability, error) {
		return Availability{}, errors.New("database is locked")
	}, Names{}, nil)
	m.Attempt(failover.AttemptRecord{Candidate: failover.Candidate{Provider: "p1", Model: "a"}, Duration: time.Second,
		Failure: &failover.Failure{Reason: classify.ReasonTimeout}})
	m.TurnDone(sessions.TurnReport{Channel: "slack", Outcome: sessions.OutcomeError, Duration: 2 * time.Second, LLMTime: time.Second})
	code, body := fetch(t, serve(t, m, Checks{})+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		`detour_llm_calls_total{model="a",outcome="timeout",provider="p1",status="none"} 1`,
		`detour_turns_total{channel="slack",outcome="error"} 1`,
		`detour_turn_overhead_seconds_sum 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, "detour_profile_available{") {
		t.Error("availability gauges served although the state could not be read")
	}
}

// A busy address is an error at Listen, not later.
func TestListen_M5_BusyAddress(t *testing.T) {
	s, err := Listen("127.0.0.1:0", NewMetrics(nil, Names{}, nil), Checks{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Listen(s.Addr(), NewMetrics(nil, Names{}, nil), Checks{}, nil); err == nil || !strings.Contains(err.Error(), "server.listen") {
		t.Fatalf("second Listen on %s: %v, want an error naming server.listen", s.Addr(), err)
	}
}

// covers M5, V1, C6: the HTTP status stays beside the reason: a 500 is counted
// as server_error with status "500", never as a timeout, in calls and in
// fallback steps; unusual statuses fold into their class, so the label stays
// bounded whatever a provider sends.
func TestMetrics_M5_StatusBesideTheReason(t *testing.T) {
	m := NewMetrics(nil, Names{}, nil)
	for _, st := range []int{500, 599, 777, 0} {
		m.Attempt(failover.AttemptRecord{Candidate: failover.Candidate{Provider: "p1", Model: "a"}, Duration: time.Second,
			Failure: &failover.Failure{Reason: classify.ReasonTimeout, Status: st}})
	}
	m.Fallback("p1/a", "p2/b", classify.ReasonTimeout, 500)
	_, body := fetch(t, serve(t, m, Checks{})+"/metrics")
	for _, want := range []string{
		`detour_llm_calls_total{model="a",outcome="server_error",provider="p1",status="500"} 1`,
		`detour_llm_calls_total{model="a",outcome="server_error",provider="p1",status="5xx"} 1`,
		`detour_llm_calls_total{model="a",outcome="timeout",provider="p1",status="other"} 1`,
		`detour_llm_calls_total{model="a",outcome="timeout",provider="p1",status="none"} 1`,
		`detour_fallbacks_total{from="p1/a",reason="server_error",to="p2/b"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	seen := map[string]bool{}
	for st := -1; st < 1000; st++ {
		seen[StatusLabel(st)] = true
	}
	if len(seen) > 24 {
		t.Errorf("the status label takes %d values", len(seen))
	}
}

// covers U5: tokens and estimated cost are counted by provider and model, the
// estimated ones apart from the reported ones; no other label is used.
func TestMetrics_U5_TokensAndCost(t *testing.T) {
	m := NewMetrics(nil, Names{Models: []string{"p1/a"}, Providers: []string{"p1"}}, nil)
	c := failover.Candidate{Provider: "p1", Model: "a", Profile: "p1:main"}
	m.Attempt(failover.AttemptRecord{Candidate: c, InputTokens: 100, OutputTokens: 20, CostUSD: 0.25})
	m.Attempt(failover.AttemptRecord{Candidate: c, InputTokens: 7, OutputTokens: 3, CostUSD: 0.5, UsageEstimated: true})
	m.Attempt(failover.AttemptRecord{Candidate: c, Failure: &failover.Failure{Reason: classify.ReasonRateLimit, Status: 429}})
	_, body := fetch(t, serve(t, m, Checks{})+"/metrics")
	for _, want := range []string{
		`detour_llm_tokens_total{direction="input",model="a",provider="p1",source="reported"} 100`,
		`detour_llm_tokens_total{direction="output",model="a",provider="p1",source="reported"} 20`,
		`detour_llm_tokens_total{direction="input",model="a",provider="p1",source="estimated"} 7`,
		`detour_llm_tokens_total{direction="output",model="a",provider="p1",source="estimated"} 3`,
		`detour_llm_cost_usd_total{model="a",provider="p1"} 0.75`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, "p1:main") {
		t.Error("a profile id became a label")
	}
}
