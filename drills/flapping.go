package drills

import (
	"fmt"
	"strings"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
)

// The flapping drill (A1-A3): providers fail in short, frequent flaps, far more
// often than in long outages. Each step is one phase of a seeded script: the
// drill clock moves on by the phase's length (3-6 s), the chain's models fail
// or heal as the phase says (one of them, or all), and flapSessions sessions
// send a message at once.
const (
	flapPhases   = 48
	flapSessions = 4
	flapSeed     = 2026
)

// flapModes are how a model fails in a phase: fast failures only, so the drill
// stays short with real timeouts (stalls are in the flapping soak,
// BenchmarkFlapping, and in stall-storm).
var flapModes = []fakeprovider.Rule{
	{Mode: fakeprovider.ModeRateLimit, RetryAfter: time.Second},
	{Mode: fakeprovider.ModeServer500},
	{Mode: fakeprovider.ModeOverloaded529},
}

// flapScript is the drill's phases over chain positions "0", "1", "2".
func flapScript() []fakeprovider.Phase {
	return fakeprovider.Flapping(fakeprovider.FlapOptions{
		Providers: []string{"0", "1", "2"}, Phases: flapPhases,
		Min: 3 * time.Second, Max: 6 * time.Second, Down: flapModes, Seed: flapSeed,
	})
}

func flapping() Scenario {
	phases := flapScript()
	steps := make([]Step, len(phases))
	down := make([][]int, len(phases)) // chain positions failing in each step
	for i, p := range phases {
		faults := []Fault{}
		for _, r := range p.Rules {
			var pos int
			fmt.Sscanf(r.Provider, "%d", &pos)
			faults = append(faults, Fault{On: OnChain(pos), Mode: r.Mode, RetryAfter: r.RetryAfter})
			down[i] = append(down[i], pos)
		}
		steps[i] = Step{Advance: phases[max(i-1, 0)].For, Faults: faults, Sessions: flapSessions}
		if i == 0 {
			steps[i].Advance = 0
		}
	}
	return Scenario{
		Name: "flapping",
		Doc: fmt.Sprintf("the chain's models flap every 3-6 s (429, 500, 529; one model or all at once), %d phases × %d sessions: answered while a candidate is healthy, paid calls per turn, refusals while all are down (A1-A3)",
			len(phases), flapSessions),
		Steps: steps,
		Checks: []Check{
			flapAnswered(down, 0.98),
			flapCallsPerTurn(2.5),
			flapAllDownTold(down),
		},
	}
}

// flapTurns walks the answers of a flapping report with each session's chain
// (K3: a session on a fallback keeps the rest of the chain after it and the
// primary last, K4; S3 puts the primary first again when its probe is due) and
// reports, per answer, whether a model of that chain was healthy in its step.
func flapTurns(r *Report, b Budgets, down [][]int, each func(t *Turn, a Answer, healthy bool)) {
	chain := dedupe(append([]string{r.Primary}, r.Fallbacks...))
	pos := map[string]int{}
	for i, ref := range chain {
		pos[ref] = i
	}
	type sess struct {
		on    int           // chain position of the model that answered last
		probe time.Duration // drill time of its next S3 probe of the primary
	}
	state := map[string]*sess{}
	now := time.Duration(0)
	for i := range r.Turns {
		t := &r.Turns[i]
		now += t.Advanced
		failing := map[int]bool{}
		if t.Step-1 < len(down) {
			for _, p := range down[t.Step-1] {
				failing[p] = true
			}
		}
		for _, a := range t.Answers {
			s := state[a.Session]
			if s == nil {
				s = &sess{}
				state[a.Session] = s
			}
			cands := []int{0}
			if s.on > 0 && (b.PrimaryProbeInterval <= 0 || now < s.probe) {
				cands = nil
				for j := s.on; j < len(chain); j++ {
					cands = append(cands, j) // K3
				}
				cands = append(cands, 0) // K4
			} else {
				for j := 1; j < len(chain); j++ {
					cands = append(cands, j)
				}
			}
			healthy := false
			for _, c := range cands {
				healthy = healthy || !failing[c]
			}
			each(t, a, healthy)
			if a.Kind == "reply" {
				p := pos[a.Model]
				if p > 0 && s.on == 0 {
					s.probe = now + b.PrimaryProbeInterval // the fallback begins: S3's first probe one interval later
				} else if p > 0 && now >= s.probe {
					s.probe = now + b.PrimaryProbeInterval
				}
				s.on = p
			}
		}
	}
}

