package sessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/commands"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/llm"
	"github.com/detourbot/detour/notices"
)

// Summaries (R16, R17): the turns compaction drops are replaced by a summary a
// model writes, so a long conversation keeps its thread. The summary call is a
// paid call like any other: it walks the session's chain through the engine
// (cooldowns, rotations, fallbacks, the process guard B2, the user's budget
// T6) and counts in the turn's budget (B1). When it fails, the turns are
// dropped as before.

// summaryInstruction asks for the summary; the words limit is a hint, the
// token cap the bound.
const summaryInstruction = "You summarise conversations. Write a short summary of the conversation below " +
	"for the assistant who continues it: the facts, decisions, open questions and what each person asked for. " +
	"Keep names and numbers. At most %d words. Write only the summary."

// summaryInputTokens bounds what is sent to be summarised: the oldest part of
// a very long history is cut first. What a compaction drops fitted in a
// prompt of the model's window, so the window less the instruction and the
// summary's own room takes all of it (down to the low mark, that is up to
// half the window and more: R16).
func (c *Config) summaryInputTokens(ref failover.ModelRef) int {
	if w := c.window(ref); w > 0 {
		return max(w-c.SummaryMaxTokens-EstimateTokens(summaryInstruction)-2*perMessage, 1000)
	}
	return 32000
}

// transcript renders history messages for the summary call, the newest kept
// when they pass maxTokens.
func transcript(prev string, msgs []Message, maxTokens int) string {
	lines := make([]string, 0, len(msgs)+1)
	for _, m := range msgs {
		who := "User"
		if m.Role == "assistant" {
			who = "Assistant"
		}
		lines = append(lines, who+": "+m.Content)
	}
	tokens, start := 0, len(lines)
	for start > 0 {
		t := EstimateTokens(lines[start-1]) + 1
		if tokens+t > maxTokens {
			break
		}
		tokens, start = tokens+t, start-1
	}
	out := strings.Join(lines[start:], "\n")
	if prev != "" {
		out = "(Summary of what came before: " + prev + ")\n" + out
	}
	return out
}

// summarise asks the session's chain for a summary of prev (the summary so
// far) and msgs. Its paid calls are the turn's (t.attempts, t.paid, the budgets).
func (t *turn) summarise(ctx context.Context, prev string, msgs []Message) (string, error) {
	r := t.r
	if len(msgs) == 0 && prev == "" {
		return "", nil
	}
	maxTok := r.cfg.SummaryMaxTokens
	prompt := []llm.Message{
		{Role: "system", Content: fmt.Sprintf(summaryInstruction, maxTok*3/4)},
		{Role: "user", Content: transcript(prev, msgs, r.cfg.summaryInputTokens(t.sel.requested))},
	}
	req := t.request(prompt)
	req.Control = summaryControl{t: t}
	res, err := r.engine.Run(ctx, req, func(ctx context.Context, a failover.Attempt) (failover.Output, error) {
		return r.chat(ctx, a.Candidate, prompt, maxTok, nil)
	})
	if err != nil {
		return "", err
	}
	return boundSummary(res.Output.Text, maxTok), nil
}

// summaryControl is the Controller of a summary's run (R16): the user's daily
// budget before each call (T6); it persists no fallback and compacts nothing.
type summaryControl struct {
	failover.NoControl
	t *turn
}

// BeforeCall takes the call from the user's daily budget (T6).
func (s summaryControl) BeforeCall(ctx context.Context, _ failover.Attempt) error {
	return s.t.r.takeCall(ctx, s.t.in.User)
}

// boundSummary keeps a summary within its token cap (a provider may ignore
// max_tokens).
func boundSummary(s string, maxTokens int) string {
	s = strings.TrimSpace(s)
	limit := int(float64(maxTokens) * charsPerToken / tokenMargin)
	if rs := []rune(s); len(rs) > limit {
		s = string(rs[:limit-1]) + "…"
	}
	return s
}

// summaryReserve is the room a summary takes in a prompt.
func (c *Config) summaryReserve() int {
	return c.SummaryMaxTokens + perMessage + EstimateTokens(summaryIntro)
}

// lowMark is the prompt a summary brings a conversation on ref down to (R16):
// compaction.target_ratio of its window, less the room of the summary itself.
func (c *Config) lowMark(ref failover.ModelRef) int {
	target := c.SummaryTarget
	if target <= 0 || target >= 1 {
		target = 0.5
	}
	return max(int(target*float64(c.window(ref)))-c.summaryReserve(), 1)
}

// compactLater starts the summary the next turns will need, off the person's
// wait (R16): once the conversation would not fit its model's window within
// two more exchanges as long as this one, its oldest turns are summarised
// down to the low mark while the person reads the answer, and the next turn
// goes on meanwhile with the history as it is. At most one runs per session;
// a turn that finds its prompt too long waits for it rather than writing a
// second one.
func (t *turn) compactLater(answer string) {
	r := t.r
	window := r.cfg.window(t.sel.requested)
	if !r.cfg.Summary || window <= 0 {
		return
	}
	exchange := estimateMessage(t.parts.user) + EstimateTokens(answer) + perMessage
	stored := estimate(t.parts.head()) + histTokens(t.parts.hist) + exchange // this exchange is stored now
	if stored+2*exchange <= window {
		return
	}
	in, user := t.in, t.parts.user
	r.bg.start(r.base, t.entry.Key, func(ctx context.Context) { r.compactSession(ctx, in, user) })
}

