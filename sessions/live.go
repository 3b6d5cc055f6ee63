package sessions

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/failover"
)

// liveTurn is one turn's live reply: the progress indicator (L1) and the reply
// that grows as the model writes it (L2), replaced when the attempt that wrote
// it fails and another answers (L3), below the fallback notice (A5). Adapters
// without the capabilities get none of it, and the router posts the whole
// answer once; so does the zero liveTurn (a /compact's summary call).
type liveTurn struct {
	in       adapters.Inbound
	log      *slog.Logger
	ind      adapters.Indicator // nil: no progress shown
	streamer adapters.Streamer  // nil: no streaming
	// notice is the fallback notice due when c answers ("" = none, A5).
	notice func(c failover.Candidate) string

	mu      sync.Mutex
	stream  adapters.Stream // started at the first text of any attempt
	text    strings.Builder // the current attempt's text so far
	cand    failover.Candidate
	fresh   bool   // the current attempt has shown nothing yet
	noticed string // the notice the stream put above the answer
	broken  bool   // the stream failed: the answer is posted whole
}

// startLive starts the progress display of a turn and prepares its stream, as the
// channel's adapter and the configuration allow.
func (r *Router) startLive(ctx context.Context, in adapters.Inbound) *liveTurn {
	l := &liveTurn{in: in, log: r.log}
	r.mu.Lock()
	a := r.adapters[in.Channel]
	r.mu.Unlock()
	if p, ok := a.(adapters.Progress); ok && !r.cfg.NoProgress[in.Channel] {
		l.ind = p.StartProgress(ctx, in)
	}
	if s, ok := a.(adapters.Streamer); ok && !r.cfg.NoStream[in.Channel] {
		l.streamer = s
	}
	return l
}

// waiting shows what the turn waits for during a provider's stated wait (R6, L1).
func (l *liveTurn) waiting(c failover.Candidate, d time.Duration, f failover.Failure) {
	l.mu.Lock()
	ind := l.ind
	l.mu.Unlock()
	if ind != nil {
		ind.Status(fmt.Sprintf("waiting %s for %s: %s", d.Round(time.Second), c.Provider, f.Reason))
	}
}

// beginAttempt starts attempt c's text: what an earlier attempt showed is
// replaced by this one's first words (L3).
func (l *liveTurn) beginAttempt(c failover.Candidate) {
	l.mu.Lock()
	l.text.Reset()
	l.cand, l.fresh = c, true
	l.mu.Unlock()
}

// delta adds the model's next words (called from the LLM client's stream). An
// attempt's first words come below its fallback notice, when one is due, and
// anything an earlier attempt showed is taken down first (A5).
func (l *liveTurn) delta(ctx context.Context) func(string) {
	if l.streamer == nil {
		return nil
	}
	return func(d string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.broken || d == "" {
			return
		}
		l.text.WriteString(d)
		if l.stream == nil {
			s, err := l.streamer.StartStream(ctx, l.in)
			if err != nil {
				l.log.Warn("streaming refused; the answer is posted whole", "session", l.in.SessionKey, "err", err)
				l.broken = true
				return
			}
			l.stream = s
		}
		if l.fresh {
			l.fresh = false
			if n := l.notice(l.cand); n != "" && n != l.noticed {
				lead := reply(l.in, adapters.KindNotice, n)
				if err := l.stream.Restart(ctx, &lead); err != nil {
					l.log.Warn("stream restart failed; the answer is posted whole", "session", l.in.SessionKey, "err", err)
					l.broken = true
					return
				}
				l.noticed = n
			}
		}
		if err := l.stream.Update(ctx, l.text.String()); err != nil {
			l.log.Warn("stream update failed; the answer is posted whole", "session", l.in.SessionKey, "err", err)
			l.broken = true
		}
	}
}

// noticeWith sets how the turn learns which notice a candidate's answer owes.
func (l *liveTurn) noticeWith(f func(failover.Candidate) string) {
	l.mu.Lock()
	l.notice = f
	l.mu.Unlock()
}

// noticedText is the notice the stream already put above the answer ("" = none).
func (l *liveTurn) noticedText() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.noticed
}

// finish ends the live reply with out (the answer or an error): the stream, when
// one was started, is replaced by it; otherwise the caller posts out itself
// (handled is false). The progress display stops first.
func (l *liveTurn) finish(ctx context.Context, out adapters.Outbound) (handled bool) {
	l.stop()
	l.mu.Lock()
	s := l.stream
	l.stream = nil
	l.mu.Unlock()
	if s == nil {
		return false
	}
	if err := s.Finish(ctx, out); err != nil {
		// Better shown twice than lost: the caller posts it whole.
		l.log.Warn("finishing the streamed reply failed; posting it whole", "session", l.in.SessionKey, "err", err)
		return false
	}
	return true
}

// stop clears the progress display (once).
func (l *liveTurn) stop() {
	l.mu.Lock()
	ind := l.ind
	l.ind = nil
	l.mu.Unlock()
	if ind != nil {
		ind.Stop()
	}
}
