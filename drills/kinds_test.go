package drills

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/fakeprovider"
)

// kindsConfig is testdata/kinds.yaml: anthropic -> azure -> openai-compatible.
func kindsConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := LoadConfigFile("testdata/kinds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// asOpenAI is cfg with every provider speaking the OpenAI-compatible protocol:
// the same chain, keys and budgets, so any difference in what failover does
// comes from the protocols alone.
func asOpenAI(cfg *config.Config) *config.Config {
	c := *cfg
	c.Providers = map[string]config.Provider{}
	for id, p := range cfg.Providers {
		p.API, p.APIVersion = config.APIOpenAI, ""
		c.Providers[id] = p
	}
	c.Models = map[failover.ModelRef]config.Model{}
	for r, m := range cfg.Models {
		m.Deployment = ""
		c.Models[r] = m
	}
	return &c
}

// TestRun_Kinds_EveryDrillPasses runs every scenario on a chain of three
// protocols, anthropic -> azure -> openai-compatible, against the fake speaking
// each one (what `bot drill --scenario all --fast --config
// drills/testdata/kinds.yaml` runs). covers R1-R11, R15, B2, B6, N1-N3, V3, V4
func TestRun_Kinds_EveryDrillPasses(t *testing.T) {
	reps := Run(context.Background(), kindsConfig(t), Scenarios(), Options{Fast: true, TempDir: t.TempDir()})
	if len(reps) != len(Scenarios()) {
		t.Fatalf("%d reports for %d scenarios", len(reps), len(Scenarios()))
	}
	for _, r := range reps {
		if !r.Verdict.Pass {
			var failed []string
			for _, c := range r.Verdict.Checks {
				if !c.Pass {
					failed = append(failed, c.Name+": "+c.Detail)
				}
			}
			t.Errorf("%s failed (%s): %s", r.Scenario, r.Err, strings.Join(failed, "; "))
		}
	}
}

// The drill world serves each provider in its own protocol: the fake sees
// Anthropic's route with both keys, Azure's deployment path (prod-gpt-4o for
// azure/gpt-4o) and the OpenAI-compatible route.
func TestStep_Kinds_EachProtocolServed(t *testing.T) {
	cfg := kindsConfig(t)
	sc, _ := Lookup("all-down")
	w := &world{cfg: Effective(cfg, true), sc: sc, opts: Options{Fast: true, TempDir: t.TempDir()}}
	w.primary = string(cfg.Agents.Defaults.Model.Primary)
	for _, f := range cfg.Agents.Defaults.Model.Fallbacks {
		w.fallbacks = append(w.fallbacks, string(f))
	}
	w.history = map[string]int{}
	cleanup, err := w.start(context.Background())
	defer cleanup()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.step(context.Background(), 1, sc.Steps[0], w.clock.Now()); err != nil {
		t.Fatal(err)
	}
	seen := map[fakeprovider.API][]string{}
	for _, c := range w.fake.Calls() {
		seen[c.API] = append(seen[c.API], c.Provider+"/"+c.Model+"@"+c.Deployment+"#"+w.keyIDs[c.KeyID])
	}
	want := map[fakeprovider.API]string{
		fakeprovider.APIAnthropic: "anthropic/claude-haiku-4-5@#anthropic:",
		fakeprovider.APIAzure:     "azure/gpt-4o@prod-gpt-4o#azure:main",
		fakeprovider.APIOpenAI:    "openai/gpt-4o-mini@#openai:main",
	}
	for api, prefix := range want {
		if len(seen[api]) == 0 || !strings.HasPrefix(seen[api][0], prefix) {
			t.Errorf("%s: calls %q, want %s...", api, seen[api], prefix)
		}
	}
	if len(seen) != 3 {
		t.Errorf("calls by protocol: %q", seen)
	}
}

// outcomeOf is what a scenario's report says failover did, without the clock:
// per step the answers (kind and model), the notices, and the paid calls by
// model in order with the number of keys they used.
func outcomeOf(r Report) []string {
	var out []string
	for _, t := range r.Turns {
		line := fmt.Sprintf("step %d:", t.Step)
		for _, a := range t.Answers {
			line += " " + a.Kind + " " + a.Model
		}
		out = append(out, line, fmt.Sprintf("  notices %q", t.Notices))
		var calls []string
		keys := map[string]bool{}
		for _, c := range r.Calls {
			if c.Step == t.Step {
				calls = append(calls, c.Ref())
				keys[c.Profile] = true
			}
		}
		// Which of two equally rested keys goes first is a tie (P1), not
		// the protocol's doing: the calls are compared by model, with the
		// number of keys they used.
		out = append(out, fmt.Sprintf("  calls %s with %d key(s)", strings.Join(calls, ", "), len(keys)))
	}
	return out
}

// TestKinds_FailoverAsOpenAI: for each failure family, the chain anthropic ->
// azure -> openai-compatible fails over exactly as the same chain spoken
// entirely in the OpenAI-compatible protocol: the same calls in the same order
// (key rotation, fallbacks, parking until a stated reset, the probe back), the
// same answers and notices, from the failing turn to the recovery. covers R1-R3, R6, R15, B6, D2-D5, N1, N3
func TestKinds_FailoverAsOpenAI(t *testing.T) {
	kinds := kindsConfig(t)
	openai := asOpenAI(kinds)
	modes := []Fault{
		{On: OnPrimary, Mode: fakeprovider.ModeRateLimit, RetryAfter: 90 * time.Second},
		{On: OnPrimary, Mode: fakeprovider.ModeRateLimit, RetryAfter: 2 * time.Hour},
		{On: OnPrimary, Mode: fakeprovider.ModeQuotaResetText, RetryAfter: 5 * 24 * time.Hour},
		{On: OnPrimary, Mode: fakeprovider.ModeInsufficientQuota},
		{On: OnPrimary, Mode: fakeprovider.ModeBilling402},
		{On: OnPrimary, Mode: fakeprovider.ModeUnauthorized401},
		{On: OnPrimary, Mode: fakeprovider.ModeRevoked403},
		{On: OnPrimary, Mode: fakeprovider.ModeOverloaded529},
		{On: OnPrimary, Mode: fakeprovider.ModeServer500},
		{On: OnPrimary, Mode: fakeprovider.ModeModelNotFound404},
		{On: OnPrimary, Mode: fakeprovider.ModeContextOverflow400, Times: 1},
		{On: OnFallbacks, Mode: fakeprovider.ModeRateLimit, RetryAfter: 90 * time.Second},
		{On: OnFallbacks, Mode: fakeprovider.ModeOverloaded529},
		{On: OnFallbacks, Mode: fakeprovider.ModeUnauthorized401},
		{On: OnEvery, Mode: fakeprovider.ModeInsufficientQuota},
	}
	for _, f := range modes {
		t.Run(fmt.Sprintf("%s-%s-%v", f.On, f.Mode, f.RetryAfter), func(t *testing.T) {
			// A healthy turn, the failing one, one right after, one when the
			// primary's probe is due (a stated reset keeps it parked), one
			// after every reset, healed (back to the primary).
			sc := Scenario{Name: "kinds-" + string(f.Mode), Steps: []Step{
				{}, {Faults: []Fault{f}}, {}, {AdvanceProbe: true}, {Advance: 3 * time.Hour, AdvanceProbe: true, Faults: []Fault{}},
			}}
			got := outcomeOf(RunScenario(context.Background(), kinds, sc, Options{Fast: true, TempDir: t.TempDir()}))
			want := outcomeOf(RunScenario(context.Background(), openai, sc, Options{Fast: true, TempDir: t.TempDir()}))
			if !slices.Equal(got, want) {
				t.Errorf("anthropic -> azure -> openai:\n  %s\nall openai-compatible:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			if !strings.Contains(strings.Join(got, "\n"), "reply") {
				t.Errorf("no answer at all:\n%s", strings.Join(got, "\n"))
			}
		})
	}
}
