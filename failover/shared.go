package failover

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/detourbot/detour/classify"
)

// The shared probe (A1).
//
// When no candidate of a turn could be tried and some are cooling down for a
// transient reason, the turn does not refuse: it joins one probe of the
// candidate most likely to answer (soonest cooldown end, then most recent
// success). The probe is the smallest request (Request.Probe, E1), never the
// conversation: when it answers, the cooldown clears for everyone (D1) and
// the probing turn, like every turn that waited for it, sends its own request
// at once. A provider that is down (providerDown) is checked the same way
// before any conversation goes to it, whoever asks (E1), and its checks back
// off (checkInterval, E2).
//
// It is single-flight per provider across sessions and replicas, through the
// provider's probe row in the state store (probeKey), whose atomic Update is
// the compare-and-set:
//
//	LastProbe    when the latest probe of the provider started: its claim
//	             (R11's probes of a cooling candidate claim the same row)
//	LastUsed     when a probe, or a call to a provider that was down, last answered
//	LastFailure  when a probe last failed, or a call failed as a down provider fails
//	Consecutive  probes failed in a row: the interval doubles with each (E2)
//
// A probe is in flight while LastProbe is later than both results and less
// than SharedProbeWait old, so a prober that crashed blocks nobody longer than
// that. A turn that finds one in flight waits for its result, at most
// SharedProbeWait: woken by the prober when it runs in this process, else
// reading the row every sharedProbePoll. At most one probe starts per check
// interval per provider (SharedProbeInterval, doubled after each failed probe
// up to SharedProbeIntervalMax): a turn that finds the latest probe failed
// within the interval goes on to the next candidate, and is refused when none
// is left. A prober that reaches no verdict on the provider (cancelled, a local
// failure, a budget stop before its call) releases the claim, and a waiting
// turn takes it over.

// sharedProbePoll is how often a turn waiting for another process's probe reads
// the probe row.
const sharedProbePoll = 250 * time.Millisecond

// probeStatus is what a provider's probe row says now.
type probeStatus uint8

const (
	probeFree     probeStatus = iota // no probe in flight and none within the interval: claimable
	probeRunning                     // a probe is in flight: join it
	probeFailed                      // the latest probe, within the interval, failed (or never answered)
	probeAnswered                    // the latest probe, within the interval, answered
)

// checkInterval is how long after a check of a provider the next may start
// (E2): the policy's first interval, doubled after each failed check in a row
// (the row's Consecutive) up to SharedProbeIntervalMax, back to the first after
// one that answered. It is pure.
func checkInterval(p *Policy, s ProfileState) time.Duration {
	return doubling(p.SharedProbeInterval, max(p.SharedProbeIntervalMax, p.SharedProbeInterval), s.Consecutive+1)
}

// providerDown reports whether a provider's probe row says its latest verdict
// was a failure: a failed check, or a call that failed as a provider that is
// down fails (E1). Only a check may send to it again.
func providerDown(s ProfileState) bool { return s.LastFailure.After(s.LastUsed) }

// nextCheckAt is when the next check of the provider may start (E2): the
// interval counts from the latest check, never from the failure that made the
// provider down (R11: after /reset the next turn may check at once).
func nextCheckAt(p *Policy, s ProfileState) time.Time {
	if s.LastProbe.IsZero() {
		return time.Time{}
	}
	return s.LastProbe.Add(checkInterval(p, s))
}

// probeStatusOf reads a probe row (A1). It is pure.
func probeStatusOf(s ProfileState, now time.Time, interval, wait time.Duration) probeStatus {
	if s.LastProbe.IsZero() {
		return probeFree
	}
	pending := s.LastProbe.After(s.LastUsed) && s.LastProbe.After(s.LastFailure)
	if pending && now.Before(s.LastProbe.Add(wait)) {
		return probeRunning
	}
	if now.Sub(s.LastProbe) >= interval {
		return probeFree
	}
	if pending || !s.LastFailure.Before(s.LastUsed) {
		return probeFailed // a lapsed claim counts as a probe that did not answer
	}
	return probeAnswered
}

// flight is a probe this process runs, so local turns waiting for it are woken
// at once. answered and verdict are set before done is closed.
type flight struct {
	at       time.Time // the claim (the row's LastProbe)
	done     chan struct{}
	answered bool // the probe answered
	verdict  bool // false: released without a verdict on the provider
}

// claim is a probe row this run holds.
type claim struct {
	at      time.Time
	fl      *flight
	settled bool
}

// hold records that this run claimed prov's probe row at at.
func (r *runner) hold(prov string, at time.Time) {
	if r.claims == nil {
		r.claims = make(map[string]*claim)
	}
	r.claims[prov] = &claim{at: at, fl: r.e.startFlight(prov, at)}
}

