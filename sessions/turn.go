package sessions

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/commands"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/llm"
	"github.com/detourbot/detour/notices"
	"github.com/detourbot/detour/redact"
)

// process handles one inbound message: a command or a turn. It never panics,
// and the message gets one final answer (a reply or an error) at most.
func (r *Router) process(ctx context.Context, in adapters.Inbound) {
	d := &delivery{in: in}
	ctx = withDelivery(ctx, d)
	defer r.recordAnswer(ctx, d)
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("turn panicked", "session", in.SessionKey, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if !d.answered() {
				r.send(ctx, reply(in, adapters.KindError, "internal error; the message was not processed"))
			}
		}
	}()
	if !r.allowed(in) {
		r.refuse(ctx, in) // T5: before any command or model, so no paid call
		return
	}
	if r.unsaved.pending() {
		// M8: answers kept while the database failed go first, so the history
		// this message reads (any session's) holds them, in order.
		if err := r.flushUnsaved(ctx); err != nil {
			r.log.Warn("answers kept in memory still cannot be stored", "err", err)
		}
	}
	if in.EventID != "" {
		// M3: one answer per platform event across replicas and restarts; M7:
		// the same message sent again gets its stored answer.
		taken, prior, err := r.st.claimEvent(ctx, in.EventID, r.clock.Now())
		switch {
		case err != nil:
			r.log.Warn("event de-duplication unavailable; answering anyway", "event", in.EventID, "err", err)
		case !taken:
			r.duplicate(ctx, in, prior)
			return
		default:
			d.claimed = true
		}
	}
	if n := len(in.Text); n > r.cfg.MaxMessageBytes {
		r.send(ctx, reply(in, adapters.KindError, fmt.Sprintf(
			"message too large (%d bytes; the limit is %d): nothing was stored or sent to a model; please shorten or split it", n, r.cfg.MaxMessageBytes)))
		return
	}
	if cmd, ok := commands.Parse(in.Text); ok {
		r.runCommand(ctx, in, cmd)
		return
	}
	if strings.TrimSpace(in.Text) == "" && len(in.Files) == 0 { // I4: files alone are a message
		r.send(ctx, reply(in, adapters.KindError, "empty message; nothing to answer"))
		return
	}
	lv := r.startLive(ctx, in) // L1: progress within a second, before any call
	defer lv.stop()
	r.turn(ctx, in, lv)
}

// selection is which model a session uses and why.
type selection struct {
	requested  failover.ModelRef // Chain[0]
	source     failover.Source
	selected   failover.ModelRef // what the session selected (the fallback's origin when auto)
	base       failover.ModelRef // configured primary (or the agent's model)
	baseSource failover.Source
	configured []failover.ModelRef
	override   []failover.ModelRef // agent fallbacks; nil = not set
	probe      bool                // S3: this turn re-tries the origin first
}

func (r *Router) agentFor(key, channel string) *Agent {
	for i := range r.cfg.Agents {
		a := &r.cfg.Agents[i]
		for _, m := range a.Match {
			if m != "" && (m == channel || strings.HasPrefix(key, m)) {
				return a
			}
		}
	}
	return nil
}

func (r *Router) selectionFor(e *Entry, channel string) selection {
	s := selection{base: r.cfg.Primary, baseSource: failover.SourceDefault, configured: r.cfg.Fallbacks}
	if a := r.agentFor(e.Key, channel); a != nil {
		if a.Model != "" {
			s.base, s.baseSource = a.Model, failover.SourceAgent
			if a.Fallbacks != nil {
				s.override = append([]failover.ModelRef{}, (*a.Fallbacks)...)
			}
		}
	}
	s.requested, s.source, s.selected = s.base, s.baseSource, s.base
	if ov := e.override(); ov != "" { // O5: the persisted override wins
		s.requested, s.source, s.selected = ov, e.source(), ov
		if s.source == failover.SourceAuto {
			s.selected = s.base
			if e.FallbackOrigin != "" {
				s.selected = failover.ModelRef(e.FallbackOrigin)
			}
		}
	}
	return s
}

