package commands

import (
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParse_Table(t *testing.T) {
	cases := []struct {
		in      string
		ok      bool
		name    Name
		unknown string
		ref     string
		alias   string
		profile string
		def     bool
		list    bool
		errHas  string
	}{
		{in: "/model", ok: true, name: CmdModel},
		{in: "!model", ok: true, name: CmdModel},
		{in: "  /MODEL  ", ok: true, name: CmdModel},
		{in: "<@U123> /model openai/gpt-4o", ok: true, name: CmdModel, ref: "openai/gpt-4o"},
		{in: "<@!456>   !status", ok: true, name: CmdStatus},
		{in: "@detour /help", ok: true, name: CmdHelp},
		{in: "/model@detour", ok: true, name: CmdModel},
		{in: "/model openrouter/meta-llama/llama-3-70b", ok: true, name: CmdModel, ref: "openrouter/meta-llama/llama-3-70b"},
		{in: "/model openai/gpt-4o@openai:backup", ok: true, name: CmdModel, ref: "openai/gpt-4o", profile: "openai:backup"},
		{in: "/model openai/gpt-4o@backup", ok: true, name: CmdModel, ref: "openai/gpt-4o", profile: "openai:backup"},
		{in: "/model openai/gpt-4o@anthropic:main", ok: true, name: CmdModel, errHas: "does not belong"},
		{in: "/model openai/gpt-4o@", ok: true, name: CmdModel, errHas: "missing profile"},
		{in: "/model default", ok: true, name: CmdModel, def: true},
		{in: "/model gpt-4o", ok: true, name: CmdModel, alias: "gpt-4o"},
		{in: "/model fast", ok: true, name: CmdModel, alias: "fast"},
		{in: "/model fast@openai:backup", ok: true, name: CmdModel, alias: "fast", profile: "openai:backup"},
		{in: "/model fast@backup", ok: true, name: CmdModel, errHas: "after a model alias, write the whole profile id: fast@<provider>:backup"},
		{in: "/model list", ok: true, name: CmdModel, list: true},
		{in: "/model LIST", ok: true, name: CmdModel, list: true},
		{in: "/models", ok: true, name: CmdModels, list: true},
		{in: "!models", ok: true, name: CmdModels, list: true},
		{in: "/models all", ok: true, name: CmdModels, errHas: "usage: /models"},
		{in: "/model -x", ok: true, name: CmdModel, errHas: `"-x" is not a model (provider/model) or a model alias; /models lists them`},
		{in: "/model a/b c/d", ok: true, name: CmdModel, errHas: "usage: /model"},
		{in: "/new", ok: true, name: CmdNew},
		{in: "/new anthropic/claude", ok: true, name: CmdNew, ref: "anthropic/claude"},
		{in: "/new claude", ok: true, name: CmdNew, alias: "claude"},
		{in: "/new a*b", ok: true, name: CmdNew, errHas: "not a model"},
		{in: "/reset", ok: true, name: CmdReset},
		{in: "/reset now", ok: true, name: CmdReset, errHas: "usage: /reset"},
		{in: "/status", ok: true, name: CmdStatus},
		{in: "/recover openai/gpt-4o", ok: true, name: CmdRecover, ref: "openai/gpt-4o"},
		{in: "/recover openai:main", ok: true, name: CmdRecover, profile: "openai:main"},
		{in: "/recover", ok: true, name: CmdRecover, errHas: "usage: /recover"},
		{in: "/recover banana", ok: true, name: CmdRecover, errHas: "neither a model"},
		{in: "/help me please", ok: true, name: CmdHelp},
		{in: "/shrug", ok: true, unknown: "shrug", errHas: "unknown command /shrug; try /model"},
		{in: "/foo-bar baz", ok: true, unknown: "foo-bar", errHas: "unknown command"},
		// Not commands.
		{in: "hello /model"},
		{in: "/usr/bin is a path"},
		{in: "/etc/passwd"},
		{in: "/ model"},
		{in: "//model"},
		{in: "/"},
		{in: "!"},
		{in: ""},
		{in: "!wow that was fast"},
		{in: "/123"},
		{in: "/modèle"},
		{in: "<@U123 /model"},
		{in: "@detour"},
		{in: "/" + strings.Repeat("a", 40)},
		{in: "/model\xff"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, ok := Parse(c.in)
			if ok != c.ok {
				t.Fatalf("Parse(%q) ok = %v, want %v (%+v)", c.in, ok, c.ok, got)
			}
			if !ok {
				return
			}
			if got.Name != c.name || got.Unknown != c.unknown || got.Ref != c.ref || got.Alias != c.alias || got.Profile != c.profile || got.Default != c.def || got.List != c.list {
				t.Fatalf("Parse(%q) = %+v", c.in, got)
			}
			if c.errHas == "" && got.Err != "" {
				t.Fatalf("unexpected Err %q", got.Err)
			}
			if !strings.Contains(got.Err, c.errHas) {
				t.Fatalf("Err = %q, want it to contain %q", got.Err, c.errHas)
			}
		})
	}
}

