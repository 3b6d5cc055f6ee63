package failover

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
)

// checker is a Request.Probe for tests: it records every check and fails
// those of the providers in down.
type checker struct {
	mu    sync.Mutex
	down  map[string]*Failure
	calls []Candidate
	at    []time.Time
	now   func() time.Time
}

func newChecker(now func() time.Time) *checker {
	return &checker{down: map[string]*Failure{}, now: now}
}

func (c *checker) set(prov string, f *Failure) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f == nil {
		delete(c.down, prov)
		return
	}
	c.down[prov] = f
}

func (c *checker) fn(_ context.Context, cand Candidate) (Output, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, cand)
	c.at = append(c.at, c.now())
	if f := c.down[cand.Provider]; f != nil {
		ff := *f
		return Output{}, &ff
	}
	return Output{InputTokens: 1, OutputTokens: 1}, nil
}

func (c *checker) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// outageReq: three providers, four profiles (openai has two keys).
func outageReq() Request {
	req := baseReq("openai/gpt-4o", "anthropic/claude", "gemini/flash")
	req.Profiles["gemini"] = []Profile{{ID: "gemini:g", Provider: "gemini", Type: ProfileAPIKey}}
	return req
}

var server500 = Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Status: 500, Message: "server error"}

// covers E1, E2, A1: a 150 s total outage with a turn every 2 s. Only the first
// walk of the chain sends the conversation (one call per profile); after it
// every provider is known to be down and is checked with the small request,
// whose interval doubles from 5 s to 30 s while the checks fail. When the
// providers recover, the next check answers and the conversation follows at
// once.
func TestRun_E1_E2_OutageSendsChecksNotConversations(t *testing.T) {
	h := newHarness(t)
	req := outageReq()
	chk := newChecker(h.clk.Now)
	req.Probe = chk.fn
	for _, p := range []string{"openai", "anthropic", "gemini"} {
		chk.set(p, &server500)
	}
	sc := newScript(h.clk, fail(server500))
	const outage = 150 * time.Second
	refused := 0
	for at := time.Duration(0); at < outage; at += 2 * time.Second {
		if now := t0.Add(at); h.clk.Now().Before(now) {
			h.clk.Set(now)
		}
		if _, err := h.e.Run(bg, req, sc.fn); err != nil {
			refused++
			var se *SummaryError
			if !errors.As(err, &se) {
				t.Fatalf("turn at %v: %v, want a refusal", at, err)
			}
		}
	}
	// What the outage cost: calls made before it ended (the last turns wait
	// for a check due after it).
	conversations, checks := sc.count(), 0
	for _, at := range chk.at {
		if at.Before(t0.Add(outage)) {
			checks++
		}
	}
	if conversations > 4 {
		t.Errorf("the outage sent the conversation %d times (%v), want at most once per profile (4)", conversations, sc.keys())
	}
	if conversations+checks > 24 {
		t.Errorf("the outage cost %d calls (%d conversations, %d checks), want at most 24", conversations+checks, conversations, checks)
	}
	// E2: each provider's checks back off 10, 20, 30, 30, ... s apart (5 s after
	// the failed conversation, then doubling after each failed check).
	byProv := map[string][]time.Time{}
	for i, c := range chk.calls {
		byProv[c.Provider] = append(byProv[c.Provider], chk.at[i])
	}
	for prov, at := range byProv {
		for i := 1; i < len(at); i++ {
			gap, want := at[i].Sub(at[i-1]), min(5*time.Second<<i, 30*time.Second)
			if gap < want {
				t.Errorf("%s: check %d came %v after the one before, want at least %v (E2): %v", prov, i+1, gap, want, at)
			}
		}
	}
	t.Logf("150 s outage: %d turns refused, %d conversation calls, %d checks at %v", refused, conversations, checks, byProv)

	// Recovery: every provider answers again. The first turn after the
	// recovery is answered once a check is due (at most 30 s away), and the
	// conversation goes only after the check answered.
	for _, p := range []string{"openai", "anthropic", "gemini"} {
		chk.set(p, nil)
	}
	healed := h.clk.Now()
	sc = newScript(h.clk, ok("back"))
	var answered time.Time
	for at := time.Duration(0); at < time.Minute; at += 2 * time.Second {
		if now := healed.Add(at); h.clk.Now().Before(now) {
			h.clk.Set(now)
		}
		if res, err := h.e.Run(bg, req, sc.fn); err == nil && res.Output.Text == "back" {
			answered = h.clk.Now()
			break
		}
	}
	if answered.IsZero() || answered.Sub(healed) > 35*time.Second {
		t.Fatalf("first answer %v after the recovery, want within 35 s", answered.Sub(healed))
	}
	if n := len(chk.calls); chk.calls[n-1].Provider != "openai" {
		t.Errorf("the last check went to %s, want the primary's provider", chk.calls[n-1].Provider)
	}
	if row := h.state(t, probeKey("openai")); row.Consecutive != 0 || providerDown(row) {
		t.Errorf("after the answered check the probe row is %+v, want up with the interval reset (E2)", row)
	}
}

