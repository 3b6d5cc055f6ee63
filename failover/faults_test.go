package failover

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/detourbot/detour/classify"
)

// covers A2, A4: what Decide does with a refused response (rotate, then fall
// back, like a server error) and with a local failure (the next candidate,
// nothing retried on the same profile).
func TestDecide_A2_A4(t *testing.T) {
	p := DefaultPolicy()
	base := RunState{Policy: &p, Now: t0, MoreProfiles: true, MoreCandidates: true}
	with := func(mut func(*RunState)) RunState { s := base; mut(&s); return s }
	refused := Failure{Reason: classify.ReasonRefusedResponse, Class: classify.ClassTransient}
	local := Failure{Reason: classify.ReasonLocal, Class: classify.ClassTransient}
	for _, c := range []struct {
		name string
		s    RunState
		f    Failure
		want Action
	}{
		{"A2 refused rotates first", base, refused, RotateProfile},
		{"A2 refused then falls back", with(func(s *RunState) { s.RefusedRotations = 1 }), refused, FallbackModel},
		{"A2 refused, user-pinned profile: next model", with(func(s *RunState) { s.UserStrict = true }), refused, FallbackModel},
		{"A2 refused on the last candidate surfaces", with(func(s *RunState) { s.MoreProfiles, s.MoreCandidates = false, false }), refused, SurfaceError},
		{"A2 refused, separate counter from timeouts", with(func(s *RunState) { s.TimeoutRotations = 1 }), refused, RotateProfile},
		{"A4 local goes to the next candidate", base, local, FallbackModel},
		{"A4 local on the last candidate surfaces", with(func(s *RunState) { s.MoreCandidates = false }), local, SurfaceError},
		{"A4 local never marks the model (R7)", with(func(s *RunState) { s.ModelUnavailable = true }), local, FallbackModel},
	} {
		if d := Decide(c.s, c.f); d.Action != c.want {
			t.Errorf("%s: %v (%s), want %v", c.name, d.Action, d.Why, c.want)
		}
	}
}

// covers A2: refused responses from the primary (a redirect on both keys): the
// next key, then the fallback is tried and answers; both keys cool down on the
// transient ladder; the model counts it like a server error (R7); and the
// user-facing words name the refusal.
func TestRun_A2_RefusedResponseFallsBackAndCoolsDown(t *testing.T) {
	h := newHarness(t)
	req := baseReq("openai/gpt-4o", "anthropic/claude")
	refused := fail(Failure{Reason: classify.ReasonRefusedResponse, Class: classify.ClassTransient, Status: 307,
		Message: "redirect to https://elsewhere.example/… (HTTP 307, never followed)"})
	sc := newScript(h.clk, ok("from the fallback")).on("openai/gpt-4o", refused, refused)
	res, err := h.e.Run(bg, req, sc.fn)
	if err != nil || res.Candidate.Ref() != "anthropic/claude" {
		t.Fatalf("%v %+v", err, res.Candidate)
	}
	if got := sc.keys(); !eqStrings(got, []string{"openai/gpt-4o@openai:a", "openai/gpt-4o@openai:b", "anthropic/claude@anthropic:main"}) {
		t.Fatalf("calls %v", got)
	}
	for _, id := range []string{"openai:a", "openai:b"} {
		if st := h.state(t, id); st.CooldownReason != classify.ReasonRefusedResponse || st.CooldownUntil.Sub(t0) != h.e.Policy.TransientLadder[0] {
			t.Fatalf("%s: %+v", id, st)
		}
	}
	if ms := h.state(t, ModelKey("openai/gpt-4o")); ms.Consecutive != 2 {
		t.Fatalf("model state %+v, want 2 consecutive transient failures", ms)
	}
	words := res.Cause.Describe()
	if !strings.HasPrefix(words, "response refused by detour: redirect to https://elsewhere.example/") || strings.Contains(words, "invalid request") {
		t.Fatalf("cause reads %q", words)
	}
}

// covers A4: a local failure (the process is out of descriptors) fails the
// attempt and the next candidate answers, but no provider, profile or model
// state is touched, so the next turn goes to the primary as before; a bare
// cancellation the run did not ask for is local too.
func TestRun_A4_LocalFailureBlamesNobody(t *testing.T) {
	for name, failure := range map[string]error{
		"EMFILE":               &Failure{Reason: classify.ReasonLocal, Class: classify.ClassTransient, Message: "dial tcp: socket: too many open files"},
		"our own cancellation": context.Canceled,
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			req := baseReq("openai/gpt-4o", "anthropic/claude")
			req.Profiles["openai"] = req.Profiles["openai"][:1]
			sc := newScript(h.clk, ok("fallback")).on("openai/gpt-4o", step{err: failure})
			res, err := h.e.Run(bg, req, sc.fn)
			if err != nil || res.Candidate.Ref() != "anthropic/claude" {
				t.Fatalf("%v %+v", err, res.Candidate)
			}
			if f := res.Attempts[0].Failure; f == nil || f.Reason != classify.ReasonLocal {
				t.Fatalf("first attempt %+v, want a local failure", res.Attempts[0])
			}
			for _, k := range []string{"openai:a", ModelKey("openai/gpt-4o")} {
				if st := h.state(t, k); st != (ProfileState{Key: k}) {
					t.Fatalf("%s changed by a local failure: %+v", k, st)
				}
			}
			if !strings.Contains(h.log.String(), "local failure") {
				t.Fatalf("not logged:\n%s", h.log.String())
			}
			sc = newScript(h.clk, ok("primary"))
			res, err = h.e.Run(bg, req, sc.fn)
			if err != nil || res.Candidate.Ref() != "openai/gpt-4o" || res.Attempts[0].Kind != AttemptNormal {
				t.Fatalf("next turn: %v %+v", err, res.Attempts)
			}
		})
	}
	// Every candidate failing locally: the summary says it is on our side.
	h := newHarness(t)
	sc := newScript(h.clk, step{err: &Failure{Reason: classify.ReasonLocal, Class: classify.ClassTransient}})
	_, err := h.e.Run(bg, baseReq("openai/gpt-4o", "anthropic/claude"), sc.fn)
	var se *SummaryError
	if !errors.As(err, &se) || !strings.Contains(se.UserMessage(nil), "detour's side") {
		t.Fatalf("%v", err)
	}
}
