package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/classify"
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
// a very long history is cut first.
func (r *Router) summaryInputTokens(ref failover.ModelRef) int {
	if w := r.window(ref); w > 0 {
		return max(w/2, 1000)
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
// far) and msgs. Its paid calls are the turn's (ts.attempts, the budgets).
func (r *Router) summarise(ctx context.Context, ts *turnState, prev string, msgs []Message) (string, error) {
	if len(msgs) == 0 && prev == "" {
		return "", nil
	}
	maxTok := r.cfg.SummaryMaxTokens
	prompt := []llm.Message{
		{Role: "system", Content: fmt.Sprintf(summaryInstruction, maxTok*3/4)},
		{Role: "user", Content: transcript(prev, msgs, r.summaryInputTokens(ts.sel.requested))},
	}
	sel := ts.sel
	req := r.baseRequest(ts, prompt)
	req.Chain = chainFor(sel)
	req.Spent = ts.spent
	before, spent := r.budgetHooks(ts.in.User)
	req.Hooks = failover.Hooks{
		OnAttempt: func(a failover.AttemptRecord) {
			r.onAttempt(ts, a)
			if a.Skipped == "" {
				ts.spent.Calls++ // B1: the run that follows counts it
				ts.spent.USD += a.CostUSD
			}
			if spent != nil {
				spent(a) // T6
			}
		},
		BeforeCall: before,
	}
	attempt := func(ctx context.Context, a failover.Attempt) (failover.Output, error) {
		c, err := r.clients(a.Candidate.Provider, a.Candidate.Profile)
		if err != nil || c == nil {
			return failover.Output{}, &failover.Failure{Reason: classify.ReasonAuth, Class: classify.ClassDeterministic,
				Message: "no client configured for this provider/profile", Provider: a.Candidate.Provider,
				Model: a.Candidate.Model, Profile: a.Candidate.Profile}
		}
		out, err := c.Chat(ctx, llm.Request{Model: a.Candidate.Model, Messages: prompt, MaxTokens: maxTok}, nil)
		return withEstimate(out, err, prompt), err
	}
	cost := ts.spent.USD
	res, err := r.engine.Run(ctx, req, attempt)
	ts.cost += ts.spent.USD - cost
	if err != nil {
		return "", err
	}
	return boundSummary(res.Output.Text, maxTok), nil
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
func (r *Router) summaryReserve() int {
	return r.cfg.SummaryMaxTokens + perMessage + EstimateTokens(summaryIntro)
}

// fitPrompt builds ts's prompt within the requested model's window (R15): the
// oldest turns that do not fit leave the history, replaced by a summary when
// summaries are on (R16), else dropped.
func (r *Router) fitPrompt(ctx context.Context, ts *turnState) {
	window := r.window(ts.sel.requested)
	msgs, dropped := buildPrompt(ts.parts, window)
	if dropped == 0 {
		ts.prompt = msgs
		return
	}
	if r.cfg.Summary {
		// Make room for the summary that will stand for what is dropped.
		if _, d := buildPrompt(ts.parts, max(window-r.summaryReserve(), 1)); d > dropped {
			dropped = d
		}
	}
	r.compactAt(ctx, ts, dropped, r.cfg.Summary)
	ts.prompt, _ = buildPrompt(ts.parts, window)
}

// compactAt drops the first n history messages of ts (whole turns), replacing
// them by a summary when summarise is set and a summary can be written (R16),
// and bumps the compaction count (P2). The prompt is not rebuilt.
func (r *Router) compactAt(ctx context.Context, ts *turnState, n int, summarise bool) {
	hist, e := ts.parts.hist, ts.entry
	n = min(n, len(hist))
	var keep uint64 // 0 = drop all
	if n < len(hist) {
		keep = hist[n].ID
	}
	var summary *string
	if summarise && n > 0 {
		s, err := r.summarise(ctx, ts, ts.parts.summary, hist[:n])
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
		ts.parts.summary = *summary
		e.Summary = *summary
	}
	ts.parts.hist = hist[n:]
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
	ts := &turnState{in: in, entry: e, sel: r.selectionFor(e, in.Channel), cur: snapshot(e), tally: newTally()}
	ts.parts = promptParts{system: r.systemPrompt(e.Key, in.Channel), summary: e.Summary, hist: hist}
	before := estimate(ts.parts.head()) + estimate(historyMessages(hist))
	s, err := r.summarise(ctx, ts, e.Summary, hist)
	r.recordAttempts(context.WithoutCancel(ctx), ts)
	r.storeUsage(in, ts.tally)
	if n := paidCalls(ts.attempts); n > 0 {
		if err := r.st.addPaidCalls(context.WithoutCancel(ctx), e.Key, n, ts.cost); err != nil {
			r.log.Warn("record paid calls", "session", e.Key, "err", err)
		}
	}
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
	after := estimate((promptParts{system: ts.parts.system, context: e.ThreadContext, summary: s}).head())
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
