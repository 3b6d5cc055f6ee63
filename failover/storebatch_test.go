package failover

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
)

// plainStore hides MemStore's batch methods: the engine then makes one Get or
// Update per key, as with any StateStore without BatchGetter/BatchUpdater.
type plainStore struct{ m *MemStore }

func (p plainStore) Get(ctx context.Context, key string) (ProfileState, error) {
	return p.m.Get(ctx, key)
}

func (p plainStore) Update(ctx context.Context, key string, fn func(*ProfileState)) (ProfileState, error) {
	return p.m.Update(ctx, key, fn)
}

// countingStore records every store call the engine makes.
type countingStore struct {
	m     *MemStore
	mu    sync.Mutex
	calls []string // "Get k", "Update k", "GetMany [k1 k2]", "UpdateMany [k1 k2]"
}

func (c *countingStore) note(s string) {
	c.mu.Lock()
	c.calls = append(c.calls, s)
	c.mu.Unlock()
}

func (c *countingStore) Get(ctx context.Context, key string) (ProfileState, error) {
	c.note("Get " + key)
	return c.m.Get(ctx, key)
}

func (c *countingStore) Update(ctx context.Context, key string, fn func(*ProfileState)) (ProfileState, error) {
	c.note("Update " + key)
	return c.m.Update(ctx, key, fn)
}

func (c *countingStore) GetMany(ctx context.Context, keys []string) ([]ProfileState, error) {
	c.note(fmt.Sprint("GetMany ", keys))
	return c.m.GetMany(ctx, keys)
}

func (c *countingStore) UpdateMany(ctx context.Context, keys []string, fn func(int, *ProfileState)) ([]ProfileState, error) {
	c.note(fmt.Sprint("UpdateMany ", keys))
	return c.m.UpdateMany(ctx, keys, fn)
}

func (c *countingStore) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	return out
}

// twoModelReq: openai/gpt-4o with one profile, then anthropic/claude.
func twoModelReq() Request {
	return Request{
		SessionKey: "console:test",
		Chain:      []ModelRef{"openai/gpt-4o", "anthropic/claude"},
		Primary:    "openai/gpt-4o",
		Source:     SourceDefault,
		Profiles: map[string][]Profile{
			"openai":    {{ID: "openai:a", Provider: "openai", Type: ProfileAPIKey}},
			"anthropic": {{ID: "anthropic:main", Provider: "anthropic", Type: ProfileAPIKey}},
		},
	}
}

// TestRun_R7_BatchStoreCalls: with a store that has GetMany and UpdateMany, a
// fallback run reads each candidate's model and profile keys and its provider's
// probe row (E1) in one GetMany,
// records the primary's failure on its profile (D1) and on its model (R7) in ONE
// UpdateMany, and clears the fallback's clean profile with one Update.
// covers R7, D1
func TestRun_R7_BatchStoreCalls(t *testing.T) {
	h := newHarness(t)
	cs := &countingStore{m: h.st}
	h.e.Store = cs
	sc := newScript(h.clk, ok("fine")).on("openai/gpt-4o", failR(classify.ReasonRateLimit))
	res, err := h.e.Run(context.Background(), twoModelReq(), sc.fn)
	if err != nil || !res.FellBack {
		t.Fatalf("run = %+v, %v; want a fallback answer", res, err)
	}
	want := []string{
		"GetMany [model:openai/gpt-4o openai:a probe:openai]",
		"UpdateMany [openai:a model:openai/gpt-4o]",
		"GetMany [model:anthropic/claude anthropic:main probe:anthropic]",
		"Update anthropic:main",
	}
	if got := cs.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("store calls\n got %q\nwant %q", got, want)
	}
	if ps := h.state(t, "openai:a"); ps.ErrorCount != 1 || !ps.CooldownUntil.Equal(t0.Add(5*time.Second)) {
		t.Errorf("profile after the batch = %+v, want 1 error, 5 s cooldown (A3)", ps)
	}
	if ms := h.state(t, ModelKey("openai/gpt-4o")); ms.Consecutive != 1 {
		t.Errorf("model after the batch = %+v, want Consecutive 1", ms)
	}
}

