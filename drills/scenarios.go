package drills

import (
	"fmt"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
)

// stallWords are what a user told about stalls may read.
var stallWords = []string{"stall", "timed out", "timeout", "idle", "took too long"}

// atOnce: an answer that did not wait on a reset: within one idle timeout (at
// least a second, for slow machines in --fast mode).
func atOnce(b Budgets) time.Duration { return max(b.IdleTimeout, time.Second) }

// table is every scenario, in the order `--scenario all` runs them.
var table = []Scenario{
	{
		Name: "no-fault", Doc: "every model healthy: one turn, one paid call (the baseline)",
		OpenClaw: "no-fault turn: 19-21 s, 1 GB memory",
		Steps:    []Step{{}},
		Checks: []Check{
			answeredBy(1, primaryModel),
			paidCalls(1, n(1), n(1), "one paid call"),
		},
	},
	{
		Name: "stall-storm", Doc: "every model streams one chunk then stalls: the idle-timeout breaker stops the turn (R8)",
		OpenClaw: "every model stalling: 19 calls, 290 s",
		Steps:    []Step{{Faults: []Fault{{On: OnEvery, Mode: fakeprovider.ModeStallAfterFirstChunk}}}},
		Checks: []Check{
			paidCalls(1, n(1), breakerTrip, "at most breaker_trip paid calls"),
			toldWhy(1, stallWords...),
		},
	},
	{
		Name: "hang-before-headers", Doc: "the primary never sends headers; healthy fallbacks must answer the same turn",
		OpenClaw: "A hanging: 5 calls, then its breaker stopped the run without trying healthy B and C",
		Steps:    []Step{{Faults: []Fault{{On: OnPrimary, Mode: fakeprovider.ModeHangBeforeHeaders}}}},
		Checks: []Check{
			answeredBy(1, fallbackModel),
			primaryCalls(1, n(1), switchThreshold, "the primary is left after at most timeout_switch_threshold calls"),
			notices(1, 1, 1, "", "the user is told about the fallback (N1)"),
		},
	},
	{
		Name: "stealth-billing", Doc: "the primary only ever times out (a silent quota proxy): switch after 3 timeouts, stay off it until the probe",
		Steps: []Step{
			{Faults: []Fault{{On: OnPrimary, Mode: fakeprovider.ModeHangBeforeHeaders}}},
			{},
			{},
			{AdvanceProbe: true},
		},
		Checks: []Check{
			answeredBy(1, fallbackModel),
			primaryCalls(1, n(1), switchThreshold, "switch after at most timeout_switch_threshold consecutive timeouts (R7)"),
			answeredBy(2, fallbackModel),
			primaryCalls(2, n(0), n(0), "no call to the primary before the probe"),
			answeredBy(3, fallbackModel),
			primaryCalls(3, n(0), n(0), "no call to the primary before the probe"),
			notices(2, 0, 0, "", "nothing repeated while on the fallback (N3)"),
			primaryCalls(4, n(1), switchThreshold, "after primary_probe_interval the primary is probed (S3)"),
			answeredBy(4, fallbackModel),
		},
	},
	{
		Name: "quota-exhausted", Doc: "the primary answers 429 insufficient_quota with the reset time in the text: park it, fall back at once",
		OpenClaw: "'1-week quota exhausted' 429: read as a rate limit, 12 calls, 144 s",
		Steps: []Step{
			{Faults: []Fault{{On: OnPrimary, Mode: fakeprovider.ModeQuotaResetText, RetryAfter: 5 * 24 * time.Hour}}},
			{},
		},
		Checks: []Check{
			answeredBy(1, fallbackModel),
			answeredWithin(1, "one idle timeout (no waiting on the reset)", atOnce),
			primaryCalls(1, n(1), primaryKeys, "each key of the primary tried at most once"),
			answeredBy(2, fallbackModel),
			primaryCalls(2, n(0), n(0), "the primary is parked until its reset (B6)"),
		},
	},
	{
		Name: "long-reset-429", Doc: "the primary answers 429 with Retry-After two days away: fallback at once, primary untouched until the reset",
		Steps: []Step{
			{Faults: []Fault{{On: OnPrimary, Mode: fakeprovider.ModeRateLimit, RetryAfter: 48 * time.Hour}}},
			{},
			{Advance: 24 * time.Hour, AdvanceProbe: true},
			{Advance: 25 * time.Hour, Faults: []Fault{}},
		},
		Checks: []Check{
			answeredBy(1, fallbackModel),
			answeredWithin(1, "one idle timeout (no waiting on Retry-After)", atOnce),
			primaryCalls(1, n(1), primaryKeys, "each key of the primary tried at most once"),
			primaryCalls(2, n(0), n(0), "the primary is not called before its reset"),
			primaryCalls(3, n(0), n(0), "a day later (probe due) the primary is still not called before its reset"),
			answeredBy(3, fallbackModel),
			answeredBy(4, primaryModel),
			notices(4, 1, 1, "cleared", "after the reset the primary is back and the user told (N2)"),
		},
	},
	{
		Name: "overload-burst", Doc: "the primary answers 529 overloaded for its next 2 calls, then recovers: fall back, then come back at the probe",
		Steps: []Step{
			{Faults: []Fault{{On: OnPrimary, Mode: fakeprovider.ModeOverloaded529, Times: 2}}},
			{},
			{AdvanceProbe: true},
		},
		Checks: []Check{
			answeredBy(1, anyModel),
			primaryCalls(1, n(1), primaryKeys, "each key of the primary tried at most once (R3)"),
			answeredBy(2, anyModel),
			answeredBy(3, primaryModel),
		},
	},
	{
		Name: "auth-revoked", Doc: "every key of the primary's provider is revoked (403): disable the keys, use another provider",
		Steps: []Step{
			{Faults: []Fault{{On: OnPrimaryProvider, Mode: fakeprovider.ModeRevoked403}}},
			{},
		},
		Checks: []Check{
			answeredOffProvider(1),
			callsBetween("step 1: each revoked key tried at most once", 1, primaryProvider, true, n(1), primaryKeys),
			answeredOffProvider(2),
			callsBetween("step 2: revoked keys are not used again (D4)", 2, primaryProvider, true, n(0), n(0)),
		},
	},
	{
		Name: "all-down", Doc: "every model fails differently (500, long 429, 529, 401, stall, 502): one clear error and one admin report",
		Steps: []Step{
			{Faults: []Fault{{On: OnEvery, RetryAfter: 90 * time.Second, Modes: []fakeprovider.Mode{
				fakeprovider.ModeServer500, fakeprovider.ModeRateLimit, fakeprovider.ModeOverloaded529,
				fakeprovider.ModeUnauthorized401, fakeprovider.ModeStallAfterFirstChunk, fakeprovider.ModeBadGateway502HTML,
			}}}},
			{},
		},
		Checks: []Check{
			toldWhy(1),
			reports(1, 1, 1, "one admin report naming every model (V4)"),
			toldWhy(2),
			reports(2, 0, 0, "no second report in the same incident"),
		},
	},
	{
		Name: "context-overflow", Doc: "the primary rejects the prompt as too long: compact and retry once, else tell the user (R15)",
		Steps: []Step{
			{},
			{},
			{Faults: []Fault{{On: OnPrimary, Mode: fakeprovider.ModeContextOverflow400, Times: 1}}},
			{Faults: []Fault{{On: OnEvery, Mode: fakeprovider.ModeContextOverflow400}}},
		},
		Checks: []Check{
			answeredBy(3, anyModel),
			paidCalls(3, n(2), n(3), "one retry after compaction"),
			answeredOrTold(4, "context", "/reset", "too long", "too large"),
		},
	},
	{
		Name: "flapping-primary", Doc: "the primary fails, recovers, fails again: notices once per change and the 5-minute probe (S3, N1-N3)",
		Steps: []Step{
			{Faults: []Fault{{On: OnPrimary, Mode: fakeprovider.ModeServer500}}},
			{},
			{AdvanceProbe: true, Faults: []Fault{}},
			{Faults: []Fault{{On: OnPrimary, Mode: fakeprovider.ModeServer500}}},
		},
		Checks: []Check{
			answeredBy(1, fallbackModel),
			notices(1, 1, 1, "fallback", "fallback notice (N1)"),
			answeredBy(2, fallbackModel),
			primaryCalls(2, n(0), n(0), "no primary call before the probe is due"),
			notices(2, 0, 0, "", "nothing repeated (N3)"),
			answeredBy(3, primaryModel),
			notices(3, 1, 1, "cleared", "the probe brings the primary back and says so (N2)"),
			answeredBy(4, fallbackModel),
			notices(4, 1, 1, "fallback", "a new fallback notice (N1)"),
		},
	},
	{
		Name: "many-sessions", Doc: "200 sessions hit the stalled primary at once: the process-wide paid-call guard holds (B2)",
		Steps: []Step{{Sessions: 200, Faults: []Fault{{On: OnPrimary, Mode: fakeprovider.ModeStallAfterFirstChunk}}}},
		Checks: []Check{
			guardHolds(1),
		},
	},
	outageAndRecovery(),
	flapping(),
	redirectingEdge(),
	// The shapes of the OpenClaw figures in BENCHMARKS.md.
	primaryFails("a429-retry-after-2s", "the primary answers 429 with Retry-After 2 s on every call", "A 429 Retry-After 2 s: 12 calls, 153 s",
		Fault{Mode: fakeprovider.ModeRateLimit, RetryAfter: 2 * time.Second}, twicePrimaryKeys, "at most one wait-and-retry per key (R6)"),
	primaryFails("a500", "the primary answers 500 on every call", "A 500: 10 calls, 90 s",
		Fault{Mode: fakeprovider.ModeServer500}, twicePrimaryKeys, "the primary is left quickly"),
	primaryFails("a-stall", "the primary streams one chunk then stalls on every call", "A stalling, 10 s timeouts: 8 calls, 107 s",
		Fault{Mode: fakeprovider.ModeStallAfterFirstChunk}, switchThreshold, "the primary is left after at most timeout_switch_threshold calls"),
	{
		Name: "every-429", Doc: "every model answers 429 with Retry-After 2 s",
		OpenClaw: "every model 429: 31 calls, 417 s",
		Steps:    []Step{{Faults: []Fault{{On: OnEvery, Mode: fakeprovider.ModeRateLimit, RetryAfter: 2 * time.Second}}}},
		Checks: []Check{
			toldWhy(1, "rate", "limit", "retry"),
		},
	},
	{
		Name: "every-500", Doc: "every model answers 500",
		OpenClaw: "every model 500: 24 calls, 238 s",
		Steps:    []Step{{Faults: []Fault{{On: OnEvery, Mode: fakeprovider.ModeServer500}}}},
		Checks: []Check{
			toldWhy(1),
		},
	},
}