// compactSession summarises the oldest turns of in's session down to the
// low mark (R16), sized for a next message like user. The summary is stored
// only if the session is still as it was read (no /reset, /new or other
// compaction meanwhile); its calls are the user's like any (T6, U1-U3).
func (r *Router) compactSession(ctx context.Context, in adapters.Inbound, user llm.Message) {
	e, err := r.st.load(ctx, in.SessionKey)
	if err != nil {
		r.log.Warn("summary after the answer: load the session", "session", in.SessionKey, "err", err)
		return
	}
	hist, err := r.st.history(ctx, e.Key)
	if err != nil {
		r.log.Warn("summary after the answer: load the history", "session", e.Key, "err", err)
		return
	}
	t := r.offTurn(in, e)
	t.parts = promptParts{system: r.systemPrompt(e.Key, in.Channel), context: e.ThreadContext, summary: e.Summary, hist: hist, user: user}
	_, n := buildPrompt(t.parts, r.cfg.lowMark(t.sel.requested))
	if n == 0 || n >= len(hist) {
		return // it fits, or nothing would be left: the next turn compacts as it must
	}
	s, err := t.summarise(ctx, e.Summary, hist[:n])
	t.recordAttempts(context.WithoutCancel(ctx))
	r.storeUsage(in, &t.tally)
	t.addPaidCalls(ctx)
	if err != nil || s == "" {
		r.log.Warn("summary after the answer not written; the next turn that needs room makes it", "session", e.Key, "err", err)
		return
	}
	stored, err := r.st.compactIf(context.WithoutCancel(ctx), e.Key, hist[n].ID, s, e.CompactionCount)
	switch {
	case err != nil:
		r.log.Warn("summary after the answer not stored", "session", e.Key, "err", err)
	case !stored:
		r.log.Info("summary after the answer dropped: the conversation changed meanwhile", "session", e.Key)
	}
}

// offTurn is a turn for calls made outside a message's turn (a summary after
// the answer, /compact): its session and selection; its writer shows nothing.
func (r *Router) offTurn(in adapters.Inbound, e *Entry) *turn {
	return &turn{r: r, in: in, entry: e, sel: r.selectionFor(e, in.Channel), cur: snapshot(e), tally: newTally(), w: newWriter(in, nil, r.log)}
}

// reloadHistory reads t's history and summary again, after a compaction
// that ran beside the turn.
func (t *turn) reloadHistory(ctx context.Context) {
	e, err := t.r.st.load(ctx, t.entry.Key)
	if err != nil {
		return
	}
	hist, err := t.r.st.history(ctx, e.Key)
	if err != nil {
		return
	}
	t.entry.Summary, t.entry.Summaries, t.entry.CompactionCount = e.Summary, e.Summaries, e.CompactionCount
	t.parts.summary, t.parts.hist = e.Summary, hist
}

// compaction is why a turn's history is shortened (R15).
type compaction uint8

const (
	toFit         compaction = iota // before sending: the oldest turns that do not fit the window
	afterOverflow                   // the provider found the prompt too long: the oldest half
	afterTimeout                    // a timeout on a prompt that fills the window: the oldest half, no summary
)

// compact shortens t's history for why and rebuilds t's prompt (R15): whole
// turns are dropped, oldest first, and replaced by a summary a model writes
// when summaries are on (R16), except after a timeout, when one more call to
// a slow provider would only add to the wait. It reports whether anything
// was dropped. This is the one place a turn's history is compacted.
func (t *turn) compact(ctx context.Context, why compaction) bool {
	r := t.r
	summarise := r.cfg.Summary && why != afterTimeout
	window := 0 // the prompt is rebuilt without a limit after the engine asked
	var n int
	if why == toFit {
		window = r.cfg.window(t.sel.requested)
		msgs, dropped := buildPrompt(t.parts, window)
		if dropped > 0 && r.bg.wait(ctx, t.entry.Key) {
			// A summary written after an earlier answer was still running:
			// it makes the room this turn needs, so none is written twice.
			t.reloadHistory(ctx)
			msgs, dropped = buildPrompt(t.parts, window)
		}
		if dropped == 0 {
			t.prompt = msgs
			return false
		}
		n = dropped
		if summarise {
			// R16: the summary brings the prompt down to the low mark, so it
			// covers many turns, not only the one that overflowed.
			if _, d := buildPrompt(t.parts, r.cfg.lowMark(t.sel.requested)); d > n {
				n = d
			}
		}
	} else {
		hist := t.parts.hist
		if len(hist) < 2 {
			return false
		}
		n = len(hist) / 2
		for n < len(hist) && hist[n].Role != "user" {
			n++ // whole turns: the kept part starts at a user message
		}
	}
	t.drop(ctx, n, summarise)
	t.prompt, _ = buildPrompt(t.parts, window)
	return true
}

