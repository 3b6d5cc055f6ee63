package failover

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover/failovertest"
)

// waitFor polls (in real time, briefly) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// coolAll puts every profile of req's chain into a transient cooldown without
// a stated reset, ending at t0+ends[i] for the i-th model's profiles.
func coolAll(t *testing.T, h *harness, ends map[string]time.Duration) {
	t.Helper()
	for id, d := range ends {
		h.put(t, id, func(s *ProfileState) {
			s.CooldownUntil, s.CooldownReason, s.ErrorCount, s.LastFailure = t0.Add(d), classify.ReasonTimeout, 3, t0
		})
	}
}

// covers A1: every candidate cooling down for a transient reason, none near its
// end: the turn probes the one whose cooldown ends soonest, its answer is the
// turn's reply, and its success clears the cooldown for everyone: a second
// session's turn right after uses the candidate with an ordinary call.
func TestRun_A1_AllCoolingProbesAndClearsForEveryone(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	coolAll(t, h, map[string]time.Duration{"openai:a": 50 * time.Second, "openai:b": 55 * time.Second, "anthropic:main": 40 * time.Second})
	h.e.Policy.ProbeWindow = time.Second // no R11 probe of the primary: this is A1's step
	sc := newScript(h.clk, ok("from the probe"))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.keys(); !eqStrings(got, []string{"anthropic/claude@anthropic:main"}) || res.Output.Text != "from the probe" {
		t.Fatalf("calls %v, answer %q", got, res.Output.Text)
	}
	if last := res.Attempts[len(res.Attempts)-1]; last.Kind != AttemptProbe {
		t.Fatalf("the answer came from a %s attempt, want the probe", last.Kind)
	}
	if st := h.state(t, "anthropic:main"); !st.CooldownUntil.IsZero() || st.ErrorCount != 0 {
		t.Fatalf("the probe's success did not clear the cooldown: %+v", st)
	}
	other := req
	other.SessionKey = "slack:T1:C2"
	sc = newScript(h.clk, ok("ordinary"))
	res, err = h.e.Run(bg, other, sc.fn)
	if err != nil || res.Candidate.Ref() != "anthropic/claude" || res.Attempts[len(res.Attempts)-1].Kind != AttemptNormal {
		t.Fatalf("second session: %v %+v", err, res.Attempts)
	}
}

// covers A1: a turn is refused at once, with no call, when every candidate is
// disabled for a deterministic reason (billing, auth_permanent) or a stated
// reset time has not passed (D5).
func TestRun_A1_RefusedAtOnceWhenNothingMayAnswer(t *testing.T) {
	cases := map[string]func(s *ProfileState){
		"billing": func(s *ProfileState) { s.DisabledUntil, s.DisabledReason = t0.Add(5*time.Hour), classify.ReasonBilling },
		"auth_permanent": func(s *ProfileState) {
			s.DisabledUntil, s.DisabledReason = t0.Add(10*time.Minute), classify.ReasonAuthPermanent
		},
		"stated reset ahead": func(s *ProfileState) { // a 503 with Retry-After: 120
			s.CooldownUntil, s.CooldownReason, s.RecoveryAt = t0.Add(2*time.Minute), classify.ReasonTimeout, t0.Add(2*time.Minute)
		},
	}
	for name, set := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.e.Policy.ProbeWindow = time.Second
			h.e.Policy.BillingProbeInterval = 24 * time.Hour
			for _, id := range []string{"openai:a", "openai:b", "anthropic:main"} {
				h.put(t, id, set)
			}
			h.put(t, probeKey("openai#billing"), func(s *ProfileState) { s.LastProbe = t0 })
			sc := newScript(h.clk, ok("x"))
			_, err := h.e.Run(bg, baseReq("openai/gpt-4o", "anthropic/claude"), sc.fn)
			mustSummary(t, err)
			if sc.count() != 0 {
				t.Fatalf("calls %v, want none", sc.keys())
			}
			if h.clk.Now() != t0 {
				t.Fatalf("the refusal waited until %v", h.clk.Now())
			}
		})
	}
}