func TestParse_ArgsSplitOnWhitespace(t *testing.T) {
	got, ok := Parse("/model\topenai/x")
	if !ok || !reflect.DeepEqual(got.Args, []string{"openai/x"}) || got.Ref != "openai/x" {
		t.Fatalf("%+v %v", got, ok)
	}
}

func TestHelpText_NamesEveryCommand(t *testing.T) {
	h := HelpText()
	for _, n := range Names {
		if !strings.Contains(h, "/"+string(n)) {
			t.Errorf("help misses /%s", n)
		}
	}
}

func TestModelText(t *testing.T) {
	got := ModelText(ModelChoice{Selected: "openai/a", Source: "default", Active: "anthropic/b", Reason: "rate limit",
		Configured: []string{"openai/a", "anthropic/b"}, Aliases: map[string][]string{"anthropic/b": {"fast"}}})
	want := "model: openai/a (the configured default)\n" +
		"active fallback: anthropic/b answers now, falling back from openai/a because it failed: rate limit\n" +
		"choose with /model <model or alias>: openai/a, anthropic/b (alias fast)\n" +
		"/model default goes back to the configured model"
	if got != want {
		t.Errorf("ModelText =\n%s\nwant\n%s", got, want)
	}
	if got := ModelText(ModelChoice{Selected: "p/x", Source: "user", Profile: "p:main"}); got != "model: p/x (your choice: if it fails you see the failure, no other model answers instead; /model default goes back), key p:main\n/model default goes back to the configured model" {
		t.Errorf("user choice: %q", got)
	}
}

func TestModelsText(t *testing.T) {
	got := ModelsText(ModelList{
		Models:  []ModelEntry{{Ref: "demo/primary"}, {Ref: "backup/fallback-1", Aliases: []string{"fast"}}, {Ref: "backup/big", Aliases: []string{"smart", "big"}}},
		Allow:   []string{"openai/*"},
		Default: "demo/primary", Selected: "backup/big",
	})
	want := "models you can choose with /model <model or alias>:\n" +
		"  demo/primary — the configured default\n" +
		"  backup/fallback-1 (alias fast)\n" +
		"  backup/big (aliases smart, big) — selected here\n" +
		"also any model matching openai/*\n" +
		"/model default goes back to the configured model"
	if got != want {
		t.Errorf("ModelsText =\n%s\nwant\n%s", got, want)
	}
}