// TestRun_R7_BatchMatchesPlainStore: the same runs over a store with the batch
// methods and over one without them leave identical state and identical attempt
// records, including the R7 switch at the threshold (the model's updated count
// comes back from UpdateMany), disables, and RecordFailure/RecordSuccess.
// covers R7, D1, D3, V5
func TestRun_R7_BatchMatchesPlainStore(t *testing.T) {
	type outcome struct {
		keys    [][]string
		records [][]string
		states  map[string]ProfileState
		r7      ProfileState // the model's state after the third run
	}
	play := func(batch bool) outcome {
		h := newHarness(t)
		if !batch {
			h.e.Store = plainStore{h.st}
		}
		ctx := context.Background()
		req := twoModelReq()
		var o outcome
		steps := []step{
			failR(classify.ReasonTimeout), failR(classify.ReasonOverloaded), failR(classify.ReasonRateLimit), // R7 threshold on the 3rd
			fail(Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Message: "deadline sk-CANARY-123456"}),
			failR(classify.ReasonBilling), ok("primary back"), ok("again"),
		}
		for i, s := range steps {
			sc := newScript(h.clk, ok("fallback")).on("openai/gpt-4o", s)
			res, err := h.e.Run(ctx, req, sc.fn)
			if err != nil {
				t.Fatalf("batch=%v run %d: %v", batch, i, err)
			}
			o.keys = append(o.keys, sc.keys())
			var recs []string
			for _, a := range res.Attempts {
				r := a.Candidate.Ref() + "@" + a.Candidate.Profile + " " + string(a.Kind) + " skip=" + string(a.Skipped)
				if a.Failure != nil {
					r += " fail=" + string(a.Failure.Reason)
				}
				recs = append(recs, r)
			}
			o.records = append(o.records, recs)
			if i == 2 {
				o.r7 = h.state(t, ModelKey("openai/gpt-4o"))
			}
			h.clk.Advance(10 * time.Minute)
		}
		c := Candidate{Provider: "anthropic", Model: "claude", Profile: "anthropic:main"}
		if err := h.e.RecordFailure(ctx, c, Failure{Reason: classify.ReasonOverloaded, Class: classify.ClassTransient}); err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(time.Second)
		if err := h.e.RecordSuccess(ctx, Candidate{Provider: "openai", Model: "gpt-4o", Profile: "openai:a"}); err != nil {
			t.Fatal(err)
		}
		o.states = map[string]ProfileState{}
		for _, k := range []string{"openai:a", "anthropic:main", ModelKey("openai/gpt-4o"), ModelKey("anthropic/claude")} {
			o.states[k] = h.state(t, k)
		}
		return o
	}
	plain, batch := play(false), play(true)
	if !reflect.DeepEqual(plain.keys, batch.keys) {
		t.Errorf("attempts differ\nplain %q\nbatch %q", plain.keys, batch.keys)
	}
	if !reflect.DeepEqual(plain.records, batch.records) {
		t.Errorf("records differ\nplain %q\nbatch %q", plain.records, batch.records)
	}
	for k, p := range plain.states {
		if b := batch.states[k]; !reflect.DeepEqual(p, b) {
			t.Errorf("state %s differs\nplain %+v\nbatch %+v", k, p, b)
		}
	}
	// The scenario really reached R7 and a disable, so the comparison means something.
	if !reflect.DeepEqual(plain.r7, batch.r7) {
		t.Errorf("model state after the threshold differs\nplain %+v\nbatch %+v", plain.r7, batch.r7)
	}
	if ms := batch.r7; ms.CooldownReason != classify.ReasonConsecutiveTimeout || ms.Consecutive != 3 {
		t.Errorf("R7 never marked the model: %+v", ms)
	}
	if ps := batch.states["anthropic:main"]; ps.ErrorCount != 1 || ps.CooldownReason != classify.ReasonOverloaded {
		t.Errorf("RecordFailure not applied: %+v", ps)
	}
	if ms := batch.states[ModelKey("openai/gpt-4o")]; ms.Consecutive != 0 || !ms.CooldownUntil.IsZero() {
		t.Errorf("RecordSuccess did not clear the model: %+v", ms)
	}
}

