// Package live is what every chat platform shares to show a reply while the
// model writes it, and to keep within the platform's limits doing so (SPEC L1-L3,
// A5):
//
//   - Reply, the growing message (adapters.Stream): the newest text wins, writes
//     are throttled, text that no longer extends what is shown replaces it in
//     place, and Finish replaces everything with the final message;
//   - Indicator, the progress display refreshed while a turn runs;
//   - Lanes, the per-key ordered worker (a session's turns, a channel's events);
//   - Pauses and Window, the bookkeeping after a 429: no call before a time, and
//     at most so many calls in any minute.
//
// A platform supplies a Surface (post, delete, its ordinary send) and either
// in-place edits (Editor) or a native append (Appender), with its sizes in
// Options, and nothing else.
package live

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"

	"github.com/detourbot/detour/adapters"
)

// ErrGone, from an Editor or Appender, says the message can no longer be
// changed (someone deleted it, its stream ended): the reply shows that part anew.
var ErrGone = errors.New("live: the message can no longer be changed")

// Surface is what a platform offers a growing reply. It also implements
// Editor, Appender or both.
type Surface interface {
	// Post shows text as a new message below the reply's earlier ones; index 0
	// is the reply's first message. It returns the message's id.
	Post(ctx context.Context, index int, text string) (id string, err error)
	// Delete removes a message; one already gone is no error.
	Delete(ctx context.Context, id string) error
	// Send posts out as the platform's ordinary message: the final answer when
	// nothing was shown (or what was shown could not be brought to it), and a
	// lead such as the fallback notice.
	Send(ctx context.Context, out adapters.Outbound) error
}

// Editor replaces a message's text in place (Discord, a terminal).
type Editor interface {
	Edit(ctx context.Context, id, text string) error
}

// Appender adds to a message that is still being written (Slack's chat
// streaming methods, a terminal). A message posted by a surface with an
// Appender is open until Stop.
type Appender interface {
	Append(ctx context.Context, id, more string) error
	// Stop ends the message's writing, adding more first.
	Stop(ctx context.Context, id, more string) error
}

// Options are a platform's sizes and pace.
type Options struct {
	// Limit is how much one message holds, counted by Length (default: runes);
	// longer text continues in further messages (adapters.Split). 0 = no limit.
	Limit  int
	Length func(string) int
	// Every is the least time between two writes while the reply grows (the
	// first text goes at once; Finish does not wait). 0 = every update at once.
	Every time.Duration
	Now   func() time.Time
	Sleep func(context.Context, time.Duration) error
	// Render turns text of a kind into what the platform shows (nil: as is).
	Render func(kind adapters.Kind, text string) string
	// Whole: the platform cannot grow a reply here; Finish sends it whole.
	Whole bool
	// Inline applies every call in the caller's goroutine (Run is not needed).
	Inline bool
	Log    *slog.Logger
}

type part struct {
	id, text string
	open     bool // still being written (Appender)
}

// Reply is one growing reply. Update and Restart never wait for the platform:
// its writes run on Run's goroutine (or inline, Options.Inline).
type Reply struct {
	s   Surface
	ed  Editor
	ap  Appender
	o   Options
	lim *rate.Limiter // the throttle: a token bucket of one write per Every

	mu        sync.Mutex // with Inline, also held across every write
	want      string
	lead      []adapters.Outbound // Restart's, in order; nil entries = a bare restart
	final     *adapters.Outbound
	result    error
	kick      chan struct{}
	finishing context.Context // done once Finish is called: waits between writes end
	endWaits  context.CancelFunc
	done      chan struct{} // closed when Run ends
	cancel    context.CancelFunc

	// The writer's (Run's goroutine, or the caller under mu when Inline).
	parts  []part
	whole  bool // nothing will show until Finish
	broken bool // a write failed: no more until Finish
}