func TestIn(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "now"}, {0, "now"}, {time.Millisecond, "in 1 s"}, {28 * time.Second, "in 28 s"},
		{90 * time.Second, "in 2 min"}, {time.Hour, "in 1 h"}, {2*time.Hour + 5*time.Minute, "in 2 h 5 min"},
		{72 * time.Hour, "in 3 days"},
	} {
		if got := In(tc.d); got != tc.want {
			t.Errorf("In(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// covers N5: /status names the selected model and, on a fallback, the model
// answering and why, in plain words (no selection sources, no rule ids); each
// cooldown as "until 14:04:38 UTC (in 28 s)", the moment itself, as the
// all-failed error and the admin report write it (when.At); the order of the next turn; usage
// with the estimated cost when prices are configured; the context used.
func TestStatusText_N5(t *testing.T) {
	now := time.Date(2026, 3, 1, 14, 4, 10, 0, time.UTC)
	got := StatusText(StatusInfo{
		Selected: "openai/a", Source: "default", Active: "anthropic/b", FallbackReason: "out of credits",
		Profile: "anthropic:main", ProfileSource: "auto",
		Candidates: []StatusLine{
			{Model: "anthropic/b", Profile: "anthropic:main", State: "ok"},
			{Model: "openai/a", Profile: "openai:main", State: "disabled", Until: now.Add(5 * time.Hour), Reason: "out of credits", Recovery: now.Add(2 * time.Hour)},
			{Model: "openai/a", Profile: "openai:backup", State: "cooldown", Until: now.Add(28 * time.Second), Reason: "rate limit"},
		},
		Next:      []string{"anthropic/b", "openai/a"},
		LastProbe: now.Add(-time.Minute), NextProbe: now.Add(4 * time.Minute),
		PaidCalls: 3, InputTokens: 12345, OutputTokens: 20, CostUSD: 0.0021, Priced: true,
		ContextTokens: 1200, ContextWindow: 128000, HistoryTurns: 2, Compactions: 1, Now: now,
	})
	want := `selected model: openai/a (the configured default)
active fallback: anthropic/b answers now, falling back from openai/a because it failed: out of credits
openai/a gets another try on the first turn after 14:08:10 UTC (in 4 min)
next turn tries: anthropic/b, then openai/a (cooling down)
cooling down:
  openai/a (key openai:main): out of credits, switched off until 19:04:10 UTC (in 5 h); the provider said it recovers at 16:04:10 UTC
  openai/a (key openai:backup): rate limit, until 14:04:38 UTC (in 28 s)
key in use: anthropic:main (picked automatically; another key of the provider takes over if it fails)
this conversation: 3 paid call(s); 12,345 tokens in, 20 out; estimated cost $0.0021; 2 turn(s) in history, shortened 1 time(s) to fit
context: about 1,200 of 128,000 tokens (under 1%)`
	if got != want {
		t.Errorf("StatusText =\n%s\nwant\n%s", got, want)
	}
	for _, jargon := range []string{"source", "auto)", "N5", "S3", "R11"} {
		if strings.Contains(got, jargon) {
			t.Errorf("status speaks the spec's language (%q):\n%s", jargon, got)
		}
	}

	plain := StatusText(StatusInfo{Selected: "openai/a", Active: "openai/a", Source: "user", Next: []string{"openai/a"},
		Candidates: []StatusLine{{Model: "openai/a", Profile: "openai:main", State: "ok"}}, Profile: "openai:main", ProfileSource: "user",
		ContextTokens: 10, Now: now})
	want = `selected model: openai/a (your choice: if it fails you see the failure, no other model answers instead; /model default goes back), answering now
next turn tries: openai/a only
cooling down: nothing
key in use: openai:main (your choice: only this key is used)
this conversation: 0 paid call(s); 0 tokens in, 0 out; 0 turn(s) in history
context: about 10 tokens (the model's window is not configured)`
	if plain != want {
		t.Errorf("plain StatusText =\n%s\nwant\n%s", plain, want)
	}
	// The re-try is due: the next turn tries the selected model again.
	due := StatusText(StatusInfo{Selected: "a/x", Active: "b/y", Source: "agent", Agent: "support", Now: now})
	if !strings.Contains(due, "selected model: a/x (the model of agent support)\n") || !strings.Contains(due, "a/x gets another try on the next turn\n") {
		t.Errorf("due re-try:\n%s", due)
	}
}

// FuzzParse: malformed input never panics, and what Parse accepts is consistent.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"/model", "!status", "<@U1> /model a/b@a:c", "/usr/bin", "/recover x:y", "@x !new a/b", "/\xff", "<@", "/model @", "/model a/@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := Parse(s)
		if !ok {
			if c.Name != "" || c.Unknown != "" || c.Err != "" {
				t.Fatalf("rejected input left data: %+v", c)
			}
			return
		}
		if (c.Name == "") == (c.Unknown == "") {
			t.Fatalf("exactly one of Name/Unknown must be set: %+v", c)
		}
		if c.Name != "" && !Known(c.Name) {
			t.Fatalf("unknown name accepted: %q", c.Name)
		}
		if c.Err == "" && c.Ref != "" && !ValidRef(c.Ref) {
			t.Fatalf("invalid ref accepted: %q", c.Ref)
		}
		if c.Err == "" && c.Profile != "" && !ValidProfileID(c.Profile) {
			t.Fatalf("invalid profile accepted: %q", c.Profile)
		}
		if !utf8.ValidString(string(c.Name)) {
			t.Fatal("invalid utf8 name")
		}
	})
}

// /model arguments are bounded and plain: no 5 KB names, no control or bidi
// characters that would show in /status as something else.
func TestParse_ModelNamesArePlain(t *testing.T) {
	for _, arg := range []string{
		"openai/" + strings.Repeat("x", 5000),
		"openai/gpt\u202e4o",
		"openai/gpt\x1b[31m",
		"openai/gpt\u200b4o",
		"openai:main\u2066",
	} {
		c, ok := Parse("/model " + arg)
		if !ok || c.Err == "" || c.Ref != "" {
			t.Errorf("/model %q accepted: %+v", arg, c)
		}
	}
	if c, _ := Parse("/model openai/gpt-4o-mini@openai:main"); c.Err != "" || c.Ref != "openai/gpt-4o-mini" {
		t.Errorf("a plain ref refused: %+v", c)
	}
}

