//go:build cgo

package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// choiceConfig lets people choose, beside the chain (p1/alpha, p2/beta,
// p3/gamma): p3/delta (selectable, alias smart), p2/beta also by its alias fast,
// and any p1/allowed-* model; p1/facts only holds facts.
func choiceConfig(c *Config, _ *harness) {
	c.Models = map[failover.ModelRef]ModelInfo{
		mFallback:  {Aliases: []string{"fast"}},
		"p3/delta": {Selectable: true, Aliases: []string{"smart"}},
		"p1/facts": {ContextWindow: 1000},
	}
	c.Allow = []string{"p1/allowed-*"}
}

// /model takes a model people may choose or an alias, and refuses anything else
// with the nearest name (S4: the choice stays exact).
func TestRouter_S4_ModelChoicesAndAliases(t *testing.T) {
	h := newHarness(t, testdb.SQLite, choiceConfig)
	const more = " (/models lists the models you can choose)"
	for _, tc := range []struct {
		in, kind, text, model string
	}{
		{"/model fast", "reply", "model set to p2/beta (exact: if it fails you will see the failure; /model default goes back)", "p2/beta"},
		{"/model SMART", "reply", "model set to p3/delta (exact: if it fails you will see the failure; /model default goes back)", "p3/delta"},
		{"/model smart@p3:main", "reply", "model set to p3/delta with profile p3:main (exact: if it fails you will see the failure; /model default goes back)", "p3/delta"},
		{"/model p1/allowed-x", "reply", "model set to p1/allowed-x (exact: if it fails you will see the failure; /model default goes back)", "p1/allowed-x"},
		{"/model p3/delat", "error", `"p3/delat" is not one of the models you can choose here; did you mean p3/delta?` + more, ""},
		{"/model p2/bet", "error", `"p2/bet" is not one of the models you can choose here; did you mean p2/beta?` + more, ""},
		{"/model fats", "error", `unknown model or alias "fats"; did you mean fast?` + more, ""},
		{"/model gamma", "error", `unknown model or alias "gamma"; did you mean p3/gamma?` + more, ""},
		{"/model p1/facts", "error", `"p1/facts" is not one of the models you can choose here` + more, ""},
		{"/model nope/x", "error", `provider "nope" is not configured` + more, ""},
		{"/model smart@p1:main", "error", `unknown profile: "p1:main" is not a configured profile of p3`, ""},
		{"/new smart", "reply", "new conversation started on p3/delta", "p3/delta"},
		{"/new p2/beat", "error", `"p2/beat" is not one of the models you can choose here; did you mean p2/beta?` + more, ""},
	} {
		_ = h.say(key1, "/reset")
		out := expect(t, h.say(key1, tc.in), tc.kind)
		if out[0].Text != tc.text {
			t.Errorf("%s: %q\nwant %q", tc.in, out[0].Text, tc.text)
		}
		if tc.model != "" {
			if e := h.entry(key1); string(e.override()) != tc.model || e.ModelOverrideSource != "user" {
				t.Errorf("%s: stored %s (%s), want %s as the user's choice", tc.in, e.override(), e.ModelOverrideSource, tc.model)
			}
		}
	}
	// A pasted page is not echoed back whole.
	long := "p2/" + strings.Repeat("x", 5000)
	if out := expect(t, h.say(key1, "/model "+long), "error"); len(out[0].Text) > 300 || !strings.Contains(out[0].Text, "xxx…\" is not a model") {
		t.Errorf("long name: %d bytes: %.200q", len(out[0].Text), out[0].Text)
	}
	// The programmatic entry point takes aliases and refuses the same names.
	if err := h.r.SetModel(context.Background(), key1, "fast", ""); err != nil {
		t.Fatal(err)
	}
	if err := h.r.SetModel(context.Background(), key1, "p2/gpt-4o-mimi", ""); !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("SetModel of an unlisted model: %v", err)
	}
	if err := h.r.NewSession(context.Background(), key1, "p9/x"); !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("NewSession of an unknown provider: %v", err)
	}
}

