package failover

import (
	"context"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
)

// down answers every call with a transient failure until the clock reaches up,
// then answers; it records every attempt.
type down struct {
	h     *harness
	up    time.Time
	calls []Attempt
}

func (d *down) fn(_ context.Context, a Attempt) (Output, error) {
	d.calls = append(d.calls, a)
	if d.h.clk.Now().Before(d.up) {
		return Output{}, &Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Status: 503, Message: "service unavailable"}
	}
	return Output{Text: "back", FinishReason: "stop", Progress: true}, nil
}

// covers R11: every provider down for ten minutes (every profile climbs the ladder
// to 5 minutes), a turn every 5 s: at most one probe per provider per
// cooldown_probe_interval during the outage, and the first turn after recovery
// that finds the interval open is answered, so recovery is seen within
// cooldown_probe_interval (plus the turn spacing).
func TestRun_R11_LongOutageRecoveredWithinProbeInterval(t *testing.T) {
	h := newHarness(t)
	p := h.e.Policy
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	d := &down{h: h, up: t0.Add(10 * time.Minute)}
	var answered time.Time
	for i := 0; i < 200 && answered.IsZero(); i++ {
		res, err := h.e.Run(bg, req, d.fn)
		if err == nil && res.Output.Text == "back" {
			answered = h.clk.Now()
		}
		h.clk.Advance(5 * time.Second)
	}
	if answered.IsZero() {
		t.Fatal("never answered after recovery")
	}
	if late := answered.Sub(d.up); late > p.ProbeInterval+5*time.Second {
		t.Fatalf("first answer %v after recovery, want within %v", late, p.ProbeInterval)
	}
	probes := 0
	for _, a := range d.calls {
		if a.Kind == AttemptProbe {
			probes++
		}
	}
	if probes == 0 {
		t.Fatal("the outage was never probed")
	}
}

// covers R11, A1: during a ten-minute outage with three sessions sending a
// turn every 5 s, each provider is probed at most once per
// probe_interval_seconds (the shared probe), and what the outage costs does
// not grow with the traffic: after the first turns found everything down, in
// any 5 s at most one probe per provider and one attempt per profile whose
// cooldown ended on its own.
func TestRun_R11_A1_AtMostOneProbePerProviderPerInterval(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	up := t0.Add(10 * time.Minute)
	at := map[string][]time.Time{}    // provider -> probe times
	calls := map[string][]time.Time{} // provider -> call times
	fn := func(_ context.Context, a Attempt) (Output, error) {
		calls[a.Candidate.Provider] = append(calls[a.Candidate.Provider], h.clk.Now())
		if a.Kind == AttemptProbe {
			at[a.Candidate.Provider] = append(at[a.Candidate.Provider], h.clk.Now())
		}
		if h.clk.Now().Before(up) {
			return Output{}, &Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Status: 503}
		}
		return Output{Text: "back", FinishReason: "stop", Progress: true}, nil
	}
	turns := 0
	for h.clk.Now().Before(up) {
		for _, s := range []string{"a", "b", "c"} {
			r := req
			r.SessionKey = "console:" + s
			_, _ = h.e.Run(bg, r, fn)
			turns++
		}
		h.clk.Advance(5 * time.Second)
	}
	iv := h.e.Policy.SharedProbeInterval
	for prov, ts := range at {
		for i := 1; i < len(ts); i++ {
			if gap := ts[i].Sub(ts[i-1]); gap < iv {
				t.Fatalf("%s probed twice within %v: %v", prov, gap, ts)
			}
		}
	}
	if len(at) == 0 {
		t.Fatal("no probe during a ten-minute outage")
	}
	paid := 0
	for prov, ts := range calls {
		paid += len(ts)
		var later []time.Time
		for _, c := range ts {
			if c.After(t0) {
				later = append(later, c)
			}
		}
		k := 1 + len(req.Profiles[prov]) // a probe and each profile's natural expiry
		for i := k; i < len(later); i++ {
			if later[i].Sub(later[i-k]) < iv {
				t.Fatalf("%s: %d calls within %v: %v", prov, k+1, iv, later[i-k:i+1])
			}
		}
	}
	t.Logf("%d paid calls for %d turns in a ten-minute outage", paid, turns)
}

// covers R11: a /reset (or /new) right after the primary failed: the next turn
// probes the primary at once, because the failure that started its cooldown is
// not a probe, and the primary answers.
func TestRun_R11_FailureIsNotAProbe(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	sc := newScript(h.clk, ok("x")).on("openai/gpt-4o", failR(classify.ReasonRateLimit))
	if res, err := h.e.Run(bg, req, sc.fn); err != nil || !res.FellBack {
		t.Fatalf("turn 1: %v %+v", err, res.Candidate)
	}
	h.clk.Advance(2 * time.Second) // the cooldown (5 s, A3) ends within the probe window
	sc = newScript(h.clk, ok("primary again"))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.keys(); !eqStrings(got, []string{"openai/gpt-4o@openai:a"}) || res.FellBack || res.Attempts[0].Kind != AttemptProbe {
		t.Fatalf("calls %v, attempts %+v", got, res.Attempts)
	}
}

