package failover

import (
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
)

func TestDecide_R4_Table(t *testing.T) {
	p := DefaultPolicy()
	p.OverloadedBackoff = 250 * time.Millisecond
	now := t0
	base := RunState{Policy: &p, Now: now, MoreProfiles: true, MoreCandidates: true}
	with := func(mut func(*RunState)) RunState { s := base; mut(&s); return s }
	tests := []struct {
		name  string
		s     RunState
		f     Failure
		want  Action
		delay time.Duration
	}{
		// R2: advance on these (after rotations), not on the terminal ones.
		{"R2 auth rotates first", base, Failure{Reason: classify.ReasonAuth}, RotateProfile, 0},
		{"R2 auth then falls back", with(func(s *RunState) { s.MoreProfiles = false }), Failure{Reason: classify.ReasonAuth}, FallbackModel, 0},
		{"R2 billing rotates", base, Failure{Reason: classify.ReasonBilling}, RotateProfile, 0},
		{"R2 billing falls back", with(func(s *RunState) { s.MoreProfiles = false }), Failure{Reason: classify.ReasonBilling}, FallbackModel, 0},
		{"R2 model_not_found falls back at once", base, Failure{Reason: classify.ReasonModelNotFound}, FallbackModel, 0},
		{"R2 unknown advances while candidates remain", base, Failure{Reason: classify.ReasonUnclassified}, FallbackModel, 0},
		{"R2 unknown on last candidate surfaces", with(func(s *RunState) { s.MoreCandidates = false }), Failure{Reason: classify.ReasonUnclassified}, SurfaceError, 0},
		{"R2 no_error_details advances", base, Failure{Reason: classify.ReasonNoErrorDetails}, FallbackModel, 0},
		{"R2 aborted is terminal", base, Failure{Reason: classify.ReasonAborted}, SurfaceError, 0},
		{"R2 exhausted chain surfaces", with(func(s *RunState) { s.MoreProfiles, s.MoreCandidates = false, false }), Failure{Reason: classify.ReasonRateLimit}, SurfaceError, 0},
		{"C8 context_overflow never advances", base, Failure{Reason: classify.ReasonContextOverflow}, SurfaceError, 0},
		{"B7 context_overflow to a larger window", with(func(s *RunState) { s.LargerContextLater = true }), Failure{Reason: classify.ReasonContextOverflow}, FallbackModel, 0},
		{"C9 format terminal", base, Failure{Reason: classify.ReasonFormat}, SurfaceError, 0},
		{"C9 content_filter terminal", base, Failure{Reason: classify.ReasonContentFilter}, SurfaceError, 0},
		// R7: the threshold reached inside a run switches at once, no retry or rotation.
		{"R7 unavailable model falls back instead of retrying", with(func(s *RunState) { s.ModelUnavailable = true }), Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Idle: true}, FallbackModel, 0},
		{"R7 unavailable model falls back instead of rotating", with(func(s *RunState) { s.ModelUnavailable = true }), Failure{Reason: classify.ReasonOverloaded, Class: classify.ClassTransient}, FallbackModel, 0},
		{"R7 unavailable last model surfaces", with(func(s *RunState) { s.ModelUnavailable, s.MoreCandidates = true, false }), Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient}, SurfaceError, 0},
		{"R7 does not touch billing rotation", with(func(s *RunState) { s.ModelUnavailable = true }), Failure{Reason: classify.ReasonBilling, Class: classify.ClassDeterministic}, RotateProfile, 0},
		// R3 rotations.
		{"R3 rate limit rotates once", base, Failure{Reason: classify.ReasonRateLimit}, RotateProfile, 0},
		{"R3 rate limit then falls back", with(func(s *RunState) { s.RateLimitRotations = 1 }), Failure{Reason: classify.ReasonRateLimit}, FallbackModel, 0},
		{"R3 overloaded rotates after backoff", base, Failure{Reason: classify.ReasonOverloaded}, RotateProfile, 250 * time.Millisecond},
		{"R3 overloaded then falls back", with(func(s *RunState) { s.OverloadRotations = 1 }), Failure{Reason: classify.ReasonOverloaded}, FallbackModel, 0},
		{"R4 timeout rotates once", base, Failure{Reason: classify.ReasonTimeout}, RotateProfile, 0},
		{"R4 timeout then falls back", with(func(s *RunState) { s.TimeoutRotations = 1 }), Failure{Reason: classify.ReasonTimeout}, FallbackModel, 0},
		// R4: each failure type has its own counter: used-up rate-limit budget leaves the timeout budget.
		{"R4 separate counters", with(func(s *RunState) { s.RateLimitRotations, s.ShortWaitRetries = 3, 3 }), Failure{Reason: classify.ReasonTimeout}, RotateProfile, 0},
		{"R4 separate counters idle", with(func(s *RunState) { s.ShortWaitRetries, s.EmptyRetries = 3, 3 }), Failure{Reason: classify.ReasonTimeout, Idle: true}, RotateProfile, 0},
		// R5.
		// R5 as amended by E1: one more attempt on the provider after a stall, on its next key when it has one.
		{"R5 E1 a stall's one more attempt goes to the next key", base, Failure{Reason: classify.ReasonTimeout, Idle: true}, RotateProfile, 0},
		{"R5 E1 one key: a stall is retried on it once", with(func(s *RunState) { s.MoreProfiles = false }), Failure{Reason: classify.ReasonTimeout, Idle: true}, RetrySame, 0},
		{"R5 E1 second stall after a retry moves on", with(func(s *RunState) { s.IdleRetries = 1 }), Failure{Reason: classify.ReasonTimeout, Idle: true}, FallbackModel, 0},
		{"R5 E1 second stall after a rotation moves on", with(func(s *RunState) { s.TimeoutRotations = 1 }), Failure{Reason: classify.ReasonTimeout, Idle: true}, FallbackModel, 0},
		{"R5 E1 a stall on the last candidate surfaces", with(func(s *RunState) { s.TimeoutRotations, s.MoreCandidates = 1, false }), Failure{Reason: classify.ReasonTimeout, Idle: true}, SurfaceError, 0},
		// R6 / B6.
		{"R6 a usable sibling profile beats a short wait", base, Failure{Reason: classify.ReasonRateLimit, RetryAfter: 2 * time.Second}, RotateProfile, 0},
		{"R6 a usable later candidate beats a short wait", with(func(s *RunState) { s.MoreProfiles, s.UsableLater = false, true }), Failure{Reason: classify.ReasonRateLimit, RetryAfter: 2 * time.Second}, FallbackModel, 0},
		{"R6 nothing else usable: short Retry-After waits and retries", with(func(s *RunState) { s.MoreProfiles = false }), Failure{Reason: classify.ReasonRateLimit, RetryAfter: 20 * time.Second}, RetrySame, 20 * time.Second},
		{"R6 nothing else usable: short RecoveryAt waits", with(func(s *RunState) { s.MoreProfiles = false }), Failure{Reason: classify.ReasonRateLimit, RecoveryAt: now.Add(45 * time.Second)}, RetrySame, 45 * time.Second},
		{"R6 rotations used up: waits", with(func(s *RunState) { s.RateLimitRotations = 1 }), Failure{Reason: classify.ReasonRateLimit, RetryAfter: 20 * time.Second}, RetrySame, 20 * time.Second},
		{"R6 only once", with(func(s *RunState) { s.MoreProfiles, s.ShortWaitRetries = false, 1 }), Failure{Reason: classify.ReasonRateLimit, RetryAfter: 20 * time.Second}, FallbackModel, 0},
		{"B6 long wait rotates at once", base, Failure{Reason: classify.ReasonRateLimit, RetryAfter: 2 * time.Hour}, RotateProfile, 0},
		{"B6 reset in two days falls back at once", with(func(s *RunState) { s.MoreProfiles = false }), Failure{Reason: classify.ReasonRateLimit, RecoveryAt: now.Add(48 * time.Hour)}, FallbackModel, 0},
		// P3 strict user pin.
		{"P3 user pin never rotates", with(func(s *RunState) { s.UserStrict = true }), Failure{Reason: classify.ReasonRateLimit}, FallbackModel, 0},
		{"P3 user pin billing falls back", with(func(s *RunState) { s.UserStrict = true }), Failure{Reason: classify.ReasonBilling}, FallbackModel, 0},
		// R8.
		{"R8 breaker trips at 5", with(func(s *RunState) { s.Breaker = 5 }), Failure{Reason: classify.ReasonTimeout, Idle: true}, Stop, 0},
		{"R8 breaker below trip goes on", with(func(s *RunState) { s.Breaker = 4 }), Failure{Reason: classify.ReasonTimeout, Idle: true}, RotateProfile, 0},
		// R13.
		{"R13 empty output one nudged retry", base, Failure{Reason: classify.ReasonEmptyResponse}, RetrySame, 0},
		{"R13 second empty falls back", with(func(s *RunState) { s.EmptyRetries = 1 }), Failure{Reason: classify.ReasonEmptyResponse}, FallbackModel, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.s, tc.f)
			if d.Action != tc.want || d.Delay != tc.delay {
				t.Fatalf("Decide = %v delay %v (%s), want %v delay %v", d.Action, d.Delay, d.Why, tc.want, tc.delay)
			}
			if d.Why == "" {
				t.Fatal("Decision without Why")
			}
		})
	}
}