// covers E1: a provider that failed as a down provider fails is checked before
// the conversation goes to it again, even once its keys' cooldowns ended; a
// failed check leaves it for the next model without sending the conversation,
// and an answered one lets the conversation through at once.
func TestRun_E1_DownProviderIsCheckedFirst(t *testing.T) {
	h := newHarness(t)
	req := baseReq("anthropic/claude", "openai/gpt-4o")
	chk := newChecker(h.clk.Now)
	req.Probe = chk.fn
	sc := newScript(h.clk, ok("fallback")).on("anthropic/claude", fail(server500))
	if res, err := h.e.Run(bg, req, sc.fn); err != nil || res.Candidate.Provider != "openai" {
		t.Fatalf("turn 1: %+v, %v", res, err)
	}
	// Two minutes on, the cooldown is over but the provider is still down.
	h.clk.Advance(2 * time.Minute)
	chk.set("anthropic", &server500)
	sc = newScript(h.clk, ok("fallback"))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil || res.Candidate.Provider != "openai" {
		t.Fatalf("turn 2: %+v, %v", res, err)
	}
	if got := sc.keys(); len(got) != 1 || !strings.HasPrefix(got[0], "openai/gpt-4o@") {
		t.Fatalf("turn 2 sent the conversation to %v, want the fallback only", got)
	}
	if chk.count() != 1 || chk.calls[0].Provider != "anthropic" {
		t.Fatalf("checks %v, want one of anthropic", chk.calls)
	}
	if res.Attempts[0].Kind != AttemptProbe || res.Attempts[0].Failure == nil {
		t.Fatalf("the first record is %+v, want the failed check", res.Attempts[0])
	}
	// Recovered: the next check answers (30 s later: R11's probe of a
	// cooling primary while a fallback answers), and the primary answers the
	// same turn.
	h.clk.Advance(30 * time.Second)
	chk.set("anthropic", nil)
	sc = newScript(h.clk, ok("primary"))
	res, err = h.e.Run(bg, req, sc.fn)
	if err != nil || res.Candidate.Provider != "anthropic" || res.FellBack {
		t.Fatalf("turn 3: %+v, %v; want the primary", res, err)
	}
	if chk.count() != 2 {
		t.Fatalf("checks %d, want 2", chk.count())
	}
	// Up again: no more checks.
	sc = newScript(h.clk, ok("primary"))
	if _, err := h.e.Run(bg, req, sc.fn); err != nil || chk.count() != 2 {
		t.Fatalf("turn 4: %v, checks %d; want a plain call", err, chk.count())
	}
}

// covers E1: a rate limit is one key's, not a provider that is down: the
// provider's next key gets the conversation without a check.
func TestRun_E1_RateLimitIsNoOutage(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	chk := newChecker(h.clk.Now)
	req.Probe = chk.fn
	sc := newScript(h.clk, ok("fine")).on("openai/gpt-4o@openai:a", failR(classify.ReasonRateLimit))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil || res.Candidate.Profile != "openai:b" || chk.count() != 0 {
		t.Fatalf("run %+v, %v, checks %d; want openai:b without a check", res, err, chk.count())
	}
}

// covers E1: a check answered with a refusal of the request itself (a format
// error) still says the provider is up; the conversation follows.
func TestRun_E1_CheckRefusedAsRequestStillUp(t *testing.T) {
	h := newHarness(t)
	req := baseReq("anthropic/claude", "openai/gpt-4o")
	chk := newChecker(h.clk.Now)
	req.Probe = chk.fn
	h.put(t, probeKey("anthropic"), func(s *ProfileState) { s.LastFailure, s.CooldownReason = t0.Add(-time.Minute), classify.ReasonTimeout })
	chk.set("anthropic", &Failure{Reason: classify.ReasonFormat, Class: classify.ClassDeterministic, Status: 400})
	sc := newScript(h.clk, ok("primary"))
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil || res.Candidate.Provider != "anthropic" {
		t.Fatalf("run %+v, %v; want the primary after its check", res, err)
	}
}

