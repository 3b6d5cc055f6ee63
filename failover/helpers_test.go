package failover

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/internal/testkit/syncbuf"

	"github.com/detourbot/detour/failover/failovertest"
)

var t0 = time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)

type harness struct {
	e   *Engine
	clk *failovertest.Clock
	st  *MemStore
	log *syncbuf.Buffer
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	clk := failovertest.NewClock(t0)
	st := NewMemStore()
	buf := &syncbuf.Buffer{}
	h := &harness{clk: clk, st: st, log: buf}
	h.e = &Engine{
		Store:  st,
		Clock:  clk,
		Policy: DefaultPolicy(),
		Rand:   func() float64 { return 0.5 }, // no jitter
		Log:    slog.New(slog.NewJSONHandler(buf, nil)),
	}
	return h
}

func (h *harness) state(t testing.TB, key string) ProfileState {
	t.Helper()
	s, err := h.st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (h *harness) put(t testing.TB, key string, fn func(*ProfileState)) {
	t.Helper()
	if _, err := h.st.Update(context.Background(), key, fn); err != nil {
		t.Fatal(err)
	}
}

// baseReq: openai has two api keys, anthropic one, ollama none.
func baseReq(chain ...ModelRef) Request {
	return Request{
		SessionKey: "console:test",
		Chain:      chain,
		Primary:    chain[0],
		Source:     SourceDefault,
		Profiles: map[string][]Profile{
			"openai":    {{ID: "openai:a", Provider: "openai", Type: ProfileAPIKey}, {ID: "openai:b", Provider: "openai", Type: ProfileAPIKey}},
			"anthropic": {{ID: "anthropic:main", Provider: "anthropic", Type: ProfileAPIKey}},
		},
	}
}

// hooks is a Controller made of functions, for tests; a nil one changes nothing.
type hooks struct {
	beforeCall          func(context.Context, Attempt) error
	beforeFallback      func(ctx context.Context, from, to Candidate, cause Failure) error
	afterFailedFallback func(ctx context.Context, c Candidate, f Failure)
	compact             func(context.Context, Failure) (Compaction, bool)
}

func (h *hooks) BeforeCall(ctx context.Context, a Attempt) error {
	if h.beforeCall == nil {
		return nil
	}
	return h.beforeCall(ctx, a)
}

func (h *hooks) BeforeFallback(ctx context.Context, from, to Candidate, cause Failure) error {
	if h.beforeFallback == nil {
		return nil
	}
	return h.beforeFallback(ctx, from, to, cause)
}

func (h *hooks) AfterFailedFallback(ctx context.Context, c Candidate, f Failure) {
	if h.afterFailedFallback != nil {
		h.afterFailedFallback(ctx, c, f)
	}
}

func (h *hooks) Compact(ctx context.Context, f Failure) (Compaction, bool) {
	if h.compact == nil {
		return Compaction{}, false
	}
	return h.compact(ctx, f)
}

type step struct {
	out Output
	err error
	adv time.Duration // virtual time the call takes
}

func ok(text string) step { return step{out: Output{Text: text, FinishReason: "stop", Progress: true}} }

// clientOutput is what an LLM client returns for out as a provider sent it: its
// stop reason normalised, or the failure that stop is (R14, as package llm).
func clientOutput(out Output) step {
	fr, bad := classify.Finish(out.FinishReason)
	if bad != "" {
		return fail(Failure{Reason: bad, Class: classify.ReasonClass(bad), Message: "stop reason: " + fr})
	}
	out.FinishReason = fr
	return step{out: out}
}

func fail(f Failure) step { return step{err: &f} }

func failR(r classify.Reason) step { return fail(Failure{Reason: r, Class: classOf(r)}) }

func idle() step {
	return step{err: &Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Idle: true}}
}

func classOf(r classify.Reason) classify.Class {
	switch r {
	case classify.ReasonRateLimit, classify.ReasonOverloaded, classify.ReasonTimeout:
		return classify.ClassTransient
	case classify.ReasonUnclassified, classify.ReasonNoErrorDetails, classify.ReasonEmptyResponse:
		return classify.ClassUnknown
	}
	return classify.ClassDeterministic
}

// script answers attempts from per-key queues: "provider/model@profile" first,
// then "provider/model"; when both are empty it returns def.
type script struct {
	mu    sync.Mutex
	clk   *failovertest.Clock
	q     map[string][]step
	def   step
	calls []Attempt
}

func newScript(clk *failovertest.Clock, def step) *script {
	return &script{clk: clk, q: map[string][]step{}, def: def}
}

func (s *script) on(key string, steps ...step) *script {
	s.q[key] = append(s.q[key], steps...)
	return s
}

func (s *script) fn(ctx context.Context, a Attempt) (Output, error) {
	s.mu.Lock()
	s.calls = append(s.calls, a)
	st := s.def
	for _, k := range []string{a.Candidate.Ref() + "@" + a.Candidate.Profile, a.Candidate.Ref()} {
		if q := s.q[k]; len(q) > 0 {
			st, s.q[k] = q[0], q[1:]
			break
		}
	}
	s.mu.Unlock()
	if st.adv > 0 && s.clk != nil {
		s.clk.Advance(st.adv)
	}
	return st.out, st.err
}

func (s *script) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, a := range s.calls {
		k := a.Candidate.Ref()
		if a.Candidate.Profile != "" {
			k += "@" + a.Candidate.Profile
		}
		out = append(out, k)
	}
	return out
}

func (s *script) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func eqStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
