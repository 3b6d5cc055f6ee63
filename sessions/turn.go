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

// process handles one inbound message: a command or a turn, each writing
// through the message's writer (W1). It never panics, and the message gets one
// final answer (a reply or an error) at most.
func (r *Router) process(ctx context.Context, in adapters.Inbound) {
	w := newWriter(in, r.adapter(in.Channel), r.log)
	defer func() { w.record(ctx, r.st, r.clock.Now()) }()
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("turn panicked", "session", in.SessionKey, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if given, _ := w.answered(); !given {
				_ = w.finish(ctx, reply(in, adapters.KindError, "internal error; the message was not processed"))
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
			w.claimed = true
		}
	}
	if n := len(in.Text); n > r.cfg.MaxMessageBytes {
		_ = w.finish(ctx, reply(in, adapters.KindError, fmt.Sprintf(
			"message too large (%d bytes; the limit is %d): nothing was stored or sent to a model; please shorten or split it", n, r.cfg.MaxMessageBytes)))
		return
	}
	if cmd, ok := commands.Parse(in.Text); ok {
		r.runCommand(ctx, w, cmd)
		return
	}
	if strings.TrimSpace(in.Text) == "" && len(in.Files) == 0 { // I4: files alone are a message
		_ = w.finish(ctx, reply(in, adapters.KindError, "empty message; nothing to answer"))
		return
	}
	w.live(ctx, !r.cfg.NoProgress[in.Channel], !r.cfg.NoStream[in.Channel]) // L1: progress within a second, before any call
	defer w.stop()
	r.runTurn(ctx, w)
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

// turn is one user message's way through the failover engine: its session
// and selection, its prompt, and what it paid. It is the engine's Controller
// for the turn's runs (T6, O2, O3, O6, R15); its trace only watches them
// (V1, R6, L1, the metrics). It is owned by the session's worker.
type turn struct {
	r        *Router
	in       adapters.Inbound
	entry    *Entry
	sel      selection
	cur      overrideState  // what this turn believes is stored
	prev     *overrideState // what BeforeFallback replaced (for O3), nil = nothing to roll back
	wroteFor failover.Candidate
	attempts []failover.AttemptRecord
	prompt   []llm.Message
	switched failover.ModelRef // O6: the live switch already handed to the engine
	// parts is what t.prompt is built from (R15 compaction drops from its history).
	parts promptParts
	msg   *message // the new message, its files read (I1-I4)
	// paid is every paid call of the turn, its runs and its summaries (R16):
	// each run counts it in the turn's budget (B1), /status shows it.
	paid failover.Spend
	// imageDetour: the turn moved off the requested model only because it does
	// not take the message's images (I5): nothing about it is sticky.
	imageDetour bool
	cause       *failover.Failure // what moved this run off its first candidate
	w           *writer           // everything the message shows (W1)
	tally
}

var _ failover.Controller = (*turn)(nil)

func (c *Config) window(ref failover.ModelRef) int { return c.Models[ref].ContextWindow }

// runTurn answers one user message through the failover engine.
func (r *Router) runTurn(ctx context.Context, w *writer) {
	t := &turn{r: r, in: w.in, w: w, tally: newTally()}
	defer t.finish()
	t.msg = r.readMessage(ctx, t.in) // I1-I4
	if !t.begin(ctx) || !t.prepare(ctx) {
		return
	}
	res, err := t.run(ctx)
	if ls := (*failover.LiveSwitchError)(nil); errors.As(err, &ls) {
		// O6: the user's new model is not in this chain; the turn starts again
		// on it, once, with what it read and paid so far.
		if !t.restart(ctx) {
			t.recordAttempts(context.WithoutCancel(ctx))
			return
		}
		res, err = t.run(ctx)
	}
	if err != nil {
		// A cancelled turn still paid for its calls: record them regardless.
		t.recordAttempts(context.WithoutCancel(ctx))
		t.fail(ctx, err)
		return
	}
	t.succeed(ctx, res)
}

// begin loads the session as the turn begins and selects its model: the
// override, or the S3 re-try of the origin when one is due. Its write is the
// turn's durable one before any paid call (T7), so a database that cannot be
// written (read-only, full disk) stops the turn before anything is paid for;
// the same statement takes a pending user switch (O4). On failure the person
// is told and begin reports false.
func (t *turn) begin(ctx context.Context) bool {
	r, now := t.r, t.r.clock.Now()
	e, err := r.st.beginTurn(ctx, t.in.SessionKey, now)
	if err != nil {
		r.log.Error("begin turn", "session", t.in.SessionKey, "err", err)
		_ = t.w.finish(ctx, reply(t.in, adapters.KindError, storageFailure("the session could not be loaded", err)))
		return false
	}
	t.entry, t.sel, t.cur, t.prev, t.switched, t.imageDetour = e, r.selectionFor(e, t.in.Channel), snapshot(e), nil, "", false
	if t.sel.source == failover.SourceAuto && (e.LastProbeAt == nil || !now.Before(e.LastProbeAt.Add(r.cfg.ProbeInterval))) {
		// S3: re-try the origin first with the real request; persist the probe time
		// first so a crash cannot make every restart probe again.
		t.sel.requested, t.sel.source = t.sel.selected, t.sel.selectedSource()
		at := now.UTC()
		e.LastProbeAt = &at
		if err := r.st.patch(ctx, e.Key, map[string]any{"last_probe_at": at}); err != nil {
			r.log.Error("persist probe time", "session", e.Key, "err", err)
			_ = t.w.finish(ctx, reply(t.in, adapters.KindError, storageFailure("the session could not be saved", err)))
			return false
		}
	}
	return true
}

// prepare builds the turn's prompt: the history and the conversation's
// earlier messages (H1), the message's images where a model takes them (I5)
// and its files' notes, fitted to the window (R15, R16). A message with
// nothing to answer is told so, and prepare reports false.
func (t *turn) prepare(ctx context.Context) bool {
	r, e := t.r, t.entry
	hist, err := r.st.history(ctx, e.Key)
	if err != nil {
		r.log.Error("load history", "session", e.Key, "err", err)
		_ = t.w.finish(ctx, reply(t.in, adapters.KindError, storageFailure("the history could not be loaded", err)))
		return false
	}
	t.parts = promptParts{system: r.systemPrompt(e.Key, t.in.Channel), summary: e.Summary, hist: hist}
	t.readEarlier(ctx)              // H1: the first turn in a conversation begun without the bot
	t.fitImages()                   // I5
	t.w.notice(ctx, t.msg.notice()) // once, before the answer (W1)
	if t.msg.empty() {
		_ = t.w.finish(ctx, reply(t.in, adapters.KindError, "nothing to answer: no file of the message could be read, and it has no text"))
		t.outcome = OutcomeError
		return false
	}
	t.parts.context, t.parts.user = e.ThreadContext, t.msg.llm()
	t.compact(ctx, toFit)
	return true
}

// restart starts the turn again, once, on the model the user switched to
// while it ran when the engine could not jump to it (O6): the session and its
// selection as they are now, the prompt fitted to that model's window; the
// message, the history and what the turn paid stay. Nothing was stored for
// the first run but its attempts, which the turn keeps.
func (t *turn) restart(ctx context.Context) bool {
	if !t.begin(ctx) {
		return false
	}
	t.fitImages() // I5: the new model may take no images
	t.parts.user = t.msg.llm()
	t.compact(ctx, toFit)
	return true
}

// run makes one engine run of the turn.
func (t *turn) run(ctx context.Context) (failover.Result, error) {
	t.cause = nil
	req := t.request(t.prompt)
	if len(t.msg.images) > 0 {
		req.Chain, req.Images, req.TakesImages = t.r.cfg.imageChain(t.sel), true, t.r.cfg.imageModels() // I5
	}
	req.Control = t
	// A stream outlives the attempt that starts it (a fallback may finish it):
	// it runs on the turn's ctx.
	return t.r.engine.Run(ctx, req, func(actx context.Context, a failover.Attempt) (failover.Output, error) {
		return t.call(ctx, actx, a)
	})
}

// call is one paid call of the turn's run, streamed into the live reply (L2, L3).
func (t *turn) call(turnCtx, ctx context.Context, a failover.Attempt) (failover.Output, error) {
	msgs := t.prompt
	if a.Kind == failover.AttemptNudged { // R13
		msgs = append(append([]llm.Message{}, msgs...), llm.Message{Role: "system", Content: "Your previous reply was empty. Answer the user's last message."})
	}
	t.w.attempt(t.fallbackNotice(a.Candidate))
	return t.r.chat(ctx, a.Candidate, msgs, t.r.cfg.MaxTokens, t.w.delta(turnCtx))
}

// chat asks c's model for an answer to msgs with its provider's and
// profile's client (llm.Unconfigured when there is none), its usage estimated
// when the provider reported none (U1).
func (r *Router) chat(ctx context.Context, c failover.Candidate, msgs []llm.Message, maxTokens int, onDelta func(string)) (failover.Output, error) {
	cl, err := r.clients(c.Provider, c.Profile)
	if err != nil || cl == nil {
		return failover.Output{}, llm.Unconfigured(c.Provider, c.Model, c.Profile)
	}
	out, err := cl.Chat(ctx, llm.Request{Model: c.Model, Messages: msgs, MaxTokens: maxTokens}, onDelta)
	return withEstimate(out, err, msgs), err
}

// probe sends the smallest request to c's model with c's profile (E1): how a
// provider that is down is checked, never with the conversation. Its tokens
// are counted like any call's, estimated when the provider reported none (U1).
func (r *Router) probe(ctx context.Context, c failover.Candidate) (failover.Output, error) {
	cl, err := r.clients(c.Provider, c.Profile)
	if err != nil || cl == nil {
		return failover.Output{}, llm.Unconfigured(c.Provider, c.Model, c.Profile)
	}
	out, err := cl.Check(ctx, c.Model)
	return withEstimate(out, err, []llm.Message{{Role: "user", Content: llm.ProbePrompt}}), err
}

// trace watches the turn's runs and its summaries': every attempt recorded
// and counted (V1, U2, B1, T6, the metrics), and the provider's stated waits
// shown as progress (R6, L1).
func (t *turn) trace() failover.Trace {
	return failover.Trace{OnAttempt: t.attempted, OnWait: t.w.waiting}
}

// BeforeCall runs before each paid call (failover.Controller): a model the
// user switched to meanwhile wins over the rest of the chain (O6), then the
// user's daily budget must allow the call (T6).
func (t *turn) BeforeCall(ctx context.Context, a failover.Attempt) error {
	if a.Number > 1 {
		if to, ok := t.liveSwitch(ctx); ok {
			return &failover.LiveSwitchError{To: to}
		}
	}
	return t.r.takeCall(ctx, t.in.User)
}

// liveSwitch reports the model a user switched this session to while the turn
// ran (/model or a session patch from another path: O4), if any.
func (t *turn) liveSwitch(ctx context.Context) (failover.ModelRef, bool) {
	e, err := t.r.st.load(ctx, t.entry.Key)
	if err != nil || !e.LiveSwitch {
		return "", false
	}
	to := e.override()
	if to == "" || e.source() == failover.SourceAuto {
		to = t.sel.base // /model default: back to the configured model
	}
	if to == t.sel.requested || to == t.switched {
		return "", false
	}
	t.switched = to
	return to, true
}

// BeforeFallback persists the fallback override before its attempt (O2). It
// writes only when the stored override is still what this turn loaded, so a
// /model typed meanwhile is never overwritten.
func (t *turn) BeforeFallback(ctx context.Context, _, to failover.Candidate, cause failover.Failure) error {
	t.cause = &cause // the same failure the result names (A5's notice)
	r := t.r
	if t.sel.source == failover.SourceUser || t.sel.source == failover.SourceLegacy {
		return nil // S4: a user override never falls back (BuildChain keeps it alone)
	}
	if cause.Reason == classify.ReasonImageInput {
		t.imageDetour = true // I5: this turn only; the session keeps its model
		return nil
	}
	next := overrideState{
		Provider: to.Provider, Model: to.Model, Source: string(failover.SourceAuto),
		Profile: to.Profile, ProfileSource: string(failover.SourceAuto), ProfileCompaction: t.entry.CompactionCount,
		Origin: string(t.sel.selected), Reason: string(cause.Reason), Status: cause.Status,
	}
	if failover.ModelRef(to.Ref()) == t.sel.selected {
		// K4: the chain came back to the selected model; no override is needed.
		next.Provider, next.Model, next.Source, next.Origin, next.Reason, next.Status = "", "", "", "", "", 0
	}
	fields := merge(next.modelFields(), next.profileFields())
	if t.cur.Source != string(failover.SourceAuto) {
		// The fallback begins now: the first origin probe is due one interval later (S3).
		fields["last_probe_at"] = r.clock.Now().UTC()
	}
	ok, err := r.st.casPatch(ctx, t.entry.Key, t.cur.modelMatch(), fields)
	if err != nil {
		r.log.Warn("persist fallback override", "session", t.entry.Key, "err", err)
		return nil // the answer matters more than the bookkeeping
	}
	if !ok {
		r.log.Info("session model changed meanwhile; fallback not persisted", "session", t.entry.Key, "to", to.Ref())
		t.prev = nil
		return nil
	}
	prev := t.cur
	t.prev, t.cur, t.wroteFor = &prev, next, to
	return nil
}

// AfterFailedFallback rolls back what BeforeFallback wrote, field group by
// field group, and only where the stored values still match the failed
// candidate (O3).
func (t *turn) AfterFailedFallback(ctx context.Context, c failover.Candidate, _ failover.Failure) {
	if t.prev == nil || t.wroteFor.Ref() != c.Ref() {
		return
	}
	prev, wrote := *t.prev, t.cur
	if _, err := t.r.st.casPatch(ctx, t.entry.Key, wrote.modelMatch(), prev.modelFields()); err != nil {
		t.r.log.Warn("roll back fallback override", "session", t.entry.Key, "err", err)
	}
	if _, err := t.r.st.casPatch(ctx, t.entry.Key, wrote.profileMatch(), prev.profileFields()); err != nil {
		t.r.log.Warn("roll back fallback profile", "session", t.entry.Key, "err", err)
	}
	t.cur, t.prev = prev, nil
}

// Compact shortens the history when the engine asks (R15): after a
// context_overflow, or after a timeout on a prompt that fills most of the
// window. What a summary of the dropped turns paid is reported, so the run
// counts it in the turn's budget (B1, R16).
func (t *turn) Compact(ctx context.Context, f failover.Failure) (failover.Compaction, bool) {
	why := afterTimeout
	if f.Reason == classify.ReasonContextOverflow {
		why = afterOverflow
	}
	before := t.paid
	ok := t.compact(ctx, why)
	spent := failover.Spend{Calls: t.paid.Calls - before.Calls, USD: t.paid.USD - before.USD}
	return failover.Compaction{PromptTokens: estimate(t.prompt), Spent: spent}, ok
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

// baseRequest is the engine request of a run of t with prompt: the chain's
// context (selection, profiles, pins, windows, prices), what the turn paid so
// far (B1) and the turn's trace; no controller.
func (t *turn) request(prompt []llm.Message) failover.Request {
	r := t.r
	e, sel := t.entry, t.sel
	req := failover.Request{
		SessionKey:   e.Key,
		Chain:        chainFor(sel),
		Primary:      sel.base,
		Source:       sel.source,
		Profiles:     r.cfg.Profiles,
		Order:        r.cfg.Order,
		PromptTokens: estimate(prompt),
		Spent:        t.paid,
		Trace:        t.trace(),
		Probe:        r.probe,
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

// attemptRows turns the turn's attempt records into rows (V1).
func (t *turn) attemptRows() []AttemptRow {
	r := t.r
	if len(t.attempts) == 0 {
		return nil
	}
	id := fmt.Sprintf("%d", r.clock.Now().UnixNano())
	rows := make([]AttemptRow, 0, len(t.attempts))
	for _, a := range t.attempts {
		row := AttemptRow{SessionKey: t.entry.Key, Turn: id, Model: a.Candidate.Ref(), Profile: a.Candidate.Profile,
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
func (t *turn) recordAttempts(ctx context.Context) {
	r := t.r
	if err := r.st.addAttempts(ctx, t.attemptRows()); err != nil {
		r.log.Warn("record attempts", "session", t.entry.Key, "err", err)
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

// addPaidCalls counts the paid calls of a turn that stored no exchange in its
// session (B1, /status), even when the turn was cancelled.
func (t *turn) addPaidCalls(ctx context.Context) {
	r := t.r
	if t.paid.Calls == 0 {
		return
	}
	if err := r.st.addPaidCalls(context.WithoutCancel(ctx), t.entry.Key, t.paid.Calls, t.paid.USD); err != nil {
		r.log.Warn("record paid calls", "session", t.entry.Key, "err", err)
	}
}

// succeed stores the exchange, then posts notices and the reply.
func (t *turn) succeed(ctx context.Context, res failover.Result) {
	r := t.r
	e, sel := t.entry, t.sel
	answered := failover.ModelRef(res.Candidate.Ref())
	prevNotice := e.notice()
	var cause *failover.Failure
	if res.FellBack {
		cause = res.Cause
	}
	next := noticeState(t, answered, cause)
	if t.imageDetour {
		prevNotice = imageNoticeBase(next) // I5: said on every such turn, kept by none
	}
	text := notices.ForChange(prevNotice, next)
	t.answered(answered, res.FellBack)
	returned := answered == sel.selected && t.cur.Source == string(failover.SourceAuto) && !t.imageDetour

	now := r.clock.Now().UTC()
	x := exchange{
		key: e.Key,
		messages: []Message{
			{SessionKey: e.Key, Role: "user", Content: t.msg.stored(), CreatedAt: now},
			{SessionKey: e.Key, Role: "assistant", Content: res.Output.Text, Model: string(answered), CreatedAt: now},
		},
		attempts:  t.attemptRows(),
		fields:    noticeFields(next, t.imageDetour),
		paidCalls: t.paid.Calls,
		tokensIn:  int64(res.Output.InputTokens),
		tokensOut: int64(res.Output.OutputTokens),
		returned:  returned,
		cost:      t.paid.USD,
		notice:    text,
	}
	// P2: pin the profile that served, unless the user pinned one.
	pinned := e.AuthProfileOverride == res.Candidate.Profile && e.AuthProfileOverrideSource == string(failover.SourceAuto) &&
		e.AuthProfileOverrideCompactionCount == e.CompactionCount && t.prev == nil && !returned
	if !pinned && res.Candidate.Profile != "" && e.AuthProfileOverrideSource != string(failover.SourceUser) && !t.imageDetour {
		x.pin, x.pinCompacted = res.Candidate.Profile, e.CompactionCount
	}
	out := reply(t.in, adapters.KindReply, res.Output.Text)
	out.Model = string(answered)
	x.id = exchangeID()
	if t.in.EventID != "" && t.w.claimed {
		x.event, x.answer = t.in.EventID, eventAnswer{session: e.Key, out: out}
	}
	if err := r.storeAnswer(ctx, x); err != nil {
		// M8: the answer was paid for: the person gets it, after a notice
		// (its own message, so the message still has one final answer) that
		// it is not saved yet; the exchange waits in memory for the database.
		r.log.Error("store turn", "session", e.Key, "err", err)
		kept := r.keepUnsaved(&x)
		if notices.Deliver(r.cfg.Notices, t.in.Direct) {
			t.w.notice(ctx, text) // once: a streamed answer may have shown it already (W1)
		}
		t.w.notice(ctx, unsavedNotice(err, kept))
		if t.w.finish(ctx, out) == nil && kept {
			r.unsaved.delivered(&x, r.clock.Now())
		}
		return
	}
	t.w.stored = x.event != ""
	r.incidentMu.Lock()
	r.incidentOpen = false // storeExchange ended it in the database
	r.incidentMu.Unlock()
	if notices.Deliver(r.cfg.Notices, t.in.Direct) {
		t.w.notice(ctx, text) // N4: its own message, before the reply; once (W1)
	}
	_ = t.w.finish(ctx, out)
	t.compactLater(out.Text) // R16: the next turns' summary, off this one's wait
}

// noticeState is the notice state of a turn answered by answered, moved off its
// first candidate by cause (nil = it was not).
func noticeState(t *turn, answered failover.ModelRef, cause *failover.Failure) notices.State {
	sel := t.sel
	if cause != nil && cause.Reason == classify.ReasonImageInput {
		// I5: moved off the requested model for its images, this turn only.
		return notices.State{Selected: string(sel.requested), Active: string(answered), Reason: classify.ReasonImageInput}
	}
	next := notices.State{Selected: string(sel.selected), Active: string(answered)}
	switch {
	case sel.source == failover.SourceUser || sel.source == failover.SourceLegacy:
		next.Selected = string(answered)
	case answered != sel.selected:
		next.Reason, next.Status = classify.Reason(t.cur.Reason), t.cur.Status
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
// the engine's goroutine, where BeforeFallback, which sets t.cause, runs too.
func (t *turn) fallbackNotice(c failover.Candidate) string {
	r := t.r
	next := noticeState(t, failover.ModelRef(c.Ref()), t.cause)
	if !next.OnFallback() || !notices.Deliver(r.cfg.Notices, t.in.Direct) {
		return ""
	}
	prev := t.entry.notice()
	if next.Reason == classify.ReasonImageInput {
		prev = imageNoticeBase(next)
	}
	return notices.ForChange(prev, next)
}

// fail tells the user why no answer came, and the admin when every model is down.
func (t *turn) fail(ctx context.Context, err error) {
	r := t.r
	now := r.clock.Now()
	t.failed(err)
	// Counted even when the turn was cancelled (a second SIGTERM): the
	// provider was paid either way.
	t.addPaidCalls(ctx)
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
		if allDown && t.sel.source != failover.SourceUser && t.sel.source != failover.SourceLegacy {
			t.report(ctx, s, now)
		}
	case errors.As(err, &f):
		text = notices.FailureText(f)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		text = "the request was cancelled or timed out; please try again"
	default:
		r.log.Warn("turn failed", "session", t.entry.Key, "err", redact.Preview(err.Error(), 200))
		text = "the request failed; please try again"
	}
	_ = t.w.finish(ctx, reply(t.in, adapters.KindError, text))
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
func (t *turn) report(ctx context.Context, s *failover.SummaryError, now time.Time) {
	r := t.r
	channel, replyTo, ok := r.cfg.adminTarget()
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
	r.send(ctx, adapters.Outbound{Kind: adapters.KindReport, Channel: channel, ReplyTo: replyTo, SessionKey: t.entry.Key,
		Text: notices.AdminReport(lines, t.entry.Key, now)})
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
