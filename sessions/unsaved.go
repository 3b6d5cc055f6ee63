package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/internal/store"
)

// An answer is paid for before it is stored, so a database that fails at that
// moment (a Postgres restart, a disk that filled) must not lose it (M8): its
// exchange is written again a few times, with a growing pause on the router's
// clock; when that does not help, the answer is still delivered, with a notice
// that it is not saved yet, and the exchange is kept in this process's memory
// (bounded) and written when the database answers again: before the next
// message is handled, by a background writer that tries for about ten minutes,
// and once more when the router drains at shutdown. The exchanges are written
// in the order they were kept, so a conversation's history stays in order. They
// live in memory only: a process that exits while the database is down loses
// them, and the notice says so.
const (
	storeTries   = 4                      // writes of an exchange before the person is told
	storeBackoff = 250 * time.Millisecond // pause before the second write, doubling
	// The bound on exchanges kept in memory: beyond it an answer is delivered
	// with the notice that it cannot be kept.
	maxUnsaved      = 1000
	maxUnsavedBytes = 64 << 20
	// The background writer waits 1 s, then twice as long each time up to a
	// minute, for at most flushTries tries after the last success.
	flushFirst = time.Second
	flushMax   = time.Minute
	flushTries = 14
)

// unsaved holds the exchanges waiting for the database, oldest first.
type unsaved struct {
	mu      sync.Mutex
	items   []*exchange
	bytes   int
	running bool // a background writer runs

	write sync.Mutex // one writer at a time, so they land in order
}

// pending reports whether an exchange waits.
func (u *unsaved) pending() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.items) > 0
}

// keep adds x, unless the bound is reached (false).
func (u *unsaved) keep(x *exchange) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := x.size()
	if len(u.items) >= maxUnsaved || u.bytes+n > maxUnsavedBytes {
		return false
	}
	u.items = append(u.items, x)
	u.bytes += n
	return true
}

// delivered records that the answer of x, which waits, was delivered at: its
// event's row says so once written, so a redelivery does not post it again (M7).
func (u *unsaved) delivered(x *exchange, at time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	t := at.UTC()
	x.delivered = &t
}

// exchangeID names one exchange (M8).
func exchangeID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand does not fail on the systems Go supports
	return hex.EncodeToString(b)
}

// storeAnswer writes x, trying again storeTries times in all with a growing
// pause, since a database that just failed (a restart, a failover) is often
// back within a second. The writes do not end with ctx (a second SIGTERM): the
// answer was paid for. It returns the last error.
func (r *Router) storeAnswer(ctx context.Context, x exchange) error {
	ctx = context.WithoutCancel(ctx)
	wait := storeBackoff
	var err error
	for try := range storeTries {
		if err = r.st.storeExchange(ctx, x); err == nil {
			return nil
		}
		if try == storeTries-1 {
			break
		}
		r.log.Warn("store turn failed; trying again", "session", x.key, "try", try+1, "wait", wait, "err", err)
		_ = r.clock.Sleep(ctx, wait)
		wait *= 2
	}
	return err
}

// keepUnsaved keeps x until the database answers again and starts the
// background writer; false when the bound is reached, or when err, the
// write's failure, says the database is damaged: it will not take the
// exchange before someone restores it, and this process ends first.
func (r *Router) keepUnsaved(x *exchange, err error) bool {
	if store.Damaged(err) {
		return false
	}
	if !r.unsaved.keep(x) {
		r.log.Error("an answer that could not be stored cannot be kept either: too many wait already",
			"session", x.key, "limit", maxUnsaved)
		return false
	}
	r.flushLater()
	return true
}

// flushUnsaved writes the exchanges that wait, oldest first, until one fails
// (its error is returned; it and those after it keep waiting).
func (r *Router) flushUnsaved(ctx context.Context) error {
	u := &r.unsaved
	u.write.Lock()
	defer u.write.Unlock()
	for {
		u.mu.Lock()
		if len(u.items) == 0 {
			u.mu.Unlock()
			return nil
		}
		x := *u.items[0] // a copy: delivered may still change the kept one
		u.mu.Unlock()
		if err := r.st.storeExchange(context.WithoutCancel(ctx), x); err != nil {
			return fmt.Errorf("sessions: store an answer kept in memory: %w", err)
		}
		u.mu.Lock()
		u.items[0] = nil
		u.items = u.items[1:]
		u.bytes -= x.size()
		left := len(u.items)
		u.mu.Unlock()
		r.incidentMu.Lock()
		r.incidentOpen = false // the exchange ended it in the database
		r.incidentMu.Unlock()
		r.log.Info("an answer that could not be stored before is stored now", "session", x.key, "waiting", left)
	}
}

// flushLater starts the background writer unless one runs. It ends when every
// exchange is written, after flushTries failures in a row, or when the router
// closes.
func (r *Router) flushLater() {
	u := &r.unsaved
	u.mu.Lock()
	if u.running {
		u.mu.Unlock()
		return
	}
	u.running = true
	u.mu.Unlock()
	go func() {
		wait := flushFirst
		for try := 0; try < flushTries && r.clock.Sleep(r.base, wait) == nil; try++ {
			err := r.flushUnsaved(r.base)
			if err == nil {
				u.mu.Lock()
				done := len(u.items) == 0
				if done {
					u.running = false
				}
				u.mu.Unlock()
				if done {
					return
				}
				wait, try = flushFirst, -1 // more came meanwhile: start again
				continue
			}
			r.log.Warn("answers kept in memory still cannot be stored", "try", try+1, "next_in", min(2*wait, flushMax), "err", err)
			wait = min(2*wait, flushMax)
		}
		u.mu.Lock()
		u.running = false
		u.mu.Unlock()
	}()
}

// damagedRefusal is a turn's answer while the database is damaged (T7).
const damagedRefusal = "the bot cannot store this conversation: the database file is damaged; nothing was sent to a model. Please tell the bot's operator"

// noteDamaged records that err, a storage failure, found the database
// damaged, and tells the admin once (T7): every later turn stops before any
// paid call, since its answer could not be stored.
func (r *Router) noteDamaged(ctx context.Context, err error, session string) {
	if !store.Damaged(err) || !r.damaged.CompareAndSwap(false, true) {
		return
	}
	r.log.Error("the database is damaged: turns stop before any paid call until it is restored and the bot restarted", "err", err)
	channel, replyTo, ok := r.cfg.adminTarget()
	if !ok {
		return
	}
	r.send(context.WithoutCancel(ctx), adapters.Outbound{Kind: adapters.KindReport, Channel: channel, ReplyTo: replyTo, SessionKey: session,
		Text: "⚠️ detour: " + store.Explain(err).Error() + ". Answers can no longer be saved, so every turn now stops before any paid call. " +
			"Stop the bot, restore the database from a backup (docs/operations.md#backups), and start it again."})
}

// unsavedNotice tells the person their answer is not in the history (M8): why,
// and whether it is kept until the database is back.
func unsavedNotice(err error, kept bool) string {
	why := "the database failed"
	if p := store.Problem(err); p != "" {
		why = p
	}
	if kept {
		return "↪️ this answer is not saved yet (" + why + "): it is kept and added to the conversation's history when the database is back, unless the bot restarts first"
	}
	return "↪️ this answer could not be saved (" + why + "): the conversation's history will miss it"
}