// New returns a reply drawn on s. Unless Options.Inline, run its Run on a
// goroutine the platform's adapter owns.
func New(s Surface, o Options) *Reply {
	if o.Length == nil {
		o.Length = utf8.RuneCountInString
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = adapters.Sleep
	}
	if o.Render == nil {
		o.Render = func(_ adapters.Kind, text string) string { return text }
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	r := &Reply{s: s, o: o, whole: o.Whole, kick: make(chan struct{}, 1), done: make(chan struct{}), cancel: func() {}}
	r.finishing, r.endWaits = context.WithCancel(context.Background())
	r.ed, _ = s.(Editor)
	r.ap, _ = s.(Appender)
	r.resetPace()
	return r
}

func (r *Reply) resetPace() {
	r.lim = rate.NewLimiter(rate.Inf, 1)
	if r.o.Every > 0 {
		r.lim = rate.NewLimiter(rate.Every(r.o.Every), 1)
	}
}

// Update shows text as the reply so far (adapters.Stream).
func (r *Reply) Update(ctx context.Context, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final != nil {
		return nil
	}
	r.want = text
	if r.o.Inline {
		r.show(ctx, text)
		return nil
	}
	r.wake()
	return nil
}

// Restart takes down what the reply shows (a failed attempt's text) and, when
// lead is not nil, sends it as a message of its own before any text that
// follows: the fallback notice above the fallback's answer (A5).
func (r *Reply) Restart(ctx context.Context, lead *adapters.Outbound) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final != nil {
		return nil
	}
	var l adapters.Outbound
	if lead != nil {
		l = *lead
	}
	r.want = ""
	if r.o.Inline {
		r.restart(ctx, l)
		return nil
	}
	r.lead = append(r.lead, l)
	r.wake()
	return nil
}

// Finish replaces what was shown with final and ends the reply; with nothing
// shown it sends final whole. It waits until that is done, or ctx ends.
func (r *Reply) Finish(ctx context.Context, final adapters.Outbound) error {
	r.mu.Lock()
	if r.final == nil {
		r.final = &final
		r.endWaits()
	}
	if r.o.Inline {
		defer r.mu.Unlock()
		return r.finish(ctx, final)
	}
	r.mu.Unlock()
	r.wake()
	select {
	case <-r.done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.result
	case <-ctx.Done():
		r.mu.Lock()
		r.cancel() // the caller gives up (and may post final itself): stop here
		r.mu.Unlock()
		return ctx.Err()
	}
}

func (r *Reply) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run writes the reply until Finish has been done or ctx ends.
func (r *Reply) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	r.cancel = cancel
	r.mu.Unlock()
	var result error
	defer func() {
		r.mu.Lock()
		r.result = result
		r.mu.Unlock()
		cancel()
		close(r.done)
	}()
	for {
		select {
		case <-r.kick:
		case <-ctx.Done():
			result = ctx.Err()
			return
		}
		for again := true; again; {
			r.mu.Lock()
			leads, final := r.lead, r.final
			r.lead = nil
			r.mu.Unlock()
			for _, l := range leads {
				r.restart(ctx, l)
			}
			if final != nil {
				result = r.finish(ctx, *final)
				return
			}
			r.mu.Lock()
			empty := r.want == ""
			r.mu.Unlock()
			if empty || !r.pace(ctx) {
				break
			}
			// The newest text: more may have come during the wait.
			r.mu.Lock()
			want := r.want
			again = len(r.lead) > 0 || r.final != nil
			r.mu.Unlock()
			if !again {
				r.show(context.WithValue(ctx, abandonKey{}, r.finishing), want)
			}
		}
	}
}

// pace waits for the throttle; false when Finish cut the wait short.
func (r *Reply) pace(ctx context.Context) bool {
	if r.whole || r.broken {
		return true
	}
	now := r.o.Now()
	d := r.lim.ReserveN(now, 1).DelayFrom(now)
	if d <= 0 {
		return true
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.finishing, cancel)()
	return r.o.Sleep(ctx, d) == nil
}

// show brings the messages up to text, unless the reply is whole or broken.
func (r *Reply) show(ctx context.Context, text string) {
	if r.whole || r.broken || text == "" {
		return
	}
	chunks := r.split(r.o.Render(adapters.KindReply, text))
	if len(chunks) == 0 {
		return // never take down what shows for blank text
	}
	err := r.apply(ctx, chunks, false)
	switch {
	case err == nil:
	case len(r.parts) == 0:
		r.whole = true
		r.o.Log.Debug("the reply cannot grow here; it is sent whole", "err", err)
	default:
		r.broken = true
		r.o.Log.Warn("the growing reply was not updated; the final answer replaces it", "err", err)
	}
}