// selectedSource is why the selected model is selected. On an auto override the
// session answers from a fallback (source auto) but its selection is still the
// configured model (default or agent).
func (s selection) selectedSource() failover.Source {
	if s.source != failover.SourceAuto {
		return s.source
	}
	if s.selected == s.base {
		return s.baseSource
	}
	return failover.SourceDefault
}

func (r *Router) systemPrompt(key, channel string) string {
	if a := r.agentFor(key, channel); a != nil && a.SystemPrompt != "" {
		return a.SystemPrompt
	}
	return r.cfg.SystemPrompt
}

// chainFor builds the candidate chain of a selection (S1-S5, K1-K5).
func chainFor(s selection) []failover.ModelRef {
	in := failover.ChainInput{Requested: s.requested, Source: s.source, Primary: s.base, Configured: s.configured}
	if s.override != nil {
		in.Override = s.override
	}
	return failover.BuildChain(in)
}

// overrideState is a snapshot of the O1 fields, for compare-and-set writes.
type overrideState struct {
	Provider, Model, Source string
	Profile, ProfileSource  string
	ProfileCompaction       int
	Origin, Reason          string
	Status                  int // HTTP status behind Reason
}

func snapshot(e *Entry) overrideState {
	return overrideState{e.ProviderOverride, e.ModelOverride, e.ModelOverrideSource,
		e.AuthProfileOverride, e.AuthProfileOverrideSource, e.AuthProfileOverrideCompactionCount,
		e.FallbackOrigin, e.FallbackReason, e.FallbackStatus}
}

func (o overrideState) modelMatch() map[string]any {
	return map[string]any{"provider_override": o.Provider, "model_override": o.Model, "model_override_source": o.Source}
}

func (o overrideState) modelFields() map[string]any {
	return map[string]any{"provider_override": o.Provider, "model_override": o.Model, "model_override_source": o.Source,
		"fallback_origin": o.Origin, "fallback_reason": o.Reason, "fallback_status": o.Status}
}

func (o overrideState) profileMatch() map[string]any {
	return map[string]any{"auth_profile_override": o.Profile, "auth_profile_override_source": o.ProfileSource}
}

func (o overrideState) profileFields() map[string]any {
	return map[string]any{"auth_profile_override": o.Profile, "auth_profile_override_source": o.ProfileSource,
		"auth_profile_override_compaction_count": o.ProfileCompaction}
}

