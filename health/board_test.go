package health

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/failover"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fixture is a State as testdata holds it: the policy is the default one.
type fixture struct {
	Now       time.Time
	Providers []Provider
	States    []failover.ProfileState
	Records   Records
}

func load(t *testing.T, name string) State {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	st := State{Now: f.Now, Policy: failover.DefaultPolicy(), Providers: f.Providers, States: map[string]failover.ProfileState{}, Records: f.Records}
	for _, s := range f.States {
		st.States[s.Key] = s
	}
	return st
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./health -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestBuild_Issue38_Golden: the board of each fixture, for an admin and for
// everyone else, as JSON (the `bot status --json` schema) and as text.
// covers issue 38
func TestBuild_Issue38_Golden(t *testing.T) {
	for _, name := range []string{"calm", "outage", "busy"} {
		t.Run(name, func(t *testing.T) {
			st := load(t, name)
			for _, admin := range []bool{true, false} {
				suffix := ".user"
				if admin {
					suffix = ".admin"
				}
				b := Build(st, admin)
				js, err := json.MarshalIndent(b, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				golden(t, name+suffix+".golden.json", append(js, '\n'))
				var txt bytes.Buffer
				if err := Text(&txt, b); err != nil {
					t.Fatal(err)
				}
				golden(t, name+suffix+".golden.txt", txt.Bytes())
			}
		})
	}
}

// TestBuild_Issue38_States: each provider, model and key gets the state the
// engine would act on.
// covers issue 38, E1, E2, D1-D4, R7
func TestBuild_Issue38_States(t *testing.T) {
	b := Build(load(t, "outage"), true)
	prov := map[string]ProviderView{}
	models := map[string]ModelView{}
	keys := map[string]KeyView{}
	for _, p := range b.Providers {
		prov[p.Name] = p
		for _, m := range p.Models {
			models[m.Ref] = m
		}
		for _, k := range p.Keys {
			keys[k.ID] = k
		}
	}
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	tests := []struct {
		name, got, want string
	}{
		{"anthropic is down", prov["anthropic"].State, Down},
		{"anthropic's model is down", models["anthropic/claude-sonnet"].State, Down},
		{"gpt-4o cools down (main rate limited, backup disabled)", models["openai/gpt-4o"].State, CoolingDown},
		{"gpt-4o until main's cooldown ends", models["openai/gpt-4o"].Until.String(), at("2026-03-02T10:05:00Z").String()},
		{"gpt-4o-mini cools down (R7 and its keys)", models["openai/gpt-4o-mini"].State, CoolingDown},
		{"openai: no model answers", prov["openai"].State, CoolingDown},
		{"gemini's only key expired", models["gemini/flash"].State, Disabled},
		{"ollama answers", models["ollama/llama3"].State, Answering},
		{"main cools down", keys["openai:main"].State, CoolingDown},
		{"backup disabled", keys["openai:backup"].State, Disabled},
		{"backup disabled for billing", keys["openai:backup"].Reason, "billing"},
		{"gemini:old expired", keys["gemini:old"].State, Expired},
		{"team answers", keys["anthropic:team"].State, Answering},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	a := prov["anthropic"]
	// E2: two failed checks in a row: the interval doubled twice from 5 s (20 s) after the latest check.
	if want := at("2026-03-02T10:00:00Z"); !a.NextCheckAt.Equal(want) {
		t.Errorf("anthropic's next check %v, want %v (due)", a.NextCheckAt, want)
	}
	if !a.CheckedAt.Equal(at("2026-03-02T09:59:40Z")) || a.FailedChecks != 2 {
		t.Errorf("anthropic checked %v (%d failed), want 09:59:40 (2)", a.CheckedAt, a.FailedChecks)
	}
	if b.AllDown == nil || !b.AllDown.Since.Equal(at("2026-03-02T09:55:00Z")) {
		t.Errorf("all down: %+v, want since 09:55", b.AllDown)
	}
}

// TestBuild_Issue38_NextCheck: the next check of a provider that is down
// follows E2's doubling from the latest check.
// covers issue 38, E2
func TestBuild_Issue38_NextCheck(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		failed int
		want   time.Duration
	}{{0, 5 * time.Second}, {1, 10 * time.Second}, {2, 20 * time.Second}, {5, 30 * time.Second}} {
		st := State{Now: now, Policy: failover.DefaultPolicy(), Providers: []Provider{{Name: "p", Models: []failover.ModelRef{"p/m"}}},
			States: map[string]failover.ProfileState{"probe:p": {Key: "probe:p", LastProbe: now.Add(-time.Second), LastFailure: now, Consecutive: tt.failed}}}
		got := Build(st, false).Providers[0]
		if want := now.Add(-time.Second + tt.want); got.State != Down || !got.NextCheckAt.Equal(want) {
			t.Errorf("%d failed checks: %s, next %v; want down, next %v", tt.failed, got.State, got.NextCheckAt, want)
		}
	}
}

// TestBuild_Issue38_Audience: everyone else's board has models and states
// only: no key name, no session key, no spend.
// covers issue 38
func TestBuild_Issue38_Audience(t *testing.T) {
	st := load(t, "outage")
	js, err := json.Marshal(Build(st, false))
	if err != nil {
		t.Fatal(err)
	}
	var txt bytes.Buffer
	_ = Text(&txt, Build(st, false))
	for _, out := range []string{string(js), txt.String()} {
		for _, p := range st.Providers {
			for _, pr := range p.Profiles {
				if strings.Contains(out, pr.ID) {
					t.Errorf("everyone's board names key %s:\n%s", pr.ID, out)
				}
			}
		}
		for _, f := range st.Records.Fallbacks {
			if strings.Contains(out, f.Session) {
				t.Errorf("everyone's board names session %s", f.Session)
			}
		}
		for _, w := range []string{"usd", "$", "today", "Today", "tokens"} {
			if strings.Contains(out, w) {
				t.Errorf("everyone's board shows spend (%q)", w)
			}
		}
	}
	admin := Build(st, true)
	if admin.Today == nil || admin.Today.Calls != 52 || len(admin.Providers[0].Keys) != 2 {
		t.Errorf("the admin's board lacks keys or spend: %+v", admin.Today)
	}
}

// TestBuild_Issue38_Timeline: the window's events newest first, alike
// neighbours merged, bounded, old ones gone.
// covers issue 38
func TestBuild_Issue38_Timeline(t *testing.T) {
	b := Build(load(t, "busy"), false)
	if len(b.Timeline) != MaxEvents || b.Omitted != 31-MaxEvents {
		t.Fatalf("timeline %d events, %d omitted; want %d, %d", len(b.Timeline), b.Omitted, MaxEvents, 31-MaxEvents)
	}
	if e := b.Timeline[0]; e.Kind != FallbackStarted || e.Count != 5 || e.Reason != "timeout" {
		t.Errorf("newest %+v, want the burst of 5 timeouts as one", e)
	}
	for i := 1; i < len(b.Timeline); i++ {
		if b.Timeline[i].At.After(b.Timeline[i-1].At) {
			t.Fatalf("not newest first at %d", i)
		}
	}
	o := Build(load(t, "outage"), true)
	var kinds []string
	for _, e := range o.Timeline {
		kinds = append(kinds, e.Kind)
		if e.At.Before(o.At.Add(-Window)) && !e.Ongoing {
			t.Errorf("event older than the window: %+v", e)
		}
	}
	want := "all_down fallback_started fallback_cleared fallback_started key_disabled fallback_started all_down"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("timeline kinds\n got %s\nwant %s", got, want)
	}
	if d := o.Timeline[len(o.Timeline)-1]; d.Seconds != 750 || d.Ongoing {
		t.Errorf("the 08:00 all-down period: %+v, want 750 s, ended", d)
	}
}

// TestReadme_Issue38_ShowsTheBoard: the terminal board README.md and
// docs/operations.md show is what `bot status` prints for the outage fixture.
// covers issue 38
func TestReadme_Issue38_ShowsTheBoard(t *testing.T) {
	for _, tc := range []struct{ doc, golden string }{
		{"../README.md", "outage.user.golden.txt"},
		{"../docs/operations.md", "outage.admin.golden.txt"},
	} {
		doc, err := os.ReadFile(tc.doc)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("testdata", tc.golden))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), string(want)) {
			t.Errorf("%s does not show the board as bot status prints it (testdata/%s)", tc.doc, tc.golden)
		}
	}
}