// The outage-and-recovery drill: every provider down for outageFor with a turn
// every outageSpacing, then healthy with a turn every recoverySpacing.
const (
	outageFor       = 6 * time.Minute
	outageSpacing   = 20 * time.Second
	recoverySpacing = 5 * time.Second
	recoverySteps   = 12
)

// outageAndRecovery is every provider down for several minutes (every profile
// climbs the cooldown ladder to its cap), then healthy: how many calls the
// outage costs, and how soon after recovery the first answer comes (R11).
func outageAndRecovery() Scenario {
	down := []Fault{{On: OnEvery, Mode: fakeprovider.ModeUnavailable503}}
	steps := []Step{{Faults: down}}
	for t := outageSpacing; t < outageFor; t += outageSpacing {
		steps = append(steps, Step{Advance: outageSpacing})
	}
	healed := len(steps) + 1
	steps = append(steps, Step{Advance: outageSpacing, Faults: []Fault{}})
	for range recoverySteps - 1 {
		steps = append(steps, Step{Advance: recoverySpacing})
	}
	return Scenario{
		Name:  "outage-and-recovery",
		Doc:   "every provider answers 503 for six minutes, then recovers: calls during the outage, seconds from recovery to the first answer (A1, R11)",
		Steps: steps,
		Checks: []Check{
			toldWhy(1),
			probedOncePerInterval(healed - 1),
			recoveredWithin(healed),
		},
	}
}