// TestApplySuccessLazy: a success on a clean profile leaves a LastUsed younger
// than lastUsedPersist as stored (a no-op update); anything else it clears is
// written together with the new LastUsed.
// covers D1, P1
func TestApplySuccessLazy(t *testing.T) {
	now := t0
	recent := now.Add(-lastUsedPersist / 2)
	tests := []struct {
		name string
		in   ProfileState
		want time.Time // LastUsed after
	}{
		{"never used: written", ProfileState{}, now},
		{"clean and recent: kept", ProfileState{LastUsed: recent}, recent},
		{"clean and old: written", ProfileState{LastUsed: now.Add(-lastUsedPersist)}, now},
		{"stored in the future (clock skew): written", ProfileState{LastUsed: now.Add(time.Second)}, now},
		{"error count: cleared and written", ProfileState{LastUsed: recent, ErrorCount: 1}, now},
		{"expired cooldown: cleared and written", ProfileState{LastUsed: recent, CooldownUntil: now.Add(-time.Second), CooldownReason: classify.ReasonRateLimit}, now},
		{"R7 count: cleared and written", ProfileState{LastUsed: recent, Consecutive: 2}, now},
		{"other model's active scoped cooldown stays: kept", ProfileState{LastUsed: recent, CooldownUntil: now.Add(time.Minute),
			CooldownReason: classify.ReasonRateLimit, CooldownModel: "openai/other"}, recent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in
			applySuccessLazy(&got, "openai/gpt-4o", now)
			full := tc.in
			applySuccess(&full, "openai/gpt-4o", now)
			if !got.LastUsed.Equal(tc.want) {
				t.Errorf("LastUsed = %v, want %v", got.LastUsed, tc.want)
			}
			full.LastUsed = got.LastUsed
			if got != full {
				t.Errorf("lazy result %+v differs from applySuccess %+v beyond LastUsed", got, full)
			}
			if tc.want.Equal(tc.in.LastUsed) && got != tc.in {
				t.Errorf("kept LastUsed but changed the state: %+v -> %+v", tc.in, got)
			}
		})
	}
}

// TestRun_P1_LazyLastUsedKeepsRotation: successes on clean profiles seconds apart
// do not rewrite the stored LastUsed, yet least-recently-used rotation (P1) stays
// exact in the process (in-process map), and /status shows the real last use.
// After lastUsedPersist the next success is persisted again.
// covers P1
func TestRun_P1_LazyLastUsedKeepsRotation(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	req := baseReq("openai/gpt-4o") // openai:a and openai:b, api keys
	var got []string
	for i := 0; i < 6; i++ {
		sc := newScript(h.clk, ok("hi"))
		res, err := h.e.Run(ctx, req, sc.fn)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.Candidate.Profile)
		h.clk.Advance(time.Second)
	}
	want := []string{"openai:a", "openai:b", "openai:a", "openai:b", "openai:a", "openai:b"}
	if !eqStrings(got, want) {
		t.Fatalf("rotation %v, want %v", got, want)
	}
	// Only the first use of each profile was written (the others were no-ops).
	if a, b := h.state(t, "openai:a"), h.state(t, "openai:b"); !a.LastUsed.Equal(t0) || !b.LastUsed.Equal(t0.Add(time.Second)) {
		t.Errorf("stored LastUsed a=%v b=%v, want %v and %v", a.LastUsed, b.LastUsed, t0, t0.Add(time.Second))
	}
	cs, err := h.e.CandidateStatus(ctx, "openai/gpt-4o", req.Profiles["openai"])
	if err != nil {
		t.Fatal(err)
	}
	if !cs.Profiles[0].LastUsed.Equal(t0.Add(4*time.Second)) || !cs.Profiles[1].LastUsed.Equal(t0.Add(5*time.Second)) {
		t.Errorf("status LastUsed %v / %v, want this process's last uses", cs.Profiles[0].LastUsed, cs.Profiles[1].LastUsed)
	}
	// Once the stored value is lastUsedPersist old, a success writes it again.
	h.clk.Set(t0.Add(lastUsedPersist))
	sc := newScript(h.clk, ok("hi"))
	res, err := h.e.Run(ctx, req, sc.fn)
	if err != nil || res.Candidate.Profile != "openai:a" {
		t.Fatalf("run = %+v, %v; want openai:a", res, err)
	}
	if a := h.state(t, "openai:a"); !a.LastUsed.Equal(t0.Add(lastUsedPersist)) {
		t.Errorf("stored LastUsed after the window = %v, want %v", a.LastUsed, t0.Add(lastUsedPersist))
	}
}