// covers E3, R11, D5: a provider that stated when it recovers (Retry-After 45
// s, or Gemini's RetryInfo 47 s) is not called before then, by a check, a
// probe of the primary or a shared probe, from any session; after the stated
// time the primary is called again.
func TestRun_E3_NoCheckBeforeStatedReset(t *testing.T) {
	for _, wait := range []time.Duration{45 * time.Second, 47 * time.Second} {
		t.Run(wait.String(), func(t *testing.T) {
			h := newHarness(t)
			req := baseReq("anthropic/claude", "openai/gpt-4o")
			chk := newChecker(h.clk.Now)
			req.Probe = chk.fn
			limited := Failure{Reason: classify.ReasonRateLimit, Class: classify.ClassTransient, Status: 429, RetryAfter: wait, RecoveryAt: t0.Add(wait)}
			sc := newScript(h.clk, ok("fallback")).on("anthropic/claude", fail(limited))
			if _, err := h.e.Run(bg, req, sc.fn); err != nil {
				t.Fatal(err)
			}
			primaryCalls := func() int {
				n := 0
				for _, k := range sc.keys() {
					if k == "anthropic/claude@anthropic:main" {
						n++
					}
				}
				return n
			}
			if primaryCalls() != 1 {
				t.Fatalf("calls %v", sc.keys())
			}
			for _, at := range []time.Duration{7 * time.Second, 20 * time.Second, 31 * time.Second, wait - time.Second} {
				h.clk.Set(t0.Add(at))
				req.SessionKey = "console:other" + at.String()
				if _, err := h.e.Run(bg, req, sc.fn); err != nil {
					t.Fatal(err)
				}
				if primaryCalls() != 1 || chk.count() != 0 {
					t.Fatalf("at %v: calls %v, checks %d; want nothing to anthropic before %v", at, sc.keys(), chk.count(), wait)
				}
			}
			// Every fallback down too: still no call before the stated time.
			req.Chain = req.Chain[:1]
			h.clk.Set(t0.Add(wait - 2*time.Second))
			if _, err := h.e.Run(bg, req, sc.fn); err == nil || primaryCalls() != 1 || chk.count() != 0 {
				t.Fatalf("alone before the reset: %v, calls %v, checks %d", err, sc.keys(), chk.count())
			}
			h.clk.Set(t0.Add(wait + time.Second))
			res, err := h.e.Run(bg, req, sc.fn)
			if err != nil || res.Candidate.Provider != "anthropic" || primaryCalls() != 2 {
				t.Fatalf("after the reset: %+v, %v, calls %v", res, err, sc.keys())
			}
		})
	}
}

// covers R5, E1: a primary that stalls (mid-stream or before headers) with two
// keys: one more attempt on its second key, then the fallback: three calls.
func TestRun_E1_StallGetsOneMoreAttemptThenFallback(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	idle10 := step{err: &Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Idle: true}, adv: 10 * time.Second}
	sc := newScript(h.clk, ok("fallback")).on("openai/gpt-4o", idle10, idle10, idle10)
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil || res.Candidate.Provider != "anthropic" {
		t.Fatalf("run %+v, %v", res, err)
	}
	want := []string{"openai/gpt-4o@openai:a", "openai/gpt-4o@openai:b", "anthropic/claude@anthropic:main"}
	if got := sc.keys(); !eqStrings(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	if d := h.clk.Now().Sub(t0); d > 20*time.Second {
		t.Fatalf("the fallback answered after %v, want within 2 x idle (20 s)", d)
	}
}

// covers E1, V5, B3: /recover's Clear of a provider's key also clears the
// provider's down mark and its checks' backoff: the next turn sends the
// conversation without a check.
func TestClear_E1_ClearsTheDownMark(t *testing.T) {
	h := newHarness(t)
	req := baseReq("anthropic/claude", "openai/gpt-4o")
	chk := newChecker(h.clk.Now)
	req.Probe = chk.fn
	sc := newScript(h.clk, ok("fallback")).on("anthropic/claude", fail(server500))
	if _, err := h.e.Run(bg, req, sc.fn); err != nil {
		t.Fatal(err)
	}
	if !providerDown(h.state(t, probeKey("anthropic"))) {
		t.Fatal("the server error did not mark the provider down")
	}
	if err := h.e.Clear(bg, "anthropic:main"); err != nil {
		t.Fatal(err)
	}
	if row := h.state(t, probeKey("anthropic")); providerDown(row) || row.Consecutive != 0 {
		t.Fatalf("after Clear the probe row is %+v", row)
	}
	sc = newScript(h.clk, ok("primary"))
	if res, err := h.e.Run(bg, req, sc.fn); err != nil || res.Candidate.Provider != "anthropic" || chk.count() != 0 {
		t.Fatalf("after Clear: %+v, %v, %d checks; want the primary without a check", res, err, chk.count())
	}
}
