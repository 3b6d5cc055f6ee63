package drills

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
)

// flapReport is a flapping report that answers every message sent while a
// model was healthy and refuses the others, with two calls per message.
func flapReport() Report {
	script := flapScript()
	r := Report{Scenario: "flapping", Primary: "a/p", Fallbacks: []string{"b/f1", "c/f2"}, Profiles: map[string]int{"a": 1, "b": 1, "c": 1}, Notices: "all"}
	for i, p := range script {
		t := Turn{Step: i + 1, Sessions: flapSessions}
		if i > 0 {
			t.Advanced = script[i-1].For
		}
		for s := 1; s <= flapSessions; s++ {
			a := Answer{Session: sessionKey(s), Kind: "reply", Model: "a/p", Text: "ok", After: 20 * time.Millisecond}
			if len(p.Rules) == 3 {
				a = Answer{Session: sessionKey(s), Kind: "error", Text: "all models failed", After: 3 * time.Second}
			}
			t.Answers = append(t.Answers, a)
			r.Calls = append(r.Calls, Call{Step: i + 1, Provider: "a", Model: "p"}, Call{Step: i + 1, Provider: "b", Model: "f1"})
		}
		t.Calls = 2 * flapSessions
		r.Turns = append(r.Turns, t)
	}
	return r
}

// covers A1, A3: the flapping drill's verdict is a pure function of the report:
// the answered share counts only messages sent while a model of the session's
// chain was healthy, and the calls per message and the all-down refusals are
// bounded.
func TestJudge_A1_Flapping(t *testing.T) {
	b := Budgets{MaxPaidPerTurn: 8, MaxPaidPerMinute: 100000, ProbeWait: 10 * time.Second, IdleTimeout: time.Second, PrimaryProbeInterval: 5 * time.Minute}
	script := flapScript()
	refuse := func(r *Report, n int) { // refuse n messages sent while the primary was healthy
		for i := range r.Turns {
			if len(script[i].Rules) == 0 {
				for j := range r.Turns[i].Answers {
					if n > 0 {
						r.Turns[i].Answers[j] = Answer{Session: sessionKey(j + 1), Kind: "error", Text: "all models failed"}
						n--
					}
				}
			}
		}
	}
	tests := []struct {
		name    string
		edit    func(r *Report)
		failing string
	}{
		{"every healthy message answered", func(*Report) {}, ""},
		{"one refusal in a hundred passes", func(r *Report) { refuse(r, 1) }, ""},
		{"refusals while a model is healthy", func(r *Report) { refuse(r, 12) }, "answered at least 98%"},
		{"three calls per message", func(r *Report) {
			for i := range r.Turns {
				for range flapSessions {
					r.Calls = append(r.Calls, Call{Step: i + 1, Provider: "c", Model: "f2"})
				}
			}
		}, "paid calls per message"},
		{"an all-down refusal after the probe wait", func(r *Report) {
			for i := range r.Turns {
				if len(script[i].Rules) == 3 {
					r.Turns[i].Answers[0].After = 30 * time.Second
					return
				}
			}
		}, "within probe_wait_seconds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := flapReport()
			tc.edit(&r)
			v := Judge(&r, b)
			if tc.failing == "" {
				if !v.Pass {
					t.Fatalf("failed: %v", failedChecks(v))
				}
				return
			}
			bad := strings.Join(failedChecks(v), "\n")
			if v.Pass || !strings.Contains(bad, tc.failing) {
				t.Fatalf("want a failure of %q, got %q", tc.failing, bad)
			}
		})
	}
	// K3: a session answered by the last fallback has only it and the primary
	// as candidates: a message while both fail is not counted as refused with a
	// candidate healthy.
	var down [][]int
	for _, p := range script {
		var d []int
		for _, r := range p.Rules {
			var pos int
			fmt.Sscanf(r.Provider, "%d", &pos)
			d = append(d, pos)
		}
		down = append(down, d)
	}
	r := Report{Primary: "a/p", Fallbacks: []string{"b/f1", "c/f2"},
		Turns: []Turn{{Step: 1, Answers: []Answer{{Session: "s", Kind: "reply", Model: "c/f2"}}}, {Step: 2, Advanced: time.Second, Answers: []Answer{{Session: "s", Kind: "error"}}}}}
	var got []bool
	flapTurns(&r, b, [][]int{nil, {0, 2}}, func(_ *Turn, _ Answer, healthy bool) { got = append(got, healthy) })
	if fmt.Sprint(got) != "[true false]" {
		t.Fatalf("healthy per message %v, want [true false] (K3: b is not the session's candidate)", got)
	}
	if len(down) != flapPhases {
		t.Fatalf("%d phases", len(down))
	}
}