func merge(ms ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// turnState is one turn's mutable bookkeeping, owned by the session's worker.
type turnState struct {
	in       adapters.Inbound
	entry    *Entry
	sel      selection
	cur      overrideState  // what this turn believes is stored
	prev     *overrideState // what BeforeFallback replaced (for O3), nil = nothing to roll back
	wroteFor failover.Candidate
	attempts []failover.AttemptRecord
	prompt   []llm.Message
	switched failover.ModelRef // O6: the live switch already handed to the engine
	// parts is what ts.prompt is built from (R15 compaction drops from its history).
	parts promptParts
	msg   *message       // the new message, its files read (I1-I4)
	spent failover.Spend // paid for the turn's summaries, counted by its runs (B1, R16)
	// imageDetour: the turn moved off the requested model only because it does
	// not take the message's images (I5): nothing about it is sticky.
	imageDetour bool
	cause       *failover.Failure // what moved this run off its first candidate
	live        *liveTurn         // progress and the growing reply (L1-L3, A5)
	cost        float64           // estimated cost of this turn's runs (B1 prices), for /status
	tally       *tally            // the turn's log line and metrics (M5)
}

func (r *Router) window(ref failover.ModelRef) int { return r.cfg.Models[ref].ContextWindow }

// turn answers one user message through the failover engine.
func (r *Router) turn(ctx context.Context, in adapters.Inbound, lv *liveTurn) {
	t := newTally()
	defer r.finishTurn(in, t)
	msg := r.readMessage(ctx, in) // I1-I4: once, whatever restarts the turn
	r.turnOnce(ctx, in, msg, lv, true, t)
}

// turnOnce runs one turn; mayRestart allows one restart when the user switched
// models while it ran and the engine could not jump to that model (O6).
func (r *Router) turnOnce(ctx context.Context, in adapters.Inbound, msg *message, lv *liveTurn, mayRestart bool, t *tally) {
	now := r.clock.Now()
	// T7: the turn writes before its first paid call, so a database that cannot
	// be written (read-only, full disk) stops it before anything is paid for.
	// The same statement consumes a pending user switch (O4).
	e, err := r.st.beginTurn(ctx, in.SessionKey, now)
	if err != nil {
		r.log.Error("begin turn", "session", in.SessionKey, "err", err)
		r.send(ctx, reply(in, adapters.KindError, storageFailure("the session could not be loaded", err)))
		return
	}
	ts := &turnState{in: in, entry: e, sel: r.selectionFor(e, in.Channel), cur: snapshot(e), live: lv, tally: t, msg: msg}
	lv.noticeWith(func(c failover.Candidate) string { return r.fallbackNotice(ts, c) })
	if ts.sel.source == failover.SourceAuto && (e.LastProbeAt == nil || !now.Before(e.LastProbeAt.Add(r.cfg.ProbeInterval))) {
		// S3: re-try the origin first with the real request; persist the probe time
		// first so a crash cannot make every restart probe again.
		ts.sel.probe = true
		ts.sel.requested, ts.sel.source = ts.sel.selected, ts.sel.selectedSource()
		t := now.UTC()
		e.LastProbeAt = &t
		if err := r.st.patch(ctx, e.Key, map[string]any{"last_probe_at": t}); err != nil {
			r.log.Error("persist probe time", "session", e.Key, "err", err)
			r.send(ctx, reply(in, adapters.KindError, storageFailure("the session could not be saved", err)))
			return
		}
	}

	hist, err := r.st.history(ctx, e.Key)
	if err != nil {
		r.log.Error("load history", "session", e.Key, "err", err)
		r.send(ctx, reply(in, adapters.KindError, storageFailure("the history could not be loaded", err)))
		return
	}
	ts.parts = promptParts{system: r.systemPrompt(e.Key, in.Channel), summary: e.Summary, hist: hist}
	r.readEarlier(ctx, ts) // H1: the first turn in a conversation begun without the bot
	r.fitImages(ts)        // I5
	r.tellNotes(ctx, in, msg)
	if msg.empty() {
		r.send(ctx, reply(in, adapters.KindError, "nothing to answer: no file of the message could be read, and it has no text"))
		t.outcome = OutcomeError
		return
	}
	ts.parts.context, ts.parts.user = e.ThreadContext, msg.llm()
	r.fitPrompt(ctx, ts) // R15, R16

	res, err := r.run(ctx, ts)
	ts.cost += res.CostUSD
	if err != nil && isOverflow(err) {
		// R15: compact and retry once; with nothing left to drop, tell the user.
		if r.compactHalf(ctx, ts, true) {
			res, err = r.run(ctx, ts)
			ts.cost += res.CostUSD
		}
	}
	if ls := (*failover.LiveSwitchError)(nil); errors.As(err, &ls) && mayRestart {
		// O6: the user's new model is not in this chain; start the turn again
		// on it. Nothing was stored for the abandoned run but its attempts.
		r.recordAttempts(ctx, ts)
		r.turnOnce(ctx, in, msg, lv, false, t)
		return
	}
	if err != nil {
		// A cancelled turn still paid for its calls: record them regardless.
		r.recordAttempts(context.WithoutCancel(ctx), ts)
		r.fail(ctx, ts, err)
		return
	}
	r.succeed(ctx, ts, res)
}

// liveSwitch reports the model a user switched this session to while the turn
// ran (/model or a session patch from another path: O4), if any.
func (r *Router) liveSwitch(ctx context.Context, ts *turnState) (failover.ModelRef, bool) {
	e, err := r.st.load(ctx, ts.entry.Key)
	if err != nil || !e.LiveSwitch {
		return "", false
	}
	to := e.override()
	if to == "" || e.source() == failover.SourceAuto {
		to = ts.sel.base // /model default: back to the configured model
	}
	if to == ts.sel.requested || to == ts.switched {
		return "", false
	}
	ts.switched = to
	return to, true
}

// compactHalf drops the oldest half of the turn's history (at a user message),
// replaced by a summary when summarise is set and summaries are on (R16), and
// rebuilds the prompt; false when there is nothing left to drop (R15). The
// compaction a timeout asks for in the middle of a run (R15) does not
// summarise: that would be another call while the provider is slow.
func (r *Router) compactHalf(ctx context.Context, ts *turnState, summarise bool) bool {
	hist := ts.parts.hist
	if len(hist) < 2 {
		return false
	}
	keep := len(hist) / 2
	for keep < len(hist) && hist[keep].Role != "user" {
		keep++
	}
	r.compactAt(ctx, ts, keep, summarise && r.cfg.Summary)
	ts.prompt, _ = buildPrompt(ts.parts, 0)
	return true
}

func isOverflow(err error) bool {
	var f *failover.Failure
	if errors.As(err, &f) && f.Reason == classify.ReasonContextOverflow {
		return true
	}
	var s *failover.SummaryError
	if errors.As(err, &s) && s.Stop == nil {
		if last := s.Last(); last != nil && last.Reason == classify.ReasonContextOverflow {
			return true
		}
	}
	return false
}

// compact drops history below message id keep (0 = all), stores summary when
// it is not nil (R16), and bumps the compaction count, which also releases the
// automatic profile pin (P2, R15).
func (r *Router) compact(ctx context.Context, e *Entry, keep uint64, summary *string) error {
	if err := r.st.compact(ctx, e.Key, keep, summary); err != nil {
		return err
	}
	e.CompactionCount++
	return nil
}

// baseRequest is the engine request of a run of ts with prompt: the chain's
// context (selection, profiles, pins, windows, prices), without hooks.
func (r *Router) baseRequest(ts *turnState, prompt []llm.Message) failover.Request {
	e, sel := ts.entry, ts.sel
	req := failover.Request{
		SessionKey:   e.Key,
		Chain:        chainFor(sel),
		Primary:      sel.base,
		Source:       sel.source,
		Profiles:     r.cfg.Profiles,
		Order:        r.cfg.Order,
		PromptTokens: estimate(prompt),
	}
	if e.AuthProfileOverride != "" {
		switch {
		case e.AuthProfileOverrideSource == string(failover.SourceUser):
			if sel.source == failover.SourceUser || sel.source == failover.SourceLegacy {
				req.UserProfile = e.AuthProfileOverride // P3: strict
			}
		case e.AuthProfileOverrideCompactionCount == e.CompactionCount:
			req.PinnedProfile = e.AuthProfileOverride // P2: a preference
		}
	}
	if len(r.cfg.Models) > 0 {
		req.ContextWindow = map[failover.ModelRef]int{}
		req.Prices = map[failover.ModelRef]failover.Price{}
		for ref, m := range r.cfg.Models {
			if m.ContextWindow > 0 {
				req.ContextWindow[ref] = m.ContextWindow
			}
			if m.Price != (failover.Price{}) {
				req.Prices[ref] = m.Price
			}
		}
	}
	return req
}

// run makes one engine run for ts.
func (r *Router) run(ctx context.Context, ts *turnState) (failover.Result, error) {
	turnCtx := ctx // a stream outlives the attempt that starts it (a fallback may finish it)
	ts.cause = nil
	req := r.baseRequest(ts, ts.prompt)
	req.Spent = ts.spent // B1: the turn's summaries count
	if len(ts.msg.images) > 0 {
		req.Chain, req.Images, req.TakesImages = r.imageChain(ts.sel), true, r.imageModels() // I5
	}
	before, spent := r.budgetHooks(ts.in.User)
	req.Hooks = failover.Hooks{
		BeforeFallback: func(ctx context.Context, from, to failover.Candidate, cause failover.Failure) error {
			ts.cause = &cause // the same failure the result names (A5's notice)
			return r.beforeFallback(ctx, ts, to, cause)
		},
		AfterFailedFallback: func(ctx context.Context, c failover.Candidate, f failover.Failure) { r.afterFailedFallback(ctx, ts, c) },
		OnAttempt: func(a failover.AttemptRecord) {
			r.onAttempt(ts, a)
			if spent != nil {
				spent(a) // T6
			}
		},
		BeforeCall: before,          // T6: the user's daily budget
		OnWait:     ts.live.waiting, // R6, L1: say what the turn waits for
		// R15: a timeout on a prompt above 65% of the window compacts and retries.
		Compact: func(ctx context.Context) (int, bool) {
			if !r.compactHalf(ctx, ts, false) {
				return 0, false
			}
			return estimate(ts.prompt), true
		},
	}
	attempt := func(ctx context.Context, a failover.Attempt) (failover.Output, error) {
		c, err := r.clients(a.Candidate.Provider, a.Candidate.Profile)
		if err != nil || c == nil {
			return failover.Output{}, &failover.Failure{Reason: classify.ReasonAuth, Class: classify.ClassDeterministic,
				Message: "no client configured for this provider/profile", Provider: a.Candidate.Provider,
				Model: a.Candidate.Model, Profile: a.Candidate.Profile}
		}
		if a.Number > 1 {
			// O6: a model switched by the user while this turn ran wins over the
			// rest of the chain; checked before each further paid call.
			if to, ok := r.liveSwitch(ctx, ts); ok {
				return failover.Output{}, &failover.LiveSwitchError{To: to}
			}
		}
		msgs := ts.prompt
		if a.Kind == failover.AttemptNudged { // R13
			msgs = append(append([]llm.Message{}, msgs...), llm.Message{Role: "system", Content: "Your previous reply was empty. Answer the user's last message."})
		}
		ts.live.beginAttempt(a.Candidate)
		out, err := c.Chat(ctx, llm.Request{Model: a.Candidate.Model, Messages: msgs, MaxTokens: r.cfg.MaxTokens}, ts.live.delta(turnCtx))
		return withEstimate(out, err, msgs), err // U1
	}
	return r.engine.Run(ctx, req, attempt)
}

// beforeFallback persists the fallback override before its attempt (O2). It
// writes only when the stored override is still what this turn loaded, so a
// /model typed meanwhile is never overwritten.
func (r *Router) beforeFallback(ctx context.Context, ts *turnState, to failover.Candidate, cause failover.Failure) error {
	if ts.sel.source == failover.SourceUser || ts.sel.source == failover.SourceLegacy {
		return nil // S4: a user override never falls back (BuildChain keeps it alone)
	}
	if cause.Reason == classify.ReasonImageInput {
		ts.imageDetour = true // I5: this turn only; the session keeps its model
		return nil
	}
	origin := string(ts.sel.selected)
	next := overrideState{
		Provider: to.Provider, Model: to.Model, Source: string(failover.SourceAuto),
		Profile: to.Profile, ProfileSource: string(failover.SourceAuto), ProfileCompaction: ts.entry.CompactionCount,
		Origin: origin, Reason: string(cause.Reason), Status: cause.Status,
	}
	if failover.ModelRef(to.Ref()) == ts.sel.selected {
		// K4: the chain came back to the selected model; no override is needed.
		next.Provider, next.Model, next.Source, next.Origin, next.Reason, next.Status = "", "", "", "", "", 0
	}
	fields := merge(next.modelFields(), next.profileFields())
	if ts.cur.Source != string(failover.SourceAuto) {
		// The fallback begins now: the first origin probe is due one interval later (S3).
		fields["last_probe_at"] = r.clock.Now().UTC()
	}
	ok, err := r.st.casPatch(ctx, ts.entry.Key, ts.cur.modelMatch(), fields)
	if err != nil {
		r.log.Warn("persist fallback override", "session", ts.entry.Key, "err", err)
		return nil // the answer matters more than the bookkeeping
	}
	if !ok {
		r.log.Info("session model changed meanwhile; fallback not persisted", "session", ts.entry.Key, "to", to.Ref())
		ts.prev = nil
		return nil
	}
	prev := ts.cur
	ts.prev, ts.cur, ts.wroteFor = &prev, next, to
	return nil
}

// afterFailedFallback rolls back what beforeFallback wrote, field group by field
// group, and only where the stored values still match the failed candidate (O3).
func (r *Router) afterFailedFallback(ctx context.Context, ts *turnState, c failover.Candidate) {
	if ts.prev == nil || ts.wroteFor.Ref() != c.Ref() {
		return
	}
	prev, wrote := *ts.prev, ts.cur
	if _, err := r.st.casPatch(ctx, ts.entry.Key, wrote.modelMatch(), prev.modelFields()); err != nil {
		r.log.Warn("roll back fallback override", "session", ts.entry.Key, "err", err)
	}
	if _, err := r.st.casPatch(ctx, ts.entry.Key, wrote.profileMatch(), prev.profileFields()); err != nil {
		r.log.Warn("roll back fallback profile", "session", ts.entry.Key, "err", err)
	}
	ts.cur, ts.prev = prev, nil
}

// attemptRows turns the turn's attempt records into rows (V1).
func (r *Router) attemptRows(ts *turnState) []AttemptRow {
	if len(ts.attempts) == 0 {
		return nil
	}
	turn := fmt.Sprintf("%d", r.clock.Now().UnixNano())
	rows := make([]AttemptRow, 0, len(ts.attempts))
	for _, a := range ts.attempts {
		row := AttemptRow{SessionKey: ts.entry.Key, Turn: turn, Model: a.Candidate.Ref(), Profile: a.Candidate.Profile,
			Kind: string(a.Kind), Skipped: string(a.Skipped), StartedAt: a.Started.UTC(), DurationMS: a.Duration.Milliseconds()}
		if f := a.Failure; f != nil {
			row.Reason, row.Status, row.Code = string(f.Reason), f.Status, f.Code
			row.Summary = redact.Preview(f.Message, 200)
		} else if a.Skipped == "" {
			row.Summary = "ok"
		}
		rows = append(rows, row)
	}
	return rows
}

// recordAttempts stores the attempt records of a turn that stored no exchange.
func (r *Router) recordAttempts(ctx context.Context, ts *turnState) {
	if err := r.st.addAttempts(ctx, r.attemptRows(ts)); err != nil {
		r.log.Warn("record attempts", "session", ts.entry.Key, "err", err)
	}
}

// storageFailure is the user's error when the database failed before any paid
// call: what failed, why when the storage itself is the cause, and that
// nothing was sent to a model (T7).
func storageFailure(what string, err error) string {
	if p := store.Problem(err); p != "" {
		return "the bot cannot store this conversation: " + p + "; nothing was sent to a model. Please tell the bot's operator"
	}
	return "internal error: " + what + "; nothing was sent to a model; please try again"
}

func paidCalls(attempts []failover.AttemptRecord) int {
	n := 0
	for _, a := range attempts {
		if a.Skipped == "" {
			n++
		}
	}
	return n
}

// succeed stores the exchange, then posts notices and the reply.
func (r *Router) succeed(ctx context.Context, ts *turnState, res failover.Result) {
	e, sel := ts.entry, ts.sel
	answered := failover.ModelRef(res.Candidate.Ref())
	prevNotice := e.notice()
	var cause *failover.Failure
	if res.FellBack {
		cause = res.Cause
	}
	next := noticeState(ts, answered, cause)
	if ts.imageDetour {
		prevNotice = imageNoticeBase(next) // I5: said on every such turn, kept by none
	}
	text := notices.ForChange(prevNotice, next)
	ts.tally.answered(answered, res.FellBack)
	returned := answered == sel.selected && ts.cur.Source == string(failover.SourceAuto) && !ts.imageDetour

	now := r.clock.Now().UTC()
	x := exchange{
		key: e.Key,
		messages: []Message{
			{SessionKey: e.Key, Role: "user", Content: ts.msg.stored(), CreatedAt: now},
			{SessionKey: e.Key, Role: "assistant", Content: res.Output.Text, Model: string(answered), CreatedAt: now},
		},
		attempts:  r.attemptRows(ts),
		fields:    noticeFields(next, ts.imageDetour),
		paidCalls: paidCalls(ts.attempts),
		tokensIn:  int64(res.Output.InputTokens),
		tokensOut: int64(res.Output.OutputTokens),
		returned:  returned,
		cost:      ts.cost,
		notice:    text,
	}
	// P2: pin the profile that served, unless the user pinned one.
	pinned := e.AuthProfileOverride == res.Candidate.Profile && e.AuthProfileOverrideSource == string(failover.SourceAuto) &&
		e.AuthProfileOverrideCompactionCount == e.CompactionCount && ts.prev == nil && !returned
	if !pinned && res.Candidate.Profile != "" && e.AuthProfileOverrideSource != string(failover.SourceUser) && !ts.imageDetour {
		x.pin, x.pinCompacted = res.Candidate.Profile, e.CompactionCount
	}
	out := reply(ts.in, adapters.KindReply, res.Output.Text)
	out.Model = string(answered)
	x.id = exchangeID()
	if ts.in.EventID != "" && deliveryOf(ctx) != nil && deliveryOf(ctx).claimed {
		x.event, x.answer = ts.in.EventID, eventAnswer{session: e.Key, out: out}
	}
	if err := r.storeAnswer(ctx, x); err != nil {
		// M8: the answer was paid for: the person gets it, after a notice
		// (its own message, so the message still has one final answer) that
		// it is not saved yet; the exchange waits in memory for the database.
		r.log.Error("store turn", "session", e.Key, "err", err)
		kept := r.keepUnsaved(&x)
		if text != "" && notices.Deliver(r.cfg.Notices, ts.in.Direct) {
			r.send(ctx, reply(ts.in, adapters.KindNotice, text))
		}
		r.send(ctx, reply(ts.in, adapters.KindNotice, unsavedNotice(err, kept)))
		r.answer(ctx, ts, out)
		if d := deliveryOf(ctx); kept && d != nil && d.delivered {
			r.unsaved.delivered(&x, r.clock.Now())
		}
		return
	}
	if d := deliveryOf(ctx); d != nil && x.event != "" {
		d.stored = true
	}
	r.incidentMu.Lock()
	r.incidentOpen = false // storeExchange ended it in the database
	r.incidentMu.Unlock()
	if text != "" && notices.Deliver(r.cfg.Notices, ts.in.Direct) && text != ts.live.noticedText() {
		r.send(ctx, reply(ts.in, adapters.KindNotice, text)) // N4: its own message, before the reply
	}
	r.answer(ctx, ts, out)
}

// noticeState is the notice state of a turn answered by answered, moved off its
// first candidate by cause (nil = it was not).
func noticeState(ts *turnState, answered failover.ModelRef, cause *failover.Failure) notices.State {
	sel := ts.sel
	if cause != nil && cause.Reason == classify.ReasonImageInput {
		// I5: moved off the requested model for its images, this turn only.
		return notices.State{Selected: string(sel.requested), Active: string(answered), Reason: classify.ReasonImageInput}
	}
	next := notices.State{Selected: string(sel.selected), Active: string(answered)}
	switch {
	case sel.source == failover.SourceUser || sel.source == failover.SourceLegacy:
		next.Selected = string(answered)
	case answered != sel.selected:
		next.Reason, next.Status = classify.Reason(ts.cur.Reason), ts.cur.Status
		if cause != nil {
			next.Reason, next.Status = cause.Reason, cause.Status
			if cause.Reason == classify.ReasonRefusedResponse && cause.Status != classify.StatusUnknown {
				next.Words = cause.Describe() // A2: what was refused (a skip knows only the reason)
			}
		}
	}
	return next
}

// fallbackNotice is the N1 notice the turn owes its reader if c answers, ""
// when none is due: a streamed fallback answer shows below it (A5). It runs on
// the engine's goroutine, where the hooks that set ts.cause run too.
func (r *Router) fallbackNotice(ts *turnState, c failover.Candidate) string {
	next := noticeState(ts, failover.ModelRef(c.Ref()), ts.cause)
	if !next.OnFallback() || !notices.Deliver(r.cfg.Notices, ts.in.Direct) {
		return ""
	}
	prev := ts.entry.notice()
	if next.Reason == classify.ReasonImageInput {
		prev = imageNoticeBase(next)
	}
	return notices.ForChange(prev, next)
}

// answer posts a turn's final message: into the growing reply when one was
// streamed (replacing any partial text, L3), else as one message.
func (r *Router) answer(ctx context.Context, ts *turnState, out adapters.Outbound) {
	if ts.live.finish(ctx, out) {
		deliveryOf(ctx).note(out, true)
		return
	}
	r.send(ctx, out)
}

// fail tells the user why no answer came, and the admin when every model is down.
func (r *Router) fail(ctx context.Context, ts *turnState, err error) {
	now := r.clock.Now()
	ts.tally.failed(err)
	if n := paidCalls(ts.attempts); n > 0 {
		// Counted even when the turn was cancelled (a second SIGTERM): the
		// provider was paid either way.
		if err := r.st.addPaidCalls(context.WithoutCancel(ctx), ts.entry.Key, n, ts.cost); err != nil {
			r.log.Warn("record paid calls", "session", ts.entry.Key, "err", err)
		}
	}
	var s *failover.SummaryError
	var f *failover.Failure
	var text string
	switch {
	case isOverflow(err):
		text = notices.FailureText(&failover.Failure{Reason: classify.ReasonContextOverflow})
	case errors.As(err, &s):
		text = notices.UserFailure(s, now)
		// V4: every model down, or the idle breaker stopping a turn that found
		// nothing healthy, is an incident for the admin.
		allDown := s.Stop == nil || errors.Is(s.Stop, failover.ErrBreakerTripped)
		if allDown && ts.sel.source != failover.SourceUser && ts.sel.source != failover.SourceLegacy {
			r.report(ctx, ts, s, now)
		}
	case errors.As(err, &f):
		text = notices.FailureText(f)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		text = "the request was cancelled or timed out; please try again"
	default:
		r.log.Warn("turn failed", "session", ts.entry.Key, "err", redact.Preview(err.Error(), 200))
		text = "the request failed; please try again"
	}
	r.answer(ctx, ts, reply(ts.in, adapters.KindError, text))
}

// closeIncident ends the V4 incident (/recover brought a model back).
func (r *Router) closeIncident(ctx context.Context) {
	r.incidentMu.Lock()
	defer r.incidentMu.Unlock()
	if err := r.st.endIncident(ctx); err != nil {
		r.log.Warn("close incident", "err", err)
		return
	}
	r.incidentOpen = false
}

// report posts the V4 admin report once per incident (until a turn succeeds).
func (r *Router) report(ctx context.Context, ts *turnState, s *failover.SummaryError, now time.Time) {
	channel, replyTo, ok := r.adminTarget()
	if !ok {
		return
	}
	r.incidentMu.Lock()
	claimed, err := r.st.openIncident(ctx, now)
	if err != nil {
		r.log.Warn("open incident", "err", err)
		claimed = !r.incidentOpen // the database is unwell: fall back to this process's view
	}
	r.incidentOpen = true
	r.incidentMu.Unlock()
	if !claimed {
		return // this incident was already reported (here, before a restart, or by a replica)
	}
	lines := notices.LinesFromSummary(s)
	r.send(ctx, adapters.Outbound{Kind: adapters.KindReport, Channel: channel, ReplyTo: replyTo, SessionKey: ts.entry.Key,
		Text: notices.AdminReport(lines, ts.entry.Key, now)})
}

// noticeFields is the notice state a successful turn stores (N3): none for a
// turn that moved models only for its images (I5).
func noticeFields(next notices.State, imageDetour bool) map[string]any {
	if imageDetour {
		return nil
	}
	return map[string]any{"notice_selected": next.Selected, "notice_active": next.Active, "notice_reason": string(next.Reason)}
}

// imageNoticeBase is the notice state an image detour is told against: the
// requested model answering, so the fallback notice is due on every such turn
// whatever the session's stored state (I5).
func imageNoticeBase(next notices.State) notices.State {
	return notices.State{Selected: next.Selected, Active: next.Selected}
}