// /models and /model list show the models people can choose, with aliases.
func TestRouter_ModelsList(t *testing.T) {
	h := newHarness(t, testdb.SQLite, choiceConfig)
	want := "models you can choose with /model <model or alias>:\n" +
		"  p1/alpha — the configured default\n" +
		"  p2/beta (alias fast)\n" +
		"  p3/gamma\n" +
		"  p3/delta (alias smart)\n" +
		"also any model matching p1/allowed-*\n" +
		"/model default goes back to the configured model"
	for _, cmd := range []string{"/models", "/model list", "!models"} {
		if out := expect(t, h.say(key1, cmd), "reply"); out[0].Text != want {
			t.Errorf("%s:\n%s\nwant\n%s", cmd, out[0].Text, want)
		}
	}
	expect(t, h.say(key1, "/model smart"), "reply")
	if out := expect(t, h.say(key1, "/models"), "reply"); !strings.Contains(out[0].Text, "  p3/delta (alias smart) — selected here\n") {
		t.Errorf("the session's choice is not marked:\n%s", out[0].Text)
	}
	// L4: the picker offers exactly the models people can choose.
	out := expect(t, h.say(key1, "/model"), "reply")
	var picks []string
	for _, c := range out[0].Choices {
		picks = append(picks, c.Label)
	}
	if got := strings.Join(picks, ","); got != "p1/alpha,p2/beta,p3/gamma,p3/delta,default" {
		t.Errorf("picker = %s", got)
	}
	if !strings.Contains(out[0].Text, "choose with /model <model or alias>: p1/alpha, p2/beta (alias fast), p3/gamma, p3/delta (alias smart)") {
		t.Errorf("/model:\n%s", out[0].Text)
	}
}

// A channel default (a slash command typed in the channel) takes aliases too.
func TestRouter_S4_ChannelDefaultByAlias(t *testing.T) {
	h := newHarness(t, testdb.SQLite, choiceConfig)
	h.sayAs(adapters.Inbound{Channel: "test", SessionKey: "test:T1:C1", User: "test:u1", Text: "/model fast",
		ReplyTo: "slash", Native: true, DefaultsFor: "new threads in #general", Admin: true})
	out := expect(t, h.rec.take(), "reply")
	if !strings.HasPrefix(out[0].Text, "new threads in #general will use p2/beta") {
		t.Fatalf("answer = %q", out[0].Text)
	}
}

// /status estimates the session's cost from the configured prices (B1) and the
// context the next turn sends against the answering model's window. covers B1, B7, N5
func TestRouter_N5_StatusCostAndContext(t *testing.T) {
	h := newHarness(t, testdb.SQLite, func(c *Config, _ *harness) {
		c.Models = map[failover.ModelRef]ModelInfo{mPrimary: {ContextWindow: 1000, Price: failover.Price{InPerMTok: 1000, OutPerMTok: 2000}}}
	})
	expect(t, h.say(key1, "hello there"), "reply")
	e := h.entry(key1)
	cost := (float64(e.InputTokens)*1000 + float64(e.OutputTokens)*2000) / 1e6
	if e.CostUSD < cost*0.999 || e.CostUSD > cost*1.001 || cost == 0 {
		t.Fatalf("stored cost %v, want %v", e.CostUSD, cost)
	}
	st := expect(t, h.say(key1, "/status"), "reply")[0].Text
	for _, want := range []string{
		fmt.Sprintf("this conversation: 1 paid call(s); %d tokens in, %d out; estimated cost $%.4f; 1 turn(s) in history\n", e.InputTokens, e.OutputTokens, cost),
		"context: about 22 of 1,000 tokens (2%)",
		"selected model: p1/alpha (the configured default), answering now\n",
		"next turn tries: p1/alpha, then p2/beta, then p3/gamma\n",
		"cooling down: nothing\n",
	} {
		if !strings.Contains(st, want) {
			t.Errorf("/status misses %q:\n%s", want, st)
		}
	}
	if strings.Contains(st, "source") {
		t.Errorf("/status speaks of sources:\n%s", st)
	}
}