func TestDecide_R4_NilPolicyUsesDefaults(t *testing.T) {
	d := Decide(RunState{MoreProfiles: true, MoreCandidates: true}, Failure{Reason: classify.ReasonRateLimit})
	if d.Action != RotateProfile {
		t.Fatalf("got %v", d.Action)
	}
}

func TestDecide_R4_AllocationFree(t *testing.T) {
	p := DefaultPolicy()
	s := RunState{Policy: &p, Now: t0, MoreProfiles: true, MoreCandidates: true}
	f := Failure{Reason: classify.ReasonRateLimit, RecoveryAt: t0.Add(time.Hour), Message: "x"}
	if n := testing.AllocsPerRun(100, func() { _ = Decide(s, f) }); n != 0 {
		t.Fatalf("Decide allocates %v times", n)
	}
}

var sinkDecision Decision

func BenchmarkDecide(b *testing.B) {
	p := DefaultPolicy()
	s := RunState{Policy: &p, Now: t0, MoreProfiles: true, MoreCandidates: true}
	fs := []Failure{
		{Reason: classify.ReasonRateLimit, RetryAfter: 20 * time.Second},
		{Reason: classify.ReasonRateLimit, RecoveryAt: t0.Add(48 * time.Hour)},
		{Reason: classify.ReasonTimeout, Idle: true},
		{Reason: classify.ReasonOverloaded},
		{Reason: classify.ReasonBilling},
		{Reason: classify.ReasonContextOverflow},
		{Reason: classify.ReasonUnclassified},
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sinkDecision = Decide(s, fs[i%len(fs)])
	}
}