// flapAnswered: the share of messages answered among those sent while a model
// of the session's chain was healthy.
func flapAnswered(down [][]int, want float64) Check {
	return Check{fmt.Sprintf("answered at least %.0f%% of the messages sent while a candidate was healthy (A1)", 100*want),
		func(r *Report, b Budgets) (bool, string) {
			n, ok := 0, 0
			var missed []string
			flapTurns(r, b, down, func(t *Turn, a Answer, healthy bool) {
				if !healthy {
					return
				}
				n++
				if a.Kind == "reply" {
					ok++
				} else if len(missed) < 3 {
					missed = append(missed, fmt.Sprintf("step %d %s: %s", t.Step, a.Session, clip(a.Text, 100)))
				}
			})
			if n == 0 {
				return false, "no message was sent while a candidate was healthy"
			}
			share := float64(ok) / float64(n)
			detail := fmt.Sprintf("%d of %d (%.1f%%)", ok, n, 100*share)
			if len(missed) > 0 {
				detail += "; e.g. " + strings.Join(missed, " | ")
			}
			return share >= want, detail
		}}
}

// flapCallsPerTurn: paid calls per message, over the whole drill.
func flapCallsPerTurn(limit float64) Check {
	return Check{fmt.Sprintf("at most %.1f paid calls per message", limit), func(r *Report, _ Budgets) (bool, string) {
		msgs := 0
		for _, t := range r.Turns {
			msgs += len(t.Answers)
		}
		if msgs == 0 {
			return false, "no message"
		}
		per := float64(len(r.Calls)) / float64(msgs)
		return per <= limit, fmt.Sprintf("%d calls for %d messages (%.2f each)", len(r.Calls), msgs, per)
	}}
}

// flapAllDownTold: while every model fails, each message gets an answer (one
// that came as a phase healed) or a clear error within the probe wait and the
// calls that end it (one idle timeout of margin).
func flapAllDownTold(down [][]int) Check {
	return Check{"messages sent while every model failed are told why within probe_wait_seconds (A1)", func(r *Report, b Budgets) (bool, string) {
		chain := len(dedupe(append([]string{r.Primary}, r.Fallbacks...)))
		wait := b.ProbeWait
		if r.Fast {
			wait = scale(wait) // the wait in real time: --fast shortens the drill clock's sleeps
		}
		limit := wait + max(b.IdleTimeout, time.Second)
		n, slowest := 0, time.Duration(0)
		for _, t := range r.Turns {
			if t.Step-1 >= len(down) || len(down[t.Step-1]) < chain {
				continue
			}
			for _, a := range t.Answers {
				n++
				if a.Kind == "none" || (a.Kind == "error" && strings.TrimSpace(a.Text) == "") {
					return false, fmt.Sprintf("step %d %s got %s", t.Step, a.Session, a.Kind)
				}
				if a.Kind == "error" {
					slowest = max(slowest, a.After)
				}
			}
		}
		if n == 0 {
			return false, "no all-down phase ran"
		}
		return slowest <= limit, fmt.Sprintf("%d message(s), slowest refusal %s, limit %s", n, round(slowest), round(limit))
	}}
}

// redirectingEdge: the primary's edge answers with what detour refuses, one
// kind at a time: a stream line over its cap, an unrequested gzip body, a
// redirect (A2, T1, T2). Each time a new session's turn, sent alone before the
// others' (whose failures would otherwise mark the model first, R7), falls back
// at once and its notice names the refusal; then two more new sessions find the primary
// cooling down: at most one call between them (R11's probe of a cooling
// primary), where a primary that was not cooling would get one per key each.
func redirectingEdge() Scenario {
	var steps []Step
	var checks []Check
	for i, c := range []struct {
		mode fakeprovider.Mode
		says string
	}{
		// One chunk past the stream line cap, first: the sessions that come
		// later re-try the primary (S3), and megabytes each would load a small
		// machine more than the drill means to.
		{fakeprovider.ModeHugeChunk, "response refused by detour: stream line longer than"},
		{fakeprovider.ModeGzipBomb, "response refused by detour: compressed body"},
		{fakeprovider.ModeRedirectOtherPort, "response refused by detour: redirect to http://127.0.0.1:"},
	} {
		first := len(steps) + 1
		adv := time.Duration(0)
		if i > 0 {
			adv = 70 * time.Second // every cooldown (A3: at most 60 s) has ended
		}
		steps = append(steps,
			Step{Advance: adv, Faults: []Fault{{On: OnPrimary, Mode: c.mode}}, Sessions: 1 + 3*i, NewestFirst: true},
			Step{Sessions: 3 + 3*i})
		checks = append(checks,
			answeredBy(first, fallbackModel),
			primaryCalls(first, n(1), func(r *Report, b Budgets) int { return (1 + 3*i) * primaryKeys(r, b) },
				fmt.Sprintf("%s: the primary was tried (A2)", c.mode)),
			notices(first, 1, 1, c.says, "the new session's notice names the refusal (A2, N1)"),
			answeredBy(first+1, fallbackModel),
			primaryCalls(first+1, n(0), n(1), "the primary cools down: two new sessions call it at most once (A2, A3, R11)"),
		)
	}
	return Scenario{
		Name:  "redirecting-edge",
		Doc:   "the primary's edge answers an oversized stream line, then a gzip body nobody asked for, then a redirect: every turn falls back, the primary cools down, the notice names the refusal (A2)",
		Steps: steps, Checks: checks,
	}
}