// probedOncePerInterval bounds the calls of the first steps (the outage): after
// the first turn tries the chain, each provider gets at most one probe per
// probe_interval_seconds (A1) and each of its models one attempt when a
// cooldown ends on its own, so in any such interval at most one call more than
// the provider has models in the chain. What the outage costs does not grow
// with the turns.
func probedOncePerInterval(steps int) Check {
	return Check{fmt.Sprintf("steps 2-%d (the outage): at most one probe per provider per probe_interval_seconds (A1, R11)", steps),
		func(r *Report, b Budgets) (bool, string) {
			interval := b.ProbeInterval
			if interval <= 0 {
				return true, "no probe interval"
			}
			models := map[string]int{}
			for _, ref := range dedupe(append([]string{r.Primary}, r.Fallbacks...)) {
				p, _ := splitRef(ref)
				models[p]++
			}
			at := map[string][]time.Duration{} // provider -> drill time of each call
			now, total := time.Duration(0), 0
			for _, t := range r.Turns[:min(steps, len(r.Turns))] {
				now += t.Advanced
				for _, c := range r.Calls {
					if c.Step != t.Step {
						continue
					}
					total++
					if t.Step > 1 {
						at[c.Provider] = append(at[c.Provider], now)
					}
				}
			}
			for prov, ts := range at {
				k := models[prov] + 1
				for i := k; i < len(ts); i++ {
					if ts[i]-ts[i-k] < interval {
						return false, fmt.Sprintf("%s: %d calls within %s", prov, k+1, ts[i]-ts[i-k])
					}
				}
			}
			return true, fmt.Sprintf("%d paid call(s) in %s of outage", total, now)
		}}
}