// TestEngine_NoteUsedBounded: the in-process LastUsed map stays bounded.
func TestEngine_NoteUsedBounded(t *testing.T) {
	e := &Engine{}
	for i := 0; i < 3*maxUsed; i++ {
		e.noteUsed(fmt.Sprint("p:", i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if n := len(e.used); n > maxUsed {
		t.Fatalf("used map has %d entries, want <= %d", n, maxUsed)
	}
	last := fmt.Sprint("p:", 3*maxUsed-1)
	if _, ok := e.used[last]; !ok {
		t.Fatal("latest entry dropped")
	}
}

// TestMemStore_Batch: GetMany and UpdateMany keep keys' order; a repeated key sees
// the earlier result; a cancelled context changes nothing.
func TestMemStore_Batch(t *testing.T) {
	s := NewMemStore()
	ctx := context.Background()
	out, err := s.UpdateMany(ctx, []string{"a", "b", "a"}, func(i int, st *ProfileState) { st.ErrorCount += i + 1 })
	if err != nil || out[0].ErrorCount != 1 || out[1].ErrorCount != 2 || out[2].ErrorCount != 4 || out[2].Key != "a" {
		t.Fatalf("UpdateMany = %+v, %v", out, err)
	}
	got, err := s.GetMany(ctx, []string{"b", "missing", "a"})
	if err != nil || got[0].ErrorCount != 2 || got[1] != (ProfileState{Key: "missing"}) || got[2].ErrorCount != 4 {
		t.Fatalf("GetMany = %+v, %v", got, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.UpdateMany(cctx, []string{"a"}, func(int, *ProfileState) { t.Error("fn ran after cancel") }); err == nil {
		t.Error("UpdateMany on a cancelled context succeeded")
	}
	if _, err := s.GetMany(cctx, []string{"a"}); err == nil {
		t.Error("GetMany on a cancelled context succeeded")
	}
	if _, err := s.UpdateMany(ctx, []string{"a"}, nil); err == nil {
		t.Error("UpdateMany with nil fn succeeded")
	}
}

// brokenStore fails every call; batch adds the batch methods (failing too).
type brokenStore struct{}

var errBroken = errors.New("disk on fire")

func (brokenStore) Get(_ context.Context, key string) (ProfileState, error) {
	return ProfileState{Key: key}, errBroken
}

func (brokenStore) Update(_ context.Context, key string, _ func(*ProfileState)) (ProfileState, error) {
	return ProfileState{Key: key}, errBroken
}

type brokenBatchStore struct{ brokenStore }

func (brokenBatchStore) GetMany(context.Context, []string) ([]ProfileState, error) {
	return nil, errBroken
}

func (brokenBatchStore) UpdateMany(context.Context, []string, func(int, *ProfileState)) ([]ProfileState, error) {
	return nil, errBroken
}

// TestRun_D6_StoreErrorsDoNotBlockRuns: a failing state store, with or without
// the batch methods, is logged and treated as empty state; the run still answers
// from the fallback, and RecordFailure/CandidateStatus report the error.
// covers D6, B5
func TestRun_D6_StoreErrorsDoNotBlockRuns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store StateStore
	}{{"plain", brokenStore{}}, {"batch", brokenBatchStore{}}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.e.Store = tc.store
			sc := newScript(h.clk, ok("fine")).on("openai/gpt-4o", failR(classify.ReasonRateLimit))
			res, err := h.e.Run(context.Background(), twoModelReq(), sc.fn)
			if err != nil || res.Candidate.Ref() != "anthropic/claude" {
				t.Fatalf("run = %+v, %v; want the fallback's answer", res, err)
			}
			if !strings.Contains(h.log.String(), "failover state store error") || !strings.Contains(h.log.String(), errBroken.Error()) {
				t.Errorf("store error not logged:\n%s", h.log.String())
			}
			c := Candidate{Provider: "openai", Model: "gpt-4o", Profile: "openai:a"}
			if err := h.e.RecordFailure(context.Background(), c, Failure{Reason: classify.ReasonRateLimit, Class: classify.ClassTransient}); !errors.Is(err, errBroken) {
				t.Errorf("RecordFailure error = %v, want %v", err, errBroken)
			}
			if _, err := h.e.CandidateStatus(context.Background(), "openai/gpt-4o", nil); !errors.Is(err, errBroken) {
				t.Errorf("CandidateStatus error = %v, want %v", err, errBroken)
			}
		})
	}
}