// covers A1: a shared probe that fails leaves the turn to the next
// provider's probe, in order of likelihood, and when every one failed the turn
// is refused. A turn that comes while every provider was probed within
// probe_interval_seconds waits for the next probe instead of refusing: it is
// answered when a provider recovered meanwhile, and refused within the probe
// wait when none did.
func TestRun_A1_TurnsWaitForTheNextProbe(t *testing.T) {
	h := newHarness(t)
	h.e.Policy.ProbeWindow = time.Second
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	coolAll(t, h, map[string]time.Duration{"openai:a": time.Minute, "anthropic:main": 40 * time.Second})
	down := fail(Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Status: 503})
	sc := newScript(h.clk, down)
	_, err := h.e.Run(bg, req, sc.fn)
	mustSummary(t, err)
	if got := sc.keys(); !eqStrings(got, []string{"anthropic/claude@anthropic:main", "openai/gpt-4o@openai:a"}) || h.clk.Now() != t0 {
		t.Fatalf("turn 1 calls %v at %v, want the probe of the soonest, then of the other provider, at once", got, h.clk.Now())
	}
	// A second later: both were probed within the interval, which their
	// failure doubled (E2: 10 s). The turn waits for the next probe (9 s) and
	// openai, recovered, answers it.
	h.clk.Advance(time.Second)
	sc = newScript(h.clk, ok("back")).on("anthropic/claude", down)
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil || res.Output.Text != "back" {
		t.Fatalf("turn 2: %v, calls %v", err, sc.keys())
	}
	if waited := h.clk.Now().Sub(t0.Add(time.Second)); waited != 2*h.e.Policy.SharedProbeInterval-time.Second {
		t.Fatalf("turn 2 waited %v, want until the doubled interval ended (9s)", waited)
	}
	// Everything down again: a turn within the interval waits, the next probes
	// fail, and it is refused within the probe wait.
	coolAll(t, h, map[string]time.Duration{"openai:a": time.Hour, "anthropic:main": time.Hour})
	h.clk.Advance(time.Second)
	start := h.clk.Now()
	sc = newScript(h.clk, down)
	if _, err := h.e.Run(bg, req, sc.fn); err == nil {
		t.Fatal("answered with every provider down")
	}
	if waited := h.clk.Now().Sub(start); waited > h.e.Policy.SharedProbeWait || sc.count() == 0 || sc.count() > 2 {
		t.Fatalf("refused after %v with %d calls, want within probe_wait_seconds and one probe per provider", waited, sc.count())
	}
}

// covers A1: the candidate most likely to answer is probed: the soonest
// cooldown end, then (on a tie) the most recent success.
func TestRun_A1_MostLikelyCandidate(t *testing.T) {
	h := newHarness(t)
	h.e.Policy.ProbeWindow = time.Second
	req := baseReq("openai/gpt-4o", "anthropic/claude", "ollama/qwen")
	req.Profiles["openai"] = req.Profiles["openai"][:1]
	same := 45 * time.Second
	coolAll(t, h, map[string]time.Duration{"openai:a": same, "anthropic:main": same, noAuthKey("ollama/qwen"): time.Minute})
	h.put(t, probeKey("anthropic"), func(s *ProfileState) { s.LastProbe, s.LastUsed = t0.Add(-time.Hour), t0.Add(-time.Hour) })
	sc := newScript(h.clk, ok("x"))
	if _, err := h.e.Run(bg, req, sc.fn); err != nil {
		t.Fatal(err)
	}
	if got := sc.keys(); !eqStrings(got, []string{"anthropic/claude@anthropic:main"}) {
		t.Fatalf("calls %v, want the tied candidate that answered most recently", got)
	}
}

// heldProbe is an attempt function whose probes wait for release; it counts
// probes and calls.
type heldProbe struct {
	release      chan struct{}
	probes, call atomic.Int32
}

func newHeldProbe() *heldProbe { return &heldProbe{release: make(chan struct{})} }

func (p *heldProbe) fn(ctx context.Context, a Attempt) (Output, error) {
	p.call.Add(1)
	if a.Kind == AttemptProbe {
		p.probes.Add(1)
		<-p.release
	}
	return Output{Text: "hi " + string(a.Kind), FinishReason: "stop", Progress: true}, nil
}