func (e *Engine) startFlight(prov string, at time.Time) *flight {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.flights == nil {
		e.flights = make(map[string]*flight)
	}
	fl := &flight{at: at, done: make(chan struct{})}
	e.flights[prov] = fl
	return fl
}

// flightOf returns the probe of prov this process runs, or nil.
func (e *Engine) flightOf(prov string) *flight {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.flights[prov]
}

func (e *Engine) endFlight(prov string, fl *flight, answered, verdict bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fl.answered, fl.verdict = answered, verdict
	close(fl.done)
	if e.flights[prov] == fl {
		delete(e.flights, prov)
	}
}

// claimShared claims prov's shared probe (A1), or reports what the row says
// instead and the claim in flight (row.LastProbe). When the store fails, this
// process's own flights and throttle decide.
func (r *runner) claimShared(prov string, now time.Time) (won bool, st probeStatus, row ProfileState) {
	row, err := r.e.store().Update(r.ctx, probeKey(prov), func(s *ProfileState) {
		won = false // Update may run fn more than once
		st = probeStatusOf(*s, now, checkInterval(r.p, *s), r.p.SharedProbeWait)
		if st == probeFree {
			s.LastProbe = now
			won = true
		}
	})
	if err != nil {
		r.warnStore(err)
		if fl := r.e.flightOf(prov); fl != nil {
			return false, probeRunning, ProfileState{LastProbe: fl.at}
		}
		won = r.e.throttle("shared:"+prov, r.p.SharedProbeInterval, time.Time{}, now)
		st, row = probeFailed, ProfileState{LastProbe: now}
	}
	if won {
		r.hold(prov, row.LastProbe)
	}
	return won, st, row
}

// claimCooling claims R11's probe of a cooling candidate of prov (claimProbe,
// every ProbeInterval). The claim is the provider's probe row, so turns with
// nothing else to try join it (A1).
func (r *runner) claimCooling(prov string, now time.Time) bool {
	won := r.e.claimProbe(r.ctx, prov, r.p.ProbeInterval, time.Time{}, now)
	if won {
		r.hold(prov, now)
	}
	return won
}

// settled tells the turns waiting on a probe its verdict, once the attempt's
// outcome is in the state store (a no-op for any other kind of attempt).
func (r *runner) settled(kind AttemptKind, c Candidate, f *Failure, end time.Time) {
	if kind == AttemptProbe {
		r.settleProbe(c.Provider, f, end)
	}
}

// settleProbe writes the verdict of the probe this run holds for prov: it
// answered (f nil), it failed, or, for a failure that says nothing about the
// provider (ours, a cancellation, a terminal one), no verdict: the claim is
// released. Waiting turns learn it from the row or from the flight.
func (r *runner) settleProbe(prov string, f *Failure, end time.Time) {
	c := r.claims[prov]
	if c == nil || c.settled {
		return
	}
	c.settled = true
	answered := f == nil
	verdict := answered || (f.Reason != classify.ReasonLocal && f.Reason != classify.ReasonAborted && !terminalReason(f.Reason))
	_, err := r.e.store().Update(context.WithoutCancel(r.ctx), probeKey(prov), func(s *ProfileState) {
		switch {
		case !verdict:
			if s.LastProbe.Equal(c.at) {
				s.LastProbe = s.LastUsed // release: the throttle counts from the last result
				if s.LastFailure.After(s.LastProbe) {
					s.LastProbe = s.LastFailure
				}
			}
		case answered:
			markUp(s, end) // E2: the next outage's checks start at the first interval
		default:
			markDown(s, f, end)
			s.Consecutive++ // E2: the next check waits twice as long
		}
	})
	if err != nil {
		r.warnStore(err)
	}
	r.e.endFlight(prov, c.fl, answered, verdict)
}

// releaseClaims releases every claim the run holds without a verdict (the run
// ended before its probe's call: a budget, a cancellation, a live switch).
func (r *runner) releaseClaims() {
	for prov, c := range r.claims {
		if !c.settled {
			r.settleProbe(prov, &Failure{Reason: classify.ReasonAborted}, r.now())
		}
	}
}

// probeSlot returns the index of the profile a shared probe of pl uses: the
// soonest to recover of those cooling down for a transient reason without a
// stated reset still ahead (D5); -1 when there is none. A candidate blocked by
// its model's own mark (R7) with usable profiles probes its first one.
func probeSlot(pl *plan, now time.Time) int {
	if pl.usable > 0 {
		return 0
	}
	for j := range pl.slots {
		sl := &pl.slots[j]
		if sl.until.IsZero() || !transientCooldown(sl.why) || sl.st.RecoveryAt.After(now) {
			continue
		}
		return j
	}
	return -1
}

