package drills

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/internal/fakeprovider"
)

func demoConfig(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestStep_CallsMatchFakeLog runs scenario steps and compares what the report
// says with the fake server's own call log, model by model and key by key.
func TestStep_CallsMatchFakeLog(t *testing.T) {
	cfg, err := LoadConfig("demo.yaml", demoConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := Lookup("flapping-primary")
	w := &world{cfg: Effective(cfg, true), sc: sc, opts: Options{Fast: true, TempDir: t.TempDir()}}
	w.primary = string(cfg.Agents.Defaults.Model.Primary)
	for _, f := range cfg.Agents.Defaults.Model.Fallbacks {
		w.fallbacks = append(w.fallbacks, string(f))
	}
	w.history = map[string]int{}
	ctx := context.Background()
	cleanup, err := w.start(ctx)
	defer cleanup()
	if err != nil {
		t.Fatal(err)
	}
	t0 := w.clock.Now()
	var rep Report
	rep.Primary = w.primary
	for i, st := range sc.Steps[:2] { // both steps keep the fake's log (no Reset between)
		if i == 1 {
			st.Faults = nil
		}
		turn, calls, err := w.step(ctx, i+1, st, t0)
		if err != nil {
			t.Fatal(err)
		}
		rep.Turns = append(rep.Turns, turn)
		rep.Calls = append(rep.Calls, calls...)
	}
	log := w.fake.Calls()
	if len(log) == 0 || rep.PaidCalls() != len(log) {
		t.Fatalf("report has %d calls, the fake logged %d", rep.PaidCalls(), len(log))
	}
	if got := rep.Turns[0].Calls + rep.Turns[1].Calls; got != len(log) {
		t.Errorf("steps count %d calls, the fake logged %d", got, len(log))
	}
	for _, g := range rep.ByModelProfile() {
		p, m := splitRef(g.Model)
		want := w.fake.CallCount(fakeprovider.Filter{Provider: p, Model: m, KeyID: fakeprovider.KeyID(DummyKey(g.Profile))})
		if g.Profile == "" || g.Calls != want {
			t.Errorf("%s@%s: report %d calls, fake %d", g.Model, g.Profile, g.Calls, want)
		}
	}
	if n := rep.CallsTo(1, w.primary); n != w.fake.CallCount(fakeprovider.Filter{Provider: "demo", Model: "primary", Mode: fakeprovider.ModeServer500}) {
		t.Errorf("step 1 primary calls %d do not match the fake's 500s", n)
	}
	if rep.CallsTo(2, w.primary) != 0 {
		t.Errorf("step 2 called the primary: %+v", rep.Calls)
	}
	if a := rep.Turns[0].Answers[0]; a.Kind != "reply" || a.Model == w.primary || a.After <= 0 {
		t.Errorf("step 1 answer = %+v, want a fallback reply", a)
	}
	if len(rep.Turns[0].Notices) != 1 {
		t.Errorf("step 1 notices = %q, want one fallback notice", rep.Turns[0].Notices)
	}
}

// TestRunScenario_NoSecretsRead covers P4: a drill never reads the environment,
// so a canary key in it never reaches the fake, the report or the output.
func TestRunScenario_NoSecretsRead(t *testing.T) {
	const canary = "sk-CANARY-drills-0123456789"
	t.Setenv("DETOUR_DEMO_KEY_MAIN", canary)
	t.Setenv("DETOUR_DEMO_BASE_URL", "http://127.0.0.1:1/never")
	cfg, err := LoadConfig("demo.yaml", demoConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := Lookup("no-fault")
	rep := RunScenario(context.Background(), cfg, sc, Options{Fast: true, TempDir: t.TempDir()})
	if !rep.Verdict.Pass {
		t.Fatalf("no-fault failed: %+v", rep.Verdict)
	}
	if len(rep.Calls) != 1 || rep.Calls[0].Profile != "demo:main" {
		t.Errorf("calls = %+v, want one call with the dummy key of demo:main", rep.Calls)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, []Report{rep}); err != nil {
		t.Fatal(err)
	}
	if err := WriteText(&buf, []Report{rep}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), canary) || strings.Contains(buf.String(), fakeprovider.KeyID(canary)) {
		t.Error("the canary key leaked into the output")
	}
}

// TestRunScenario_MissingEnvStillRuns: unset ${ENV} references do not stop a drill.
func TestRunScenario_MissingEnvStillRuns(t *testing.T) {
	cfg, err := LoadConfig("x.yaml", []byte(`
providers:
  a: {base_url: "${NOPE_URL_DRILL}"}
  b: {base_url: https://example.invalid/v1}
auth:
  profiles:
    a:k1: {provider: a, type: api_key, key: "${NOPE_KEY_DRILL}"}
agents:
  defaults:
    model: {primary: a/m1, fallbacks: [b/m2]}
models:
  a/m1: {usd_per_mtok_in: 1, usd_per_mtok_out: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := Lookup("a500")
	rep := RunScenario(context.Background(), cfg, sc, Options{Fast: true, TempDir: t.TempDir()})
	if rep.Err != "" || !rep.Verdict.Pass {
		t.Fatalf("a500 on a minimal config: err %q verdict %+v", rep.Err, rep.Verdict)
	}
	if !rep.Priced || rep.CostUSD <= 0 {
		t.Errorf("priced %v cost %v, want an estimate from the a/m1 price", rep.Priced, rep.CostUSD)
	}
	if rep.CallsTo(1, "b/m2") != 1 || rep.Calls[len(rep.Calls)-1].Profile != "" {
		t.Errorf("calls = %+v, want the keyless fallback answering once", rep.Calls)
	}
}

func TestEffective_FastScalesTimeouts(t *testing.T) {
	cfg, err := LoadConfig("demo.yaml", demoConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Agents.Defaults.IdleTimeout = 60 * time.Second
	cfg.Policy.AttemptTimeout = 300 * time.Second
	cfg.Policy.RunTimeout = 1800 * time.Second
	timeouts := func(c *config.Config) [3]time.Duration {
		return [3]time.Duration{c.Agents.Defaults.IdleTimeout, c.Policy.AttemptTimeout, c.Policy.RunTimeout}
	}
	if f := timeouts(Effective(cfg, true)); f != [3]time.Duration{200 * time.Millisecond, time.Second, 6 * time.Second} {
		t.Errorf("fast timeouts = %v, want 0.2s/1s/6s", f)
	}
	if timeouts(cfg) != [3]time.Duration{60 * time.Second, 300 * time.Second, 1800 * time.Second} {
		t.Error("Effective changed its input")
	}
	if s := timeouts(Effective(cfg, false)); s != timeouts(cfg) {
		t.Errorf("real timeouts changed: %v", s)
	}
}

func TestClock_FastSleepAdvances(t *testing.T) {
	c := NewClock(FastScale)
	before := c.Now()
	if err := c.Sleep(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := c.Now().Sub(before); got < time.Minute {
		t.Errorf("after Sleep(1m) the clock moved %s", got)
	}
	c.Advance(48 * time.Hour)
	if c.Offset() < 48*time.Hour {
		t.Errorf("offset %s after Advance(48h)", c.Offset())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); err == nil {
		t.Error("Sleep on a cancelled context returned nil")
	}
}

func TestSelect(t *testing.T) {
	all, err := Select("all")
	if err != nil || len(all) != len(table) {
		t.Fatalf("all: %d, %v", len(all), err)
	}
	two, err := Select("stall-storm, many-sessions")
	if err != nil || len(two) != 2 || two[1].Name != "many-sessions" {
		t.Fatalf("two: %+v, %v", two, err)
	}
	if _, err := Select("nope"); err == nil || !strings.Contains(err.Error(), "stall-storm") {
		t.Errorf("unknown scenario error = %v", err)
	}
}

// TestTable_Declarative: every scenario has a name, a one-line doc, steps and checks.
func TestTable_Declarative(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range table {
		if s.Name == "" || seen[s.Name] || s.Doc == "" || strings.Contains(s.Doc, "\n") || len(s.Steps) == 0 || len(s.Checks) == 0 {
			t.Errorf("bad scenario %+v", s.Name)
		}
		seen[s.Name] = true
	}
	for _, want := range []string{"stall-storm", "hang-before-headers", "stealth-billing", "quota-exhausted", "long-reset-429",
		"overload-burst", "auth-revoked", "all-down", "context-overflow", "flapping-primary", "many-sessions"} {
		if !seen[want] {
			t.Errorf("scenario %s missing", want)
		}
	}
}

func TestRules_ResolveAgainstChain(t *testing.T) {
	got := rules([]Fault{
		{On: OnPrimary, Mode: fakeprovider.ModeServer500, Times: 2},
		{On: OnEvery, Modes: []fakeprovider.Mode{fakeprovider.ModeRateLimit, fakeprovider.ModeOverloaded529}, RetryAfter: time.Minute},
		{On: OnPrimaryProvider, Mode: fakeprovider.ModeRevoked403},
	}, "a/m1", []string{"b/x/y", "a/m1"})
	want := []fakeprovider.Rule{
		{Provider: "a", Model: "m1", Mode: fakeprovider.ModeServer500, Times: 2},
		{Provider: "a", Model: "m1", Mode: fakeprovider.ModeRateLimit, RetryAfter: time.Minute},
		{Provider: "b", Model: "x/y", Mode: fakeprovider.ModeOverloaded529, RetryAfter: time.Minute},
		{Provider: "a", Mode: fakeprovider.ModeRevoked403},
	}
	if len(got) != len(want) {
		t.Fatalf("rules = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rule %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestWrite_Formats(t *testing.T) {
	rep := Report{Scenario: "stall-storm", Doc: "d", Primary: "a/m", Turns: []Turn{{Step: 1, Sessions: 1, Calls: 1,
		Answers: []Answer{{Session: "drill:s001", Kind: "error", Text: "stopped | stalled", After: time.Second}}}},
		Calls: []Call{{Step: 1, Provider: "a", Model: "m", Profile: "a:k"}}}
	rep.Verdict = Judge(&rep, Budgets{MaxPaidPerTurn: 8, MaxPaidPerMinute: 120, BreakerTrip: 5})
	for _, f := range []string{"text", "json", "markdown"} {
		var b bytes.Buffer
		if err := Write(&b, f, []Report{rep}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "stall-storm") {
			t.Errorf("%s output lacks the scenario: %s", f, b.String())
		}
		if f == "json" {
			var back []Report
			if err := json.Unmarshal(b.Bytes(), &back); err != nil || len(back) != 1 || back[0].Calls[0].Profile != "a:k" {
				t.Errorf("json round trip: %v %+v", err, back)
			}
		}
		if f == "markdown" && !strings.Contains(b.String(), `stopped \| stalled`) && !strings.Contains(b.String(), "| stall-storm | 1 |") {
			t.Errorf("markdown row: %s", b.String())
		}
	}
	if err := Write(&bytes.Buffer{}, "xml", nil); err == nil {
		t.Error("unknown format accepted")
	}
}

// covers issue 37 ("bot drill fails on ${ENV} in base_url"): a ${VAR} that
// is part of a base URL (a host, a port, a resource name) loads, and the
// drill runs on the fake as with any other configuration; a whole-value
// reference still gets a URL.
func TestLoadConfig_Issue37_EnvInsideBaseURL(t *testing.T) {
	cfg, err := LoadConfig("x.yaml", []byte(`
providers:
  az: {api: azure, base_url: "https://${AZ_HOST}/v1", api_version: 2024-10-21}
  p2: {base_url: "http://127.0.0.1:${P2_PORT}/v1"}
  p3:
    base_url: https://${P3_RESOURCE}.example.com:${P3_PORT:-8443}/v1
  p4: {base_url: "${P4_URL}"}
auth:
  profiles:
    az:main: {provider: az, type: api_key, key: "${AZ_KEY}"}
    p2:main: {provider: p2, type: api_key, key: ${P2_KEY}}
    p3:main: {provider: p3, type: api_key, key: "sk-${P3_KEY_SUFFIX}"}
agents:
  defaults:
    model: {primary: az/gpt, fallbacks: [p2/m2, p3/m3, p4/m4]}
`))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := map[string]string{"az": "https://1/v1", "p2": "http://127.0.0.1:1/v1", "p3": "https://1.example.com:1/v1", "p4": placeholder}
	for p, u := range want {
		if got := cfg.Providers[p].BaseURL; got != u {
			t.Errorf("%s: base_url %q, want %q", p, got, u)
		}
	}
	sc, _ := Lookup("no-fault")
	rep := RunScenario(context.Background(), cfg, sc, Options{Fast: true, TempDir: t.TempDir()})
	if rep.Err != "" || !rep.Verdict.Pass || rep.CallsTo(1, "az/gpt") != 1 {
		t.Fatalf("no-fault: err %q verdict %+v calls %+v", rep.Err, rep.Verdict, rep.Calls)
	}
}
