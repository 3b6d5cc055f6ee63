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
		profile string
		def     bool
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
		{in: "/model gpt-4o", ok: true, name: CmdModel, errHas: "not a model"},
		{in: "/model a/b c/d", ok: true, name: CmdModel, errHas: "usage: /model"},
		{in: "/new", ok: true, name: CmdNew},
		{in: "/new anthropic/claude", ok: true, name: CmdNew, ref: "anthropic/claude"},
		{in: "/new claude", ok: true, name: CmdNew, errHas: "not a model"},
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
			if got.Name != c.name || got.Unknown != c.unknown || got.Ref != c.ref || got.Profile != c.profile || got.Default != c.def {
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
	got := ModelText(ModelChoice{Selected: "openai/a", Source: "default", Active: "anthropic/b", Configured: []string{"openai/a", "anthropic/b"}})
	for _, want := range []string{"model: openai/a (source default)", "active fallback: anthropic/b (source auto)", "openai/a, anthropic/b", "/model default"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in %q", want, got)
		}
	}
}

// covers N5
func TestStatusText_N5(t *testing.T) {
	now := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	got := StatusText(StatusInfo{
		Selected: "openai/a", Source: "default", Active: "anthropic/b", FallbackReason: "billing",
		Profile: "anthropic:main", ProfileSource: "auto",
		Candidates: []StatusLine{
			{Model: "anthropic/b", Profile: "anthropic:main", State: "ok"},
			{Model: "openai/a", Profile: "openai:main", State: "disabled", Until: now.Add(5 * time.Hour), Reason: "billing", Recovery: now.Add(2 * time.Hour)},
		},
		LastProbe: now.Add(-time.Minute), NextProbe: now.Add(4 * time.Minute),
		PaidCalls: 3, InputTokens: 100, OutputTokens: 20, Now: now,
	})
	for _, want := range []string{
		"selected model: openai/a (source default)",
		"active fallback: anthropic/b (source auto; reason: billing)",
		"profile: anthropic:main (auto)",
		"anthropic/b [anthropic:main]: ok",
		"openai/a [openai:main]: disabled until 19:00:00 UTC (billing), provider says recovery at 16:00:00 UTC",
		"primary probe: last 13:59:00 UTC, next 14:04:00 UTC",
		"3 paid calls, 100 input + 20 output tokens",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status missing %q:\n%s", want, got)
		}
	}
	// Without a fallback there is no active-fallback line.
	plain := StatusText(StatusInfo{Selected: "openai/a", Active: "openai/a", Source: "default", Now: now})
	if strings.Contains(plain, "active fallback") {
		t.Errorf("plain status shows a fallback:\n%s", plain)
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