// covers A1: turns of many sessions that find nothing to try join ONE probe:
// one paid probe, the others wait for its result (on the engine's clock), and
// once it answered each makes its own call to the recovered candidate.
func TestRun_A1_SingleFlightAcrossSessions(t *testing.T) {
	h := newHarness(t)
	clk := failovertest.NewManualClock(t0)
	h.e.Clock = clk
	h.e.Policy.ProbeWindow = time.Second
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	coolAll(t, h, map[string]time.Duration{"openai:a": time.Minute, "openai:b": time.Minute, "anthropic:main": 40 * time.Second})
	hp := newHeldProbe()
	fn, probes, calls, release := hp.fn, &hp.probes, &hp.call, hp.release
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	kinds := make([]AttemptKind, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req
			r.SessionKey = "console:s" + string(rune('a'+i))
			res, err := h.e.Run(bg, r, fn)
			errs[i] = err
			if err == nil {
				kinds[i] = res.Attempts[len(res.Attempts)-1].Kind
			}
		}()
	}
	waitFor(t, "one probe and seven waiting turns", func() bool { return probes.Load() == 1 && clk.Sleeping() == n-1 })
	close(release)
	wg.Wait()
	probeAnswers := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("turn %d: %v", i, errs[i])
		}
		if kinds[i] == AttemptProbe {
			probeAnswers++
		}
	}
	if probes.Load() != 1 || probeAnswers != 1 || calls.Load() != n {
		t.Fatalf("%d probe(s), %d answered by the probe, %d calls; want 1, 1, %d", probes.Load(), probeAnswers, calls.Load(), n)
	}
	if clk.Now() != t0 {
		t.Fatalf("the joiners waited on the clock until %v though the local probe woke them", clk.Now())
	}
}

// covers A1, M2: a turn on another replica (another engine on the same store)
// joins the probe in flight and learns its result from the store.
func TestRun_A1_SingleFlightAcrossReplicas(t *testing.T) {
	h := newHarness(t)
	clk := failovertest.NewManualClock(t0)
	h.e.Clock = clk
	h.e.Policy.ProbeWindow = time.Second
	other := &Engine{Store: h.st, Clock: clk, Policy: h.e.Policy, Rand: func() float64 { return 0.5 }, Log: h.e.Log}
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	coolAll(t, h, map[string]time.Duration{"openai:a": time.Minute, "openai:b": time.Minute, "anthropic:main": 40 * time.Second})
	hp := newHeldProbe()
	fn, probes, calls, release := hp.fn, &hp.probes, &hp.call, hp.release
	done := make(chan error, 2)
	go func() { _, err := h.e.Run(bg, req, fn); done <- err }()
	waitFor(t, "the probe", func() bool { return probes.Load() == 1 })
	go func() {
		r := req
		r.SessionKey = "slack:other"
		res, err := other.Run(bg, r, fn)
		if err == nil && res.Attempts[len(res.Attempts)-1].Kind != AttemptNormal {
			t.Errorf("the replica's answer came from a %s attempt", res.Attempts[len(res.Attempts)-1].Kind)
		}
		done <- err
	}()
	waitFor(t, "the replica waiting", func() bool { return clk.Sleeping() == 1 })
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	clk.Advance(sharedProbePoll) // the replica reads the row again
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if probes.Load() != 1 || calls.Load() != 2 {
		t.Fatalf("%d probes, %d calls; want 1 probe and 1 call of the replica", probes.Load(), calls.Load())
	}
}