// drop removes the first n history messages of t (whole turns), replacing
// them by a summary when summarise is set and one can be written (R16), and
// bumps the compaction count, which also releases the automatic profile pin
// (P2). The prompt is not rebuilt.
func (t *turn) drop(ctx context.Context, n int, summarise bool) {
	r, hist, e := t.r, t.parts.hist, t.entry
	n = min(n, len(hist))
	var keep uint64 // 0 = drop all
	if n < len(hist) {
		keep = hist[n].ID
	}
	var summary *string
	if summarise && n > 0 {
		s, err := t.summarise(ctx, t.parts.summary, hist[:n])
		if err != nil {
			r.log.Warn("summary not written; the oldest turns are dropped", "session", e.Key, "err", err)
		} else if s != "" {
			summary = &s
		}
	}
	if err := r.compact(ctx, e, keep, summary); err != nil {
		r.log.Warn("compact", "session", e.Key, "err", err)
	}
	if summary != nil {
		t.parts.summary = *summary
	}
	t.parts.hist = hist[n:]
}

// compact drops the history of e below message id keep (0 = all), stores
// summary when it is not nil (R16), and bumps the compaction count, which also
// releases the automatic profile pin (P2, R15).
func (r *Router) compact(ctx context.Context, e *Entry, keep uint64, summary *string) error {
	if err := r.st.compact(ctx, e.Key, keep, summary); err != nil {
		return err
	}
	e.CompactionCount++
	if summary != nil {
		e.Summary = *summary
		e.Summaries++
	}
	return nil
}

// CompactNow replaces the whole history of in's session by a summary (/compact,
// R17) and says what it did. Nothing changes when the summary cannot be
// written.
func (r *Router) CompactNow(ctx context.Context, in adapters.Inbound) (string, error) {
	e, err := r.st.load(ctx, in.SessionKey)
	if err != nil {
		return "", err
	}
	hist, err := r.st.history(ctx, e.Key)
	if err != nil {
		return "", err
	}
	turns := 0
	for _, m := range hist {
		if m.Role == "user" {
			turns++
		}
	}
	if len(hist) == 0 {
		return "nothing to compact: the conversation has no history yet", nil
	}
	t := r.offTurn(in, e)
	t.parts = promptParts{system: r.systemPrompt(e.Key, in.Channel), summary: e.Summary, hist: hist}
	before := estimate(t.parts.head()) + estimate(historyMessages(hist))
	s, err := t.summarise(ctx, e.Summary, hist)
	t.recordAttempts(context.WithoutCancel(ctx))
	r.storeUsage(in, &t.tally)
	t.addPaidCalls(ctx)
	if err != nil || s == "" {
		why := "the model wrote nothing"
		if err != nil {
			why = r.failureWords(err)
		}
		return "the conversation was not compacted: " + why + "; nothing was changed", nil
	}
	if err := r.compact(ctx, e, 0, &s); err != nil {
		return "", err
	}
	after := estimate((promptParts{system: t.parts.system, context: e.ThreadContext, summary: s}).head())
	return fmt.Sprintf("conversation compacted: %d turn(s) replaced by a summary (the history now takes about %s tokens, was %s)",
		turns, commands.Thousands(int64(after)), commands.Thousands(int64(before))), nil
}

// historyMessages is hist as prompt messages.
func historyMessages(hist []Message) []llm.Message {
	out := make([]llm.Message, len(hist))
	for i, m := range hist {
		out[i] = llm.Message{Role: m.Role, Content: m.Content}
	}
	return out
}

// failureWords says in plain words why a call that was not a turn failed.
func (r *Router) failureWords(err error) string {
	var s *failover.SummaryError
	var f *failover.Failure
	switch {
	case errors.As(err, &s):
		return notices.UserFailure(s, r.clock.Now())
	case errors.As(err, &f):
		return notices.FailureText(f)
	}
	return "the summary call failed"
}

// background runs the summaries written after an answer (R16): at most one
// per session at a time, each on the router's context, so Close stops them
// and Drain waits for them.
type background struct {
	log     *slog.Logger
	mu      sync.Mutex
	running map[string]chan struct{} // session key -> closed when its job ends
	wg      sync.WaitGroup
}

// start runs job for key unless one runs for it already.
func (b *background) start(ctx context.Context, key string, job func(context.Context)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.running[key]; ok {
		return
	}
	if b.running == nil {
		b.running = make(map[string]chan struct{})
	}
	done := make(chan struct{})
	b.running[key] = done
	b.wg.Add(1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				b.log.Error("summary after the answer panicked", "session", key, "panic", fmt.Sprint(p))
			}
			b.mu.Lock()
			delete(b.running, key)
			b.mu.Unlock()
			close(done)
			b.wg.Done()
		}()
		job(ctx)
	}()
}

// wait waits until key's job ends, if one runs, or ctx ends; it reports
// whether one ran.
func (b *background) wait(ctx context.Context, key string) bool {
	b.mu.Lock()
	done, ok := b.running[key]
	b.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	return true
}

// waitAll waits until every job has ended, or ctx ends.
func (b *background) waitAll(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