func TestMatchPattern(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"openai/*", "openai/gpt-4o", true},
		{"openrouter/*", "openrouter/meta-llama/llama-3-70b", true},
		{"openai/gpt-4?", "openai/gpt-4o", true},
		{"openai/*-mini", "openai/gpt-4o-mini", true},
		{"openai/*-mini", "openai/gpt-4o", false},
		{"openai/*", "anthropic/x", false},
		{"*", "", true},
		{"a*b*c", "aXbYbZc", true},
	} {
		if got := MatchPattern(tc.p, tc.s); got != tc.want {
			t.Errorf("MatchPattern(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
}

// covers N5, V3: while every model of the next turn cools down, /status says no
// model answers now, and when the first one can again (the moment the
// all-failed error names), on the selected model and on a fallback alike.
func TestStatusText_N5_NothingAnswersNow(t *testing.T) {
	now := time.Date(2026, 3, 1, 14, 0, 7, 0, time.UTC)
	back := now.Add(97 * time.Second)
	cooling := []StatusLine{
		{Model: "a/x", Profile: "a:main", State: "cooldown", Until: back, Reason: "rate limit"},
		{Model: "b/y", Profile: "b:main", State: "cooldown", Until: back.Add(time.Minute), Reason: "rate limit"},
	}
	for _, tc := range []struct {
		name string
		info StatusInfo
		want []string
	}{
		{"selected", StatusInfo{Selected: "a/x", Candidates: cooling, Next: []string{"a/x", "b/y"},
			Back: map[string]time.Time{"a/x": back, "b/y": back.Add(time.Minute)}, Now: now},
			[]string{"selected model: a/x (the configured default)\nno model can answer now: every one is cooling down; the first is usable again at 14:01:44 UTC (in 2 min)\n"}},
		{"fallback", StatusInfo{Selected: "a/x", Active: "b/y", FallbackReason: "rate limit", Candidates: cooling, Next: []string{"b/y", "a/x"},
			Back: map[string]time.Time{"a/x": back, "b/y": back.Add(time.Minute)}, Now: now},
			[]string{"active fallback: b/y, falling back from a/x because it failed: rate limit\n", "no model can answer now: every one is cooling down; the first is usable again at 14:01:44 UTC (in 2 min)\n"}},
		// Keys usable, but the engine waits (a provider that is down, E1): Back alone says so.
		{"provider down", StatusInfo{Selected: "a/x", Candidates: []StatusLine{{Model: "a/x", State: "ok"}}, Next: []string{"a/x"},
			Back: map[string]time.Time{"a/x": back}, Now: now},
			[]string{"no model can answer now: every one is cooling down; the first is usable again at 14:01:44 UTC (in 2 min)\n", "next turn tries: a/x (cooling down) only"}},
	} {
		got := StatusText(tc.info)
		if strings.Contains(got, "answering now") || strings.Contains(got, "answers now") {
			t.Errorf("%s: /status says a model answers now:\n%s", tc.name, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: /status lacks %q:\n%s", tc.name, w, got)
			}
		}
	}
	// The selected model cools down, another is usable: neither "answering
	// now" of the selected model nor "no model can answer".
	got := StatusText(StatusInfo{Selected: "a/x", Candidates: []StatusLine{cooling[0], {Model: "b/y", State: "ok"}},
		Next: []string{"a/x", "b/y"}, Back: map[string]time.Time{"a/x": back}, Now: now})
	if strings.Contains(got, "answering now") || strings.Contains(got, "no model can answer") || !strings.Contains(got, "next turn tries: a/x (cooling down), then b/y\n") {
		t.Errorf("with b/y usable:\n%s", got)
	}
	// On a fallback that cools down while another model is usable: the
	// fallback does not "answer now" either.
	got = StatusText(StatusInfo{Selected: "a/x", Active: "b/y", FallbackReason: "rate limit",
		Candidates: []StatusLine{cooling[0], cooling[1], {Model: "c/z", State: "ok"}},
		Next:       []string{"b/y", "c/z", "a/x"}, Back: map[string]time.Time{"a/x": back, "b/y": back.Add(time.Minute)}, Now: now})
	if strings.Contains(got, "answers now") || strings.Contains(got, "no model can answer") ||
		!strings.Contains(got, "active fallback: b/y, falling back from a/x because it failed: rate limit\n") {
		t.Errorf("with the fallback cooling down and c/z usable:\n%s", got)
	}
	// The selected model usable: it answers now.
	got = StatusText(StatusInfo{Selected: "b/y", Candidates: []StatusLine{cooling[0], {Model: "b/y", State: "ok"}},
		Next: []string{"b/y", "a/x"}, Back: map[string]time.Time{"a/x": back}, Now: now})
	if !strings.Contains(got, "selected model: b/y (the configured default), answering now\n") {
		t.Errorf("with b/y selected and usable:\n%s", got)
	}
}