// covers A1: a prober that crashed (its claim stored, no result ever) blocks
// others no longer than probe_wait_seconds: a turn waits, then takes the probe
// over, and is answered.
func TestRun_A1_CrashedProberBlocksAtMostTheWait(t *testing.T) {
	h := newHarness(t)
	h.e.Policy.ProbeWindow = time.Second
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	coolAll(t, h, map[string]time.Duration{"openai:a": time.Minute, "openai:b": time.Minute, "anthropic:main": 40 * time.Second})
	h.put(t, probeKey("anthropic"), func(s *ProfileState) { s.LastProbe = t0.Add(-3 * time.Second) }) // a replica died mid-probe
	sc := newScript(h.clk, ok("answered after the take-over"))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil || res.Output.Text != "answered after the take-over" {
		t.Fatalf("%v %+v", err, res)
	}
	waited := h.clk.Now().Sub(t0)
	if waited > h.e.Policy.SharedProbeWait || waited < h.e.Policy.SharedProbeWait-3*time.Second-sharedProbePoll {
		t.Fatalf("waited %v for a dead prober's claim (claimed 3 s before), want about %v", waited, h.e.Policy.SharedProbeWait-3*time.Second)
	}
	if got := sc.keys(); !eqStrings(got, []string{"anthropic/claude@anthropic:main"}) || res.Attempts[len(res.Attempts)-1].Kind != AttemptProbe {
		t.Fatalf("calls %v", got)
	}
}

// covers A1: a turn that waits and gets no result within probe_wait_seconds is
// refused then, not later.
func TestRun_A1_WaitIsBounded(t *testing.T) {
	h := newHarness(t)
	h.e.Policy.ProbeWindow = time.Second
	h.e.Policy.SharedProbeWait = 10 * time.Second
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	req.Chain = req.Chain[1:] // one candidate
	coolAll(t, h, map[string]time.Duration{"anthropic:main": 40 * time.Second})
	// Another replica keeps re-claiming (a claim that never settles and never lapses
	// for this turn): simulate with a store that always shows a fresh claim.
	fresh := &freshClaimStore{MemStore: h.st, clk: h.clk}
	h.e.Store = fresh
	sc := newScript(h.clk, ok("x"))
	_, err := h.e.Run(bg, req, sc.fn)
	mustSummary(t, err)
	if sc.count() != 0 {
		t.Fatalf("calls %v", sc.keys())
	}
	if waited := h.clk.Now().Sub(t0); waited < h.e.Policy.SharedProbeWait || waited > h.e.Policy.SharedProbeWait+sharedProbePoll {
		t.Fatalf("waited %v, want probe_wait_seconds (%v)", waited, h.e.Policy.SharedProbeWait)
	}
}

// freshClaimStore shows every probe row as claimed a moment ago by someone else.
type freshClaimStore struct {
	*MemStore
	clk interface{ Now() time.Time }
}

func (s *freshClaimStore) GetMany(ctx context.Context, keys []string) ([]ProfileState, error) {
	out, err := s.MemStore.GetMany(ctx, keys)
	for i := range out {
		if len(keys[i]) > 6 && keys[i][:6] == "probe:" {
			out[i].LastProbe = s.clk.Now().Add(-time.Millisecond)
		}
	}
	return out, err
}

func (s *freshClaimStore) Update(ctx context.Context, key string, fn func(*ProfileState)) (ProfileState, error) {
	return s.MemStore.Update(ctx, key, func(st *ProfileState) {
		if len(key) > 6 && key[:6] == "probe:" {
			st.LastProbe = s.clk.Now().Add(-time.Millisecond)
		}
		fn(st)
	})
}

// covers A1: a prober whose run stops before its call (here the turn budget)
// releases the claim, so the next turn probes at once instead of waiting.
func TestRun_A1_ClaimReleasedWithoutAVerdict(t *testing.T) {
	h := newHarness(t)
	h.e.Policy.ProbeWindow = time.Second
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	coolAll(t, h, map[string]time.Duration{"openai:a": time.Minute, "openai:b": time.Minute, "anthropic:main": 40 * time.Second})
	req.Control = &hooks{beforeCall: func(context.Context, Attempt) error { return ErrUserBudget }}
	sc := newScript(h.clk, ok("x"))
	if _, err := h.e.Run(bg, req, sc.fn); err == nil || sc.count() != 0 {
		t.Fatalf("%v %v", err, sc.keys())
	}
	row := h.state(t, probeKey("anthropic"))
	if probeStatusOf(row, h.clk.Now(), h.e.Policy.SharedProbeInterval, h.e.Policy.SharedProbeWait) != probeFree {
		t.Fatalf("claim not released: %+v", row)
	}
	req.Control = nil
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil || h.clk.Now() != t0 || res.Attempts[len(res.Attempts)-1].Kind != AttemptProbe {
		t.Fatalf("%v at %v: %+v", err, h.clk.Now(), res.Attempts)
	}
}