// recoveredWithin: the first answer after the providers healed (at step healed)
// comes within one check interval of the recovery: probe_interval_max_seconds,
// where the checks' backoff stops (A1, E2).
func recoveredWithin(healed int) Check {
	return Check{fmt.Sprintf("step %d on: answered within probe_interval_max_seconds of the recovery (A1, E2)", healed),
		func(r *Report, b Budgets) (bool, string) {
			since := time.Duration(0)
			for _, t := range r.Turns {
				if t.Step < healed {
					continue
				}
				if t.Step > healed {
					since += t.Advanced
				}
				for _, a := range t.Answers {
					if a.Kind == "reply" {
						return since <= b.ProbeIntervalMax, fmt.Sprintf("first answer %s after the recovery (step %d), limit %s", since, t.Step, b.ProbeIntervalMax)
					}
				}
			}
			return false, "no answer after the recovery"
		}}
}

// Scenarios returns every scenario, in run order.
func Scenarios() []Scenario { return append([]Scenario(nil), table...) }

// Lookup finds a scenario by name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range table {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// primaryFails is a turn whose primary fails as f says on every call: the
// fallback answers, and the primary is called at most most times.
func primaryFails(name, doc, openClaw string, f Fault, most count, why string) Scenario {
	f.On = OnPrimary
	return Scenario{Name: name, Doc: doc, OpenClaw: openClaw, Steps: []Step{{Faults: []Fault{f}}},
		Checks: []Check{answeredBy(1, fallbackModel), primaryCalls(1, n(1), most, why)}}
}