// covers A2: the redirecting-edge verdict: each kind of refused response falls
// back, names the refusal in the notice, and the primary cools down.
func TestJudge_A2_RedirectingEdge(t *testing.T) {
	sc, ok := Lookup("redirecting-edge")
	if !ok {
		t.Fatal("no redirecting-edge drill")
	}
	words := []string{"stream line longer than 2162688 bytes (twice limits.max_answer_bytes plus 64 KiB)", "compressed body (Content-Encoding \"gzip\", HTTP 200), which was not asked for", "redirect to http://127.0.0.1:1/… (HTTP 307, never followed)"}
	build := func() Report {
		r := Report{Scenario: "redirecting-edge", Primary: "a/p", Fallbacks: []string{"b/f1"}, Profiles: map[string]int{"a": 2, "b": 1}, Notices: "all"}
		for i, st := range sc.Steps {
			t := Turn{Step: i + 1, Sessions: st.Sessions}
			for s := 1; s <= st.Sessions; s++ {
				t.Answers = append(t.Answers, Answer{Session: sessionKey(s), Kind: "reply", Model: "b/f1", Text: "ok"})
			}
			if st.Faults != nil {
				t.Notices = []string{"↪️ model fallback: b/f1 (selected a/p; response refused by detour: " + words[i/2] + ")"}
				r.Calls = append(r.Calls, calls(i+1, "a/p", "a:k1", 1, 0)...)
				r.Calls = append(r.Calls, calls(i+1, "a/p", "a:k2", 1, 0)...)
			}
			r.Calls = append(r.Calls, calls(i+1, "b/f1", "b:k", st.Sessions, 0)...)
			r.Turns = append(r.Turns, t)
		}
		for _, c := range r.Calls {
			r.Turns[c.Step-1].Calls++
		}
		return r
	}
	if r := build(); !Judge(&r, testBudgets).Pass {
		t.Fatalf("failed: %v", failedChecks(Judge(&r, testBudgets)))
	}
	r := build()
	r.Calls = append(r.Calls, calls(2, "a/p", "a:k1", 2, 0)...) // the primary called while it should cool down
	if v := Judge(&r, testBudgets); v.Pass || !strings.Contains(strings.Join(failedChecks(v), "\n"), "cools down") {
		t.Fatalf("a primary called twice while cooling passed: %v", failedChecks(v))
	}
	r = build()
	r.Turns[2].Notices = []string{"↪️ model fallback: b/f1 (selected a/p; invalid request)"}
	if v := Judge(&r, testBudgets); v.Pass || !strings.Contains(strings.Join(failedChecks(v), "\n"), "names the refusal") {
		t.Fatalf("a notice saying invalid request passed: %v", failedChecks(v))
	}
}

// OnChain resolves against the configured chain; past its end it is nothing.
func TestRules_OnChain(t *testing.T) {
	got := rules([]Fault{{On: OnChain(1), Mode: fakeprovider.ModeServer500}, {On: OnChain(7), Mode: fakeprovider.ModeServer500}}, "a/p", []string{"b/f1", "c/f2"})
	if len(got) != 1 || got[0].Provider != "b" || got[0].Model != "f1" {
		t.Fatalf("rules %+v", got)
	}
}