// sharedProbe applies A1 when the run could try no candidate and some are
// cooling down: in order of likelihood, each provider's probe is joined or
// made until one answers (a provider whose probe failed says nothing of the
// next one). A provider probed within the interval is waited for: its next
// probe may answer the turn. All of it within SharedProbeWait of the turn's
// start; then, or when every provider's probe failed, the turn is refused.
func (r *runner) sharedProbe(cooling []plan) flow {
	cands, rows := r.probeCandidates(cooling)
	if len(cands) == 0 {
		return proceed
	}
	deadline := r.now().Add(r.p.SharedProbeWait)
	failed := map[string]bool{} // providers whose probe this turn saw fail
	retake := false             // a claim this turn waited on lapsed or was released: it may take it over, even at the deadline
	for round := 0; round < maxProbeRounds; round++ {
		if f := r.checkCtx(); f != proceed {
			return f
		}
		now := r.now()
		if round > 0 {
			if !now.Before(deadline) && !retake {
				break
			}
			rows = r.probeRows(cands)
		}
		retake = false
		c, wake, left := r.nextProbe(cands, rows, failed, now)
		switch {
		case !left:
			return proceed // every provider's probe failed: refused
		case c != nil:
			out, f := r.leadOrJoin(c, deadline)
			switch {
			case f == finished:
				return f
			case out == joinFailed:
				failed[c.prov] = true
			case out == joinTimedOut:
				return proceed
			case out == joinReleased:
				retake = true
			}
			continue // read the rows again: the probe changed them
		case wake.IsZero() || !wake.Before(deadline):
			return proceed // no probe can start within the wait
		}
		r.pause(wake.Sub(now), nil) // until a provider's next probe may start
	}
	return proceed
}

// probeCandidates are the cooling candidates a shared probe may try (A1), the
// likeliest to answer first: the soonest cooldown end, then the latest
// success. Each one's first slot is the profile its probe uses; rows are the
// probe rows of their providers.
func (r *runner) probeCandidates(cooling []plan) ([]plan, map[string]ProfileState) {
	now := r.now()
	var cands []plan
	for _, c := range cooling {
		if r.probed[c.prov] {
			continue // at most one transient-cooldown probe per provider per run (R11)
		}
		j := probeSlot(&c, now)
		if j < 0 {
			continue // a stated reset is still ahead (D5): no probe before it
		}
		c.slots = append([]slot(nil), c.slots...)
		c.slots[0], c.slots[j] = c.slots[j], c.slots[0]
		cands = append(cands, c)
	}
	if len(cands) == 0 {
		return nil, nil
	}
	rows := r.probeRows(cands)
	lastOK := func(c *plan) time.Time { // the most recent success: a shared probe's, or this process's
		t := rows[c.prov].LastUsed
		if u := r.e.lastSuccess(c.slots); u.After(t) {
			t = u
		}
		return t
	}
	sort.SliceStable(cands, func(a, b int) bool {
		if !cands[a].until.Equal(cands[b].until) {
			return cands[a].until.Before(cands[b].until)
		}
		return lastOK(&cands[a]).After(lastOK(&cands[b]))
	})
	return cands, rows
}

// nextProbe returns the first candidate whose provider's probe may be joined
// or made now, nil when none may; wake is when the soonest of the providers
// probed within the interval may be probed again, and left whether any
// provider's probe has not failed yet.
func (r *runner) nextProbe(cands []plan, rows map[string]ProfileState, failed map[string]bool, now time.Time) (c *plan, wake time.Time, left bool) {
	for i := range cands {
		c := &cands[i]
		if failed[c.prov] {
			continue
		}
		left = true
		row := rows[c.prov]
		if st := probeStatusOf(row, now, checkInterval(r.p, row), r.p.SharedProbeWait); st == probeFailed || st == probeAnswered {
			if at := nextCheckAt(r.p, row); wake.IsZero() || at.Before(wake) {
				wake = at
			}
			continue
		}
		return c, wake, true
	}
	return nil, wake, left
}

// maxProbeRounds bounds sharedProbe's rounds (each joins, makes or waits for a
// probe), whatever the clock does.
const maxProbeRounds = 64

// probeRows reads the probe rows of the candidates' providers in one call.
func (r *runner) probeRows(cands []plan) map[string]ProfileState {
	provs := make([]string, len(cands))
	for i, c := range cands {
		provs[i] = c.prov
	}
	return r.rowsOf(provs)
}

// rowsOf reads the probe rows of provs, by provider, in one call.
func (r *runner) rowsOf(provs []string) map[string]ProfileState {
	var keys []string
	out := make(map[string]ProfileState, len(provs))
	for _, p := range provs {
		if _, seen := out[p]; !seen {
			out[p] = ProfileState{}
			keys = append(keys, probeKey(p))
		}
	}
	states, errs := r.e.getStates(r.ctx, keys)
	r.warnStoreErrs(errs)
	for i, k := range keys {
		out[k[len("probe:"):]] = states[i]
	}
	return out
}

