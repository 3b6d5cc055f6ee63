package sessions

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/commands"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/llm"
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
		taken, prior, err := r.st.claimEvent(ctx, in, r.clock.Now())
		switch {
		case err != nil:
			r.log.Warn("event de-duplication unavailable; answering anyway", "event", in.EventID, "err", err)
		case !taken:
			r.duplicate(ctx, w, prior)
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
	// tokensIn and tokensOut are the tokens of those paid calls, as /usage
	// counts them (U1: reported, else estimated), for /status (N5).
	tokensIn, tokensOut int64
	// imageDetour: the turn moved off the requested model only because it does
	// not take the message's images (I5): nothing about it is sticky.
	imageDetour bool
	cause       *failover.Failure // what moved this run off its first candidate
	w           *writer           // everything the message shows (W1)
	// id names the turn's exchange and its pending mark (M4, M8); began is
	// when the turn began; stored: its exchange is (the mark went with it);
	// kept: it waits in memory for the database, so its mark stays until it
	// is written.
	id           string
	began        time.Time
	stored, kept bool
	tally
}

var _ failover.Controller = (*turn)(nil)

func (c *Config) window(ref failover.ModelRef) int { return c.Models[ref].ContextWindow }

// runTurn answers one user message through the failover engine.
func (r *Router) runTurn(ctx context.Context, w *writer) {
	t := &turn{r: r, in: w.in, w: w, tally: newTally(), id: exchangeID()}
	defer t.finish()
	t.msg = r.readMessage(ctx, t.in) // I1-I4
	if !t.begin(ctx) {
		return
	}
	defer t.settle(ctx)
	if !t.prepare(ctx) {
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
	if r.damaged.Load() {
		_ = t.w.finish(ctx, reply(t.in, adapters.KindError, damagedRefusal)) // T7: its answer could not be stored
		return false
	}
	e, err := r.st.beginTurn(ctx, t.in.SessionKey, now)
	if err != nil {
		r.noteDamaged(ctx, err, t.in.SessionKey)
		r.log.Error("begin turn", "session", t.in.SessionKey, "err", err)
		_ = t.w.finish(ctx, reply(t.in, adapters.KindError, storageFailure("the session could not be loaded", err)))
		return false
	}
	t.entry, t.sel, t.cur, t.prev, t.switched, t.imageDetour = e, r.selectionFor(e, t.in.Channel), snapshot(e), nil, "", false
	if t.began.IsZero() {
		t.began = now
		if err := r.st.markPending(ctx, t.id, e.Key, now); err != nil {
			r.log.Warn("mark turn pending", "session", e.Key, "err", err) // replicas may then miss this exchange for a while (M4)
		}
	}
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
	t.awaitEarlier(ctx) // M4: an earlier turn's exchange, still being answered or written on another replica
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

// Waiting for an earlier turn of the session (M4): how long at most, and how
// often the database is asked. Turns of one session never overlap in one
// process; across replicas the later turn waits for the earlier one's
// exchange, as it would have in one process, but only this long: after
// that it answers without it, and says so.
const (
	earlierWait = 10 * time.Second
	earlierPoll = 250 * time.Millisecond
)

// earlierNotice tells the person their answer was written without an
// earlier exchange of the conversation (M4).
const earlierNotice = "↪️ an earlier message in this conversation is still being answered elsewhere, or its answer is not saved yet: " +
	"this answer was written without it"

// awaitEarlier waits, at most earlierWait, until no earlier turn of the
// session is pending on another replica (M4, issue 37), so the history read
// next holds its exchange; when the wait ends first, the person is told, and
// the marks waited for are dropped: the conversation went on without them (a
// crashed process leaves its mark behind), so no later turn waits again.
func (t *turn) awaitEarlier(ctx context.Context) {
	r, key := t.r, t.entry.Key
	deadline := r.clock.Now().Add(earlierWait)
	for {
		n, err := r.st.pendingBefore(ctx, t.id, key, t.began)
		if err != nil {
			r.log.Warn("read pending turns", "session", key, "err", err)
			return
		}
		if n == 0 {
			return
		}
		if !r.clock.Now().Before(deadline) {
			r.log.Warn("an earlier turn's exchange is still not stored; answering without it", "session", key, "pending", n, "waited", earlierWait)
			t.w.notice(ctx, earlierNotice)
			if err := r.st.dropPendingBefore(ctx, t.id, key, t.began); err != nil { // the next turns do not wait for them again
				r.log.Warn("drop pending turns", "session", key, "err", err)
			}
			return
		}
		if r.clock.Sleep(ctx, earlierPoll) != nil {
			return
		}
	}
}

// settle deletes the turn's pending mark unless its exchange holds it: stored
// (storeExchange deleted it) or kept in memory until it can be (M4).
func (t *turn) settle(ctx context.Context) {
	if t.stored || t.kept {
		return
	}
	if err := t.r.st.clearPending(context.WithoutCancel(ctx), t.id, t.r.clock.Now()); err != nil {
		t.r.log.Warn("clear pending turn", "session", t.in.SessionKey, "err", err)
	}
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