// TestDecide_C13_FormatSafetyNet: a format failure whose words name nothing of
// the request tries one candidate of another provider; one that names the
// request, a second one, or one with no other provider left surfaces (C9).
func TestDecide_C13_FormatSafetyNet(t *testing.T) {
	base := RunState{MoreProfiles: true, MoreCandidates: true, OtherProviderLater: true}
	vague := Failure{Reason: classify.ReasonFormat, NotRequestFault: true}
	named := Failure{Reason: classify.ReasonFormat}
	tests := []struct {
		name  string
		s     RunState
		f     Failure
		want  Action
		other bool
	}{
		{"C13 vague format moves to another provider", base, vague, FallbackModel, true},
		{"C9 format naming the request surfaces", base, named, SurfaceError, false},
		{"C13 only once per run", RunState{MoreCandidates: true, OtherProviderLater: true, SafetyNetUsed: true}, vague, SurfaceError, false},
		{"C13 no other provider later surfaces", RunState{MoreCandidates: true}, vague, SurfaceError, false},
		{"C13 never rotates to a sibling profile", RunState{MoreProfiles: true, OtherProviderLater: true}, vague, FallbackModel, true},
		{"C9 content filter is not a safety-net case", base, Failure{Reason: classify.ReasonContentFilter, NotRequestFault: true}, SurfaceError, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.s, tc.f)
			if d.Action != tc.want || d.OtherProvider != tc.other {
				t.Fatalf("Decide = %v other=%v (%s), want %v other=%v", d.Action, d.OtherProvider, d.Why, tc.want, tc.other)
			}
		})
	}
	if got := Decide(base, vague).Why; got != WhySafetyNet {
		t.Fatalf("why %q", got)
	}
}

func TestNextOtherProvider_C13(t *testing.T) {
	chain := []ModelRef{"openai/a", "openai/b", "anthropic/c", "openai/d"}
	for _, tc := range []struct{ i, want int }{{0, 2}, {1, 2}, {2, 3}, {3, -1}, {-1, -1}, {9, -1}} {
		if got := nextOtherProvider(chain, tc.i); got != tc.want {
			t.Errorf("nextOtherProvider(%d) = %d, want %d", tc.i, got, tc.want)
		}
	}
}

// TestFailureFrom_C13_RequestFault: FailureFrom carries classify's judgement, so
// a vague 400 may try another provider and one naming the request may not.
func TestFailureFrom_C13_RequestFault(t *testing.T) {
	vague := FailureFrom(classify.Classify(classify.Response{Provider: "openai", Status: 400, Body: `400 status code (no body)`}, t0))
	named := FailureFrom(classify.Classify(classify.Response{Provider: "openai", Status: 400,
		Body: `{"error":{"message":"Invalid 'messages[0].role': unknown role","type":"invalid_request_error","param":"messages[0].role"}}`}, t0))
	if vague.Reason != classify.ReasonFormat || !vague.NotRequestFault {
		t.Fatalf("vague: %+v", vague)
	}
	if named.Reason != classify.ReasonFormat || named.NotRequestFault {
		t.Fatalf("named: %+v", named)
	}
}
