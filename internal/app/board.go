package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/detourbot/detour/adapters/discord"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/health"
	"github.com/detourbot/detour/internal/healthdb"
	"github.com/detourbot/detour/sessions"
)

// The live health board (issue 38): the channels that show it (Slack's Home
// tab, Discord's status message) get the board function, and are told when
// the board changed. A change is looked for after turns (the router's
// observer nudges) and every boardPoll (another replica's turns, a cooldown
// that ended, a /recover), at most once per boardPace, by comparing the
// board's fingerprint: what it shows, not when it was computed. The pace is
// kept on the injected clock (the platforms' fakes count their windows on it).

// boardShower is a channel that shows the health board.
type boardShower interface {
	SetBoard(fn func(ctx context.Context, user string) (health.Board, error))
	// BoardChanged shows the board again where it is shown; it returns when
	// done or when ctx ends.
	BoardChanged(ctx context.Context)
}

// Pacing of the board's change detection (variables: tests shorten them).
var (
	boardPace = 2 * time.Second  // the least time between two looks
	boardPoll = 30 * time.Second // the most time between two looks
)

// boardFeed computes the board and tells the channels of its changes.
type boardFeed struct {
	db        *gorm.DB
	clock     failover.Clock
	log       *slog.Logger
	providers []health.Provider
	policy    failover.Policy
	admins    []string
	shows     []boardShower

	nudge  chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	// The state read last, reused for boardReuse: a burst of Home tabs, or one
	// change shown to many people, reads the database once.
	mu     sync.Mutex
	st     health.State
	readAt time.Time // real time; zero = none
}

// boardReuse is how long a state read is reused.
const boardReuse = time.Second

// wireBoard gives the board to the channels that show it and starts looking
// for its changes (until stopBoard); it returns the router's observer, which
// also nudges the feed after each turn. Without such a channel it does nothing.
func (s *System) wireBoard(cfg *config.Config, clock failover.Clock, next sessions.Observer) sessions.Observer {
	var shows []boardShower
	for _, a := range s.Adapters {
		if b, ok := a.(boardShower); ok {
			shows = append(shows, b)
		}
	}
	if len(shows) == 0 {
		return next
	}
	f := &boardFeed{db: s.DB, clock: clock, log: s.log, providers: healthdb.Providers(cfg), policy: cfg.Policy,
		admins: slices.Clone(cfg.Admin.Users), shows: shows, nudge: make(chan struct{}, 1), done: make(chan struct{})}
	for _, b := range shows {
		b.SetBoard(f.board)
		// Discord keeps one status message in its admin channel.
		if sc, ok := b.(interface{ SetStatusChannel(id string) }); ok {
			if ch, id, ok := strings.Cut(cfg.Admin.Channel, ":"); ok && ch == discord.Name {
				sc.SetStatusChannel(id)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go f.run(ctx)
	s.board = f
	return boardObserver{next: next, feed: f}
}

// stopBoard stops looking for changes and waits for the feed to end.
func (s *System) stopBoard() {
	if s.board == nil {
		return
	}
	s.board.cancel()
	<-s.board.done
	s.board = nil
}

// board computes the board user ("slack:U…", "discord:…"; "" = everyone's) sees.
func (f *boardFeed) board(ctx context.Context, user string) (health.Board, error) {
	st, err := f.state(ctx)
	if err != nil {
		return health.Board{}, err
	}
	admin := user == health.AdminChannel || (user != "" && slices.Contains(f.admins, user))
	return health.Build(st, admin), nil
}

// state reads the board's state, or reuses one read within boardReuse.
func (f *boardFeed) state(ctx context.Context) (health.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.readAt.IsZero() && time.Since(f.readAt) < boardReuse {
		return f.st, nil
	}
	st, err := healthdb.Read(ctx, f.db, f.providers, f.policy, f.clock.Now())
	if err != nil {
		return st, err
	}
	f.st, f.readAt = st, time.Now()
	return st, nil
}

// fresh forgets the state read last, so the next look reads the database.
func (f *boardFeed) fresh() {
	f.mu.Lock()
	f.readAt = time.Time{}
	f.mu.Unlock()
}

// fingerprint is what the board shows, without the moment it was computed and
// what moves with every turn (spend, a key's last use, an open period's length).
func fingerprint(b health.Board) string {
	b.At, b.Today = time.Time{}, nil
	if b.AllDown != nil {
		b.AllDown = &health.Period{Since: b.AllDown.Since}
	}
	b.Providers = slices.Clone(b.Providers)
	for i := range b.Providers {
		b.Providers[i].Keys = slices.Clone(b.Providers[i].Keys)
		for j := range b.Providers[i].Keys {
			b.Providers[i].Keys[j].LastUsed = time.Time{}
		}
	}
	b.Timeline = slices.Clone(b.Timeline)
	for i := range b.Timeline {
		if b.Timeline[i].Ongoing {
			b.Timeline[i].Seconds = 0
		}
	}
	js, _ := json.Marshal(b)
	return string(js)
}

func (f *boardFeed) run(ctx context.Context) {
	defer close(f.done)
	last := ""
	var shown time.Time // f.clock's time when the last look ended
	for first := true; ; first = false {
		if !first {
			// Wait for a nudge or the poll. The poll is a backstop on real
			// time: a test's clock may stand still, or run ahead at each
			// Sleep, and neither must make the feed look in a loop.
			t := time.NewTimer(boardPoll)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-f.nudge:
			case <-t.C:
			}
			t.Stop()
			// At most one look per boardPace on the injected clock, counted
			// from the end of the last (its edits and publishes): what the
			// platforms' windows count is what the channels send.
			if wait := boardPace - f.clock.Now().Sub(shown); wait > 0 {
				if f.clock.Sleep(ctx, wait) != nil {
					return
				}
			}
		}
		f.fresh() // a look reads what the database holds now
		b, err := f.board(ctx, "")
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			f.log.Warn("health board: the state could not be read", "err", err)
		} else if fp := fingerprint(b); fp != last {
			// The first look shows it too: Discord's status message is
			// posted (or brought up to date) at start.
			// Each channel at its own pace (Slack's Home tabs may take a
			// while within views.publish's window): none waits for another.
			var wg sync.WaitGroup
			for _, s := range f.shows {
				wg.Go(func() { s.BoardChanged(ctx) })
			}
			wg.Wait()
			last = fp
		}
		shown = f.clock.Now()
	}
}

// poke asks the feed to look for a change; it never blocks a turn.
func (f *boardFeed) poke() {
	select {
	case f.nudge <- struct{}{}:
	default:
	}
}

// boardObserver passes what turns do to the next observer (the metrics) and
// pokes the feed after each turn and each fallback.
type boardObserver struct {
	next sessions.Observer
	feed *boardFeed
}

func (o boardObserver) Attempt(a failover.AttemptRecord) {
	if o.next != nil {
		o.next.Attempt(a)
	}
}

func (o boardObserver) Fallback(from, to string, reason classify.Reason, status int) {
	if o.next != nil {
		o.next.Fallback(from, to, reason, status)
	}
	o.feed.poke()
}

func (o boardObserver) GuardRejected(guard string) {
	if o.next != nil {
		o.next.GuardRejected(guard)
	}
}

func (o boardObserver) TurnDone(t sessions.TurnReport) {
	if o.next != nil {
		o.next.TurnDone(t)
	}
	o.feed.poke()
}
