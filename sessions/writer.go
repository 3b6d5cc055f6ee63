package sessions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/failover"
)

// writer is everything one inbound message shows, in the shape of net/http's
// ResponseWriter: process builds it and hands it to the command or the turn
// that answers the message, which writes through it alone (W1). It keeps the
// invariants itself:
//   - progress shows from the turn's start to its answer (L1);
//   - the answer grows as the model writes it (L2); what a failed attempt
//     showed is replaced by the next attempt's first words (L3), below the
//     fallback notice that attempt owes (A5);
//   - each notice text is shown at most once per message;
//   - exactly one final answer or error is delivered, through the stream's
//     Finish or as a whole post (also when Finish fails); a second is refused;
//   - what was delivered is recorded once, for the message sent again (M3, M7).
//
// Its methods are safe for concurrent use: the growing reply is written from
// the LLM client's stream while the turn's goroutine waits for the engine.
type writer struct {
	in  adapters.Inbound
	out adapters.Adapter // nil: the message's channel has no adapter
	log *slog.Logger

	// claimed: this process took in.EventID (M3), so the final answer is
	// recorded under it; stored: the answer went into the event's row with the
	// exchange, in one transaction. Set by process and the turn.
	claimed, stored bool

	mu        sync.Mutex
	ind       adapters.Indicator // nil: no progress shown
	streamer  adapters.Streamer  // nil: no growing reply
	stream    adapters.Stream    // started at the first text of any attempt
	text      strings.Builder    // the current attempt's text so far
	owed      string             // the notice due above the current attempt's first text (A5)
	fresh     bool               // the current attempt has shown nothing yet
	broken    bool               // the stream failed: the answer is posted whole
	shown     []string           // the notice texts this message showed
	final     *adapters.Outbound // the final answer or error, once given
	delivered bool               // the adapter accepted final
}

// errAnswered: a message got its final answer already; a second is refused.
var errAnswered = errors.New("sessions: the message has its final answer already")

// newWriter is the writer of in's answer through out (nil: none).
func newWriter(in adapters.Inbound, out adapters.Adapter, log *slog.Logger) *writer {
	return &writer{in: in, out: out, log: log}
}

// live starts the progress display (L1) and prepares the growing reply (L2),
// as the channel's adapter can and the configuration allows.
func (w *writer) live(ctx context.Context, progress, stream bool) {
	if p, ok := w.out.(adapters.Progress); ok && progress {
		ind := p.StartProgress(ctx, w.in)
		w.mu.Lock()
		w.ind = ind
		w.mu.Unlock()
	}
	if s, ok := w.out.(adapters.Streamer); ok && stream {
		w.mu.Lock()
		w.streamer = s
		w.mu.Unlock()
	}
}

// send posts out through the adapter.
func (w *writer) send(ctx context.Context, out adapters.Outbound) error {
	return post(ctx, w.out, out, w.log)
}

// post sends out through a (nil: none), logging a failure.
func post(ctx context.Context, a adapters.Adapter, out adapters.Outbound, log *slog.Logger) error {
	if a == nil {
		log.Warn("no adapter for outbound message", "channel", out.Channel, "kind", out.Kind, "session", out.SessionKey)
		return errors.New("sessions: no adapter for channel " + out.Channel)
	}
	err := a.Send(ctx, out)
	if err != nil {
		log.Warn("send failed", "channel", out.Channel, "kind", out.Kind, "session", out.SessionKey, "err", err)
	}
	return err
}

// notice shows text as a notice of its own, before the answer (N4), unless
// this message showed it already (W1); "" shows nothing.
func (w *writer) notice(ctx context.Context, text string) {
	if text == "" || !w.mark(text) {
		return
	}
	_ = w.send(ctx, reply(w.in, adapters.KindNotice, text))
}

// mark records that notice text is shown, and reports whether it was not yet.
func (w *writer) mark(text string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if slices.Contains(w.shown, text) {
		return false
	}
	w.shown = append(w.shown, text)
	return true
}

// attempt begins an attempt's text, which owes notice above its first words
// ("" = none, A5): what an earlier attempt showed is replaced by them (L3).
func (w *writer) attempt(notice string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text.Reset()
	w.fresh, w.owed = true, notice
}