// lastSuccess is this process's latest success on any of slots (P1's memory).
func (e *Engine) lastSuccess(slots []slot) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	var t time.Time
	for _, sl := range slots {
		if u := e.used[sl.key]; u.After(t) {
			t = u
		}
	}
	return t
}

// leadOrJoin claims the shared probe of c's provider and makes it, or waits
// for the one in flight until deadline. It reports how the probe ended:
// joinFailed, joinTimedOut, or joinReleased when the claim moved on (taken by
// another turn, or released) and the rows must be read again; finished when
// the run is over (it was answered, or stopped).
func (r *runner) leadOrJoin(c *plan, deadline time.Time) (joinOutcome, flow) {
	won, st, row := r.claimShared(c.prov, r.now())
	if won {
		r.markProbed(c.prov)
		pl := *c
		pl.skip, pl.kind = "", AttemptProbe
		return joinFailed, r.walk(pl.index, &pl)
	}
	if st != probeRunning {
		return joinReleased, proceed // probed meanwhile: read the rows again
	}
	out := r.awaitProbe(c.prov, row.LastProbe, deadline)
	r.log.LogAttrs(r.ctx, slog.LevelInfo, "joined the shared probe",
		slog.String("sessionKey", r.req.SessionKey), slog.String("provider", c.prov),
		slog.String("outcome", out.String()))
	if out != joinAnswered {
		return out, proceed
	}
	pl := r.inspect(c.index) // the probe cleared a cooldown: try it now
	if pl.skip != "" || pl.usable == 0 || pl.mblocked {
		return joinFailed, proceed
	}
	return joinFailed, r.walk(c.index, &pl)
}

// markProbed notes that this run probes prov (R11: at most one
// transient-cooldown probe per provider per run).
func (r *runner) markProbed(prov string) {
	if r.probed == nil {
		r.probed = make(map[string]bool)
	}
	r.probed[prov] = true
}

// joinOutcome is how a wait for another turn's probe ended.
type joinOutcome uint8

const (
	joinAnswered joinOutcome = iota + 1
	joinFailed
	joinReleased // no verdict (released, or the prober vanished): the claim is free
	joinTimedOut
)

func (o joinOutcome) String() string {
	switch o {
	case joinAnswered:
		return "answered"
	case joinFailed:
		return "failed"
	case joinReleased:
		return "released"
	}
	return "no result within probe_wait_seconds"
}

// awaitProbe waits for the result of prov's probe claimed at at, until
// deadline, with the engine's clock.
func (r *runner) awaitProbe(prov string, at, deadline time.Time) joinOutcome {
	fl := r.e.flightOf(prov)
	if fl != nil && !fl.at.Equal(at) {
		fl = nil // another claim's, now over
	}
	for {
		if fl != nil {
			select {
			case <-fl.done:
				switch {
				case !fl.verdict:
					return joinReleased
				case fl.answered:
					return joinAnswered
				}
				return joinFailed
			default:
			}
		} else {
			rows, errs := r.e.getStates(r.ctx, []string{probeKey(prov)})
			if errs == nil {
				if o, ok := r.resultSince(rows[0], at); ok {
					return o
				}
			}
		}
		now := r.now()
		if !now.Before(deadline) || r.ctx.Err() != nil {
			return joinTimedOut
		}
		step := deadline.Sub(now)
		var wake <-chan struct{}
		if fl != nil {
			wake = fl.done
		} else {
			step = min(step, sharedProbePoll)
		}
		r.pause(step, wake)
	}
}

// resultSince reads a probe row for a result of the probe claimed at at: a
// verdict at or after it, or a claim that is free again.
func (r *runner) resultSince(s ProfileState, at time.Time) (joinOutcome, bool) {
	switch {
	case !s.LastUsed.Before(at) && !s.LastUsed.Before(s.LastFailure):
		return joinAnswered, true
	case !s.LastFailure.Before(at):
		return joinFailed, true
	case probeStatusOf(s, r.now(), 0, r.p.SharedProbeWait) != probeRunning:
		return joinReleased, true // released, or the prober vanished (its claim lapsed)
	}
	return 0, false
}

// pause sleeps d on the engine's clock, cut short by wake or the run's end.
func (r *runner) pause(d time.Duration, wake <-chan struct{}) {
	ctx := r.ctx
	if wake != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(r.ctx)
		stop := make(chan struct{})
		defer func() { close(stop); cancel() }()
		go func() {
			select {
			case <-wake:
				cancel()
			case <-stop:
			}
		}()
	}
	_ = r.e.clock().Sleep(ctx, d)
}

func (e *Engine) clock() Clock {
	if e.Clock != nil {
		return e.Clock
	}
	return WallClock{}
}