// covers R11: billing on both keys of the primary: a new session two seconds
// later, a restarted engine and a second engine on the same store make no call to
// them until billing_probe_interval has passed since the billing failure; then
// exactly one probe goes out.
func TestRun_R11_BillingProbeThrottleIsStoredFromTheFailure(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	sc := newScript(h.clk, ok("x")).on("openai/gpt-4o", failR(classify.ReasonBilling), failR(classify.ReasonBilling))
	if res, err := h.e.Run(bg, req, sc.fn); err != nil || !res.FellBack {
		t.Fatalf("turn 1: %v", err)
	}
	if got := sc.keys(); !eqStrings(got, []string{"openai/gpt-4o@openai:a", "openai/gpt-4o@openai:b", "anthropic/claude@anthropic:main"}) {
		t.Fatalf("turn 1 calls %v", got)
	}
	openaiCalls := func(sc *script) int {
		n := 0
		for _, k := range sc.keys() {
			if k[:6] == "openai" {
				n++
			}
		}
		return n
	}
	fresh := func() *Engine {
		return &Engine{Store: h.st, Clock: h.clk, Policy: DefaultPolicy(), Rand: func() float64 { return 0.5 }}
	}
	for _, step := range []struct {
		name    string
		advance time.Duration
		e       *Engine
		session string
	}{
		{"a new session", 2 * time.Second, h.e, "console:other"},
		{"a restarted process", time.Minute, fresh(), "console:test"},
		{"a second replica", 10 * time.Minute, fresh(), "console:third"},
	} {
		h.clk.Advance(step.advance)
		r := req
		r.SessionKey = step.session
		sc := newScript(h.clk, ok("x"))
		if _, err := step.e.Run(bg, r, sc.fn); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if n := openaiCalls(sc); n != 0 {
			t.Fatalf("%s paid %d call(s) to the billing-disabled keys: %v", step.name, n, sc.keys())
		}
	}
	h.clk.Set(t0.Add(h.e.Policy.BillingProbeInterval))
	probes := 0
	for _, e := range []*Engine{h.e, fresh()} {
		sc := newScript(h.clk, failR(classify.ReasonBilling)).on("anthropic/claude", ok("x"))
		if _, err := e.Run(bg, req, sc.fn); err != nil {
			t.Fatal(err)
		}
		probes += openaiCalls(sc)
	}
	if probes != 1 {
		t.Fatalf("%d probes of the billing-disabled primary once the interval passed, want 1", probes)
	}
}

// covers R11: no candidate can be tried (all cooling down, none near its end): the
// one whose cooldown ends soonest is probed before the turn is refused.
func TestRun_R11_AllCoolingDownProbesTheSoonest(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	for _, id := range []string{"openai:a", "openai:b"} {
		h.put(t, id, func(s *ProfileState) {
			s.CooldownUntil, s.CooldownReason = t0.Add(5*time.Minute), classify.ReasonRateLimit
		})
	}
	h.put(t, "anthropic:main", func(s *ProfileState) {
		s.CooldownUntil, s.CooldownReason = t0.Add(4*time.Minute), classify.ReasonOverloaded
	})
	sc := newScript(h.clk, ok("recovered"))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.keys(); !eqStrings(got, []string{"anthropic/claude@anthropic:main"}) || res.Output.Text != "recovered" {
		t.Fatalf("calls %v", got)
	}
	if last := res.Attempts[len(res.Attempts)-1]; last.Kind != AttemptProbe {
		t.Fatalf("the answering attempt is %v, want a probe", last.Kind)
	}
	// A second turn at once, everything failing again: the other provider is
	// probed at once; anthropic, probed a moment ago, is probed again only when
	// its probe_interval_seconds has passed (A1: the turn waits for that probe
	// rather than refusing), and then the turn is refused, within the probe wait.
	h.put(t, "anthropic:main", func(s *ProfileState) {
		s.CooldownUntil, s.CooldownReason = t0.Add(4*time.Minute), classify.ReasonOverloaded
	})
	var at []time.Time
	sc = newScript(h.clk, failR(classify.ReasonOverloaded))
	fn := func(ctx context.Context, a Attempt) (Output, error) {
		at = append(at, h.clk.Now())
		return sc.fn(ctx, a)
	}
	start := h.clk.Now()
	if _, err := h.e.Run(bg, req, fn); err == nil {
		t.Fatal("answered with every candidate failing")
	}
	if got := sc.keys(); !eqStrings(got, []string{"openai/gpt-4o@openai:a", "anthropic/claude@anthropic:main"}) {
		t.Fatalf("second turn probed %v: want the other provider, then anthropic once its interval ended", got)
	}
	if gap := at[1].Sub(t0); gap < h.e.Policy.SharedProbeInterval {
		t.Fatalf("anthropic probed again %v after its last probe", gap)
	}
	if waited := h.clk.Now().Sub(start); waited > h.e.Policy.SharedProbeWait {
		t.Fatalf("the refusal came after %v, want within probe_wait_seconds", waited)
	}
}