// delta is the attempt's stream of words (called from the LLM client), or nil
// when nothing grows here.
func (w *writer) delta(ctx context.Context) func(string) {
	w.mu.Lock()
	streaming := w.streamer != nil
	w.mu.Unlock()
	if !streaming {
		return nil
	}
	return func(d string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.broken || w.final != nil || d == "" {
			return
		}
		w.text.WriteString(d)
		if w.stream == nil {
			s, err := w.streamer.StartStream(ctx, w.in)
			if err != nil {
				w.log.Warn("streaming refused; the answer is posted whole", "session", w.in.SessionKey, "err", err)
				w.broken = true
				return
			}
			w.stream = s
		}
		if w.fresh {
			w.fresh = false
			if n := w.owed; n != "" && !slices.Contains(w.shown, n) {
				lead := reply(w.in, adapters.KindNotice, n)
				if err := w.stream.Restart(ctx, &lead); err != nil {
					w.log.Warn("stream restart failed; the answer is posted whole", "session", w.in.SessionKey, "err", err)
					w.broken = true
					return
				}
				w.shown = append(w.shown, n)
			}
		}
		if err := w.stream.Update(ctx, w.text.String()); err != nil {
			w.log.Warn("stream update failed; the answer is posted whole", "session", w.in.SessionKey, "err", err)
			w.broken = true
		}
	}
}

// waiting shows what the turn waits for during a provider's stated wait (R6, L1).
func (w *writer) waiting(c failover.Candidate, d time.Duration, f failover.Failure) {
	w.mu.Lock()
	ind := w.ind
	w.mu.Unlock()
	if ind != nil {
		ind.Status(fmt.Sprintf("waiting %s for %s: %s", d.Round(time.Second), c.Provider, f.Reason))
	}
}

// finish delivers the message's final answer or error, once: into the growing
// reply when one was started (replacing any partial text, L3), else, or when
// that fails, as a whole post. Progress stops first. A second final answer is
// refused with errAnswered.
func (w *writer) finish(ctx context.Context, out adapters.Outbound) error {
	w.mu.Lock()
	if w.final != nil {
		w.mu.Unlock()
		w.log.Error("a second final answer refused", "session", w.in.SessionKey, "kind", out.Kind)
		return errAnswered
	}
	w.final = &out
	s := w.stream
	w.stream = nil
	w.mu.Unlock()
	w.stop()
	err := w.deliver(ctx, s, out)
	w.mu.Lock()
	w.delivered = err == nil
	w.mu.Unlock()
	return err
}

// deliver puts out into stream s when there is one, else, or when that
// fails, posts it whole: better shown twice than lost.
func (w *writer) deliver(ctx context.Context, s adapters.Stream, out adapters.Outbound) error {
	if s != nil {
		err := s.Finish(ctx, out)
		if err == nil {
			return nil
		}
		w.log.Warn("finishing the streamed reply failed; posting it whole", "session", w.in.SessionKey, "err", err)
	}
	return w.send(ctx, out)
}

// answered reports whether the message has its final answer, and whether the
// adapter accepted it.
func (w *writer) answered() (given, delivered bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.final != nil, w.delivered
}

// stop clears the progress display (once).
func (w *writer) stop() {
	w.mu.Lock()
	ind := w.ind
	w.ind = nil
	w.mu.Unlock()
	if ind != nil {
		ind.Stop()
	}
}

// record keeps the final answer of a message whose event this process claimed,
// and whether it was delivered (M7): a message sent again with the same id
// gets it back instead of a new turn. An exchange's answer is already in the
// row (stored with the exchange, in one transaction); this write adds that it
// was delivered. Best effort: a database that fails here loses only the replay.
func (w *writer) record(ctx context.Context, st sessionStore, now time.Time) {
	w.mu.Lock()
	final, delivered := w.final, w.delivered
	w.mu.Unlock()
	if !w.claimed || final == nil {
		return
	}
	now = now.UTC()
	ctx = context.WithoutCancel(ctx)
	var err error
	switch {
	case final.Kind == adapters.KindError && !w.stored:
		// Only answers are kept under an id: a message that got an error may
		// be sent again with it once the cause is gone (issue 37, M2).
		err = st.releaseEvent(ctx, w.in.EventID)
	case w.stored && delivered:
		err = st.eventDelivered(ctx, w.in.EventID, now)
	case w.stored:
		return
	default:
		var at *time.Time
		if delivered {
			at = &now
		}
		err = st.answerEvent(ctx, w.in.EventID, eventAnswer{session: w.in.SessionKey, out: *final}, now, at)
	}
	if err != nil {
		w.log.Warn("record the answer of an event", "event", w.in.EventID, "session", w.in.SessionKey, "err", err)
	}
}