// covers A1: the probe row's verdicts, as a table.
func TestProbeStatusOf_A1(t *testing.T) {
	const iv, wait = 5 * time.Second, 10 * time.Second
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	cases := []struct {
		name string
		s    ProfileState
		now  time.Time
		want probeStatus
	}{
		{"never probed", ProfileState{}, t0, probeFree},
		{"in flight", ProfileState{LastProbe: at(0)}, at(3 * time.Second), probeRunning},
		{"claim lapsed after the wait", ProfileState{LastProbe: at(0)}, at(wait), probeFree},
		{"failed within the interval", ProfileState{LastProbe: at(0), LastFailure: at(time.Second)}, at(2 * time.Second), probeFailed},
		{"failed, interval over", ProfileState{LastProbe: at(0), LastFailure: at(time.Second)}, at(iv), probeFree},
		// E1, R11: a call that failed is no check; the first check may come at once.
		{"a call failed, never checked", ProfileState{LastFailure: at(0)}, at(time.Second), probeFree},
		{"answered within the interval", ProfileState{LastProbe: at(0), LastUsed: at(time.Second)}, at(2 * time.Second), probeAnswered},
		{"answered, then a new claim", ProfileState{LastProbe: at(6 * time.Second), LastUsed: at(time.Second)}, at(7 * time.Second), probeRunning},
		{"released to the last result", ProfileState{LastProbe: at(-time.Minute), LastFailure: at(-time.Minute)}, t0, probeFree},
	}
	for _, c := range cases {
		if got := probeStatusOf(c.s, c.now, iv, wait); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// slowStore delays the writes of profile and model rows (not of probe rows),
// like a database under load.
type slowStore struct{ *MemStore }

func (s slowStore) Update(ctx context.Context, key string, fn func(*ProfileState)) (ProfileState, error) {
	if !strings.HasPrefix(key, "probe:") {
		time.Sleep(30 * time.Millisecond)
	}
	return s.MemStore.Update(ctx, key, fn)
}

func (s slowStore) UpdateMany(ctx context.Context, keys []string, fn func(int, *ProfileState)) ([]ProfileState, error) {
	time.Sleep(30 * time.Millisecond)
	return s.MemStore.UpdateMany(ctx, keys, fn)
}

// covers A1: the turns waiting on a probe learn that it answered only once its
// success is in the store, so each finds the cooldown cleared and is answered,
// however slow the store's writes.
func TestRun_A1_JoinersSeeTheClearedCooldown(t *testing.T) {
	h := newHarness(t)
	clk := failovertest.NewManualClock(t0)
	h.e.Clock, h.e.Store = clk, slowStore{h.st}
	h.e.Policy.ProbeWindow = time.Second
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	coolAll(t, h, map[string]time.Duration{"openai:a": time.Minute, "openai:b": time.Minute, "anthropic:main": 40 * time.Second})
	h.put(t, ModelKey("anthropic/claude"), func(s *ProfileState) { // R7's mark too: the success clears both rows
		s.CooldownUntil, s.CooldownReason, s.Consecutive, s.ErrorCount = t0.Add(40*time.Second), classify.ReasonConsecutiveTimeout, 3, 1
	})
	hp := newHeldProbe()
	const n = 4
	errs := make(chan error, n)
	for i := range n {
		go func() {
			r := req
			r.SessionKey = fmt.Sprintf("console:s%d", i)
			_, err := h.e.Run(bg, r, hp.fn)
			errs <- err
		}()
	}
	waitFor(t, "one probe and the others waiting", func() bool { return hp.probes.Load() == 1 && clk.Sleeping() == n-1 })
	close(hp.release)
	for range n {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("a turn that waited on the probe was refused: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a turn that waited on the answered probe went on to wait for another one")
		}
	}
	if hp.probes.Load() != 1 || hp.call.Load() != n {
		t.Fatalf("%d probes, %d calls", hp.probes.Load(), hp.call.Load())
	}
}