// restart takes down what shows, then sends lead (when it has text).
func (r *Reply) restart(ctx context.Context, lead adapters.Outbound) {
	if err := r.truncate(ctx, 0); err != nil {
		r.o.Log.Warn("a replaced reply could not be taken down", "err", err)
	}
	r.broken = false
	r.resetPace()
	if strings.TrimSpace(lead.Text) == "" {
		return
	}
	if err := r.s.Send(ctx, lead); err != nil {
		r.o.Log.Warn("the message before the reply was not sent", "kind", lead.Kind, "err", err)
	}
}

// finish shows final in place. When it cannot, it takes down what shows and
// reports why, so the caller's whole post is the only version (L3).
func (r *Reply) finish(ctx context.Context, final adapters.Outbound) error {
	if r.whole || len(r.parts) == 0 {
		return r.s.Send(ctx, final)
	}
	chunks := r.split(r.o.Render(final.Kind, final.Text))
	if len(chunks) == 0 {
		if err := r.truncate(ctx, 0); err != nil {
			return err
		}
		return r.s.Send(ctx, final)
	}
	err := r.apply(ctx, chunks, true)
	if err != nil {
		if derr := r.truncate(ctx, 0); derr != nil {
			r.o.Log.Warn("a growing reply could not be taken down", "err", derr)
		}
	}
	return err
}

func (r *Reply) split(text string) []string {
	if r.o.Limit <= 0 {
		if strings.TrimSpace(text) == "" {
			return nil
		}
		return []string{text}
	}
	return adapters.Split(text, r.o.Limit, r.o.Length)
}

// apply makes the messages hold chunks: each part that differs is appended to
// (when it only grows and is still open), edited, or taken down with those
// after it and posted again; surplus parts go. Closing (every part but the
// last while growing, every part at the end) stops an open part.
func (r *Reply) apply(ctx context.Context, chunks []string, final bool) error {
	for i := 0; i < len(chunks); i++ {
		w, closing := chunks[i], final || i < len(chunks)-1
		if i >= len(r.parts) {
			id, err := r.s.Post(ctx, i, w)
			if err != nil {
				return err
			}
			r.parts = append(r.parts, part{id: id, text: w, open: r.ap != nil})
			if closing && r.ap != nil {
				if err := r.ap.Stop(ctx, id, ""); err != nil {
					return err
				}
				r.parts[i].open = false
			}
			continue
		}
		p := &r.parts[i]
		var err error
		switch {
		case p.text == w:
			if closing && p.open {
				err = r.ap.Stop(ctx, p.id, "")
			}
		case p.open && strings.HasPrefix(w, p.text):
			if closing {
				err = r.ap.Stop(ctx, p.id, w[len(p.text):])
			} else {
				err = r.ap.Append(ctx, p.id, w[len(p.text):])
			}
		case r.ed != nil:
			err = r.ed.Edit(ctx, p.id, w)
		default:
			err = ErrGone
		}
		if errors.Is(err, ErrGone) {
			// It cannot change in place: it and what follows are shown anew.
			if err := r.truncate(ctx, i); err != nil {
				return err
			}
			i--
			continue
		}
		if err != nil {
			return err
		}
		p.text, p.open = w, p.open && !closing
	}
	return r.truncate(ctx, len(chunks))
}

// truncate deletes the parts from i on, last first.
func (r *Reply) truncate(ctx context.Context, i int) error {
	for len(r.parts) > i {
		p := r.parts[len(r.parts)-1]
		if err := r.s.Delete(ctx, p.id); err != nil {
			return err
		}
		r.parts = r.parts[:len(r.parts)-1]
	}
	return nil
}

type abandonKey struct{}

// Abandoned is done once the reply a write belongs to is finishing: a write
// still waiting for a rate limit may give up (the final write follows), though
// one already sent must not be cut short. Nil for the final writes.
func Abandoned(ctx context.Context) context.Context {
	fin, _ := ctx.Value(abandonKey{}).(context.Context)
	return fin
}
