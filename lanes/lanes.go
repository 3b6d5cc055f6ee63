// Package lanes does work in order per key and keys in parallel: a chat
// session's messages one after another while other sessions go on, a
// channel's events in the order the platform sent them. An idle key costs no
// goroutine, and the work held is bounded.
package lanes

import (
	"context"
	"errors"
	"sync"
)

// Refusals of Add.
var (
	ErrFull    = errors.New("lanes: the key has too much work queued")
	ErrTooMany = errors.New("lanes: too many keys have work")
	ErrClosed  = errors.New("lanes: closed")
)

// Lanes does work in order per key (a session, a channel) and keys in
// parallel: the items of one key run one after another on one goroutine,
// which starts when the key gets work and ends when its queue is empty, so an
// idle key costs no goroutine. With a bound on running keys, a key that gets
// work while that many run waits in line without a goroutine, and a goroutine
// whose key has more work while others wait takes the next key in line and
// puts its own behind them, so a busy key does not starve the rest. It is
// safe for concurrent use.
type Lanes[T any] struct {
	do      func(key string, item T)
	perKey  int // most items queued per key (0 = no limit)
	maxKeys int // most keys with work (0 = no limit)
	running int // most keys running at once (0 = no limit)

	mu      sync.Mutex
	queues  map[string]*[]T
	waiting []string      // keys with work and no goroutine, oldest first
	workers int           // goroutines running keys
	pending int           // items queued or running
	idle    chan struct{} // closed when pending drops to 0
	closed  bool
}

// New returns lanes that run do for each item; perKey and maxKeys bound
// the work held, running the keys run at once (0 = no bound).
func New[T any](do func(key string, item T), perKey, maxKeys, running int) *Lanes[T] {
	return &Lanes[T]{do: do, perKey: perKey, maxKeys: maxKeys, running: running, queues: map[string]*[]T{}}
}

// Add queues item behind key's earlier items. It never blocks: over a bound it
// refuses the item (ErrFull, ErrTooMany), and after Close every item.
func (l *Lanes[T]) Add(key string, item T) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	q, has := l.queues[key]
	switch {
	case !has && l.maxKeys > 0 && len(l.queues) >= l.maxKeys:
		return ErrTooMany
	case has && l.perKey > 0 && len(*q) >= l.perKey:
		return ErrFull
	}
	if l.pending == 0 {
		l.idle = make(chan struct{})
	}
	l.pending++
	if !has {
		q = &[]T{}
		l.queues[key] = q
		if l.running > 0 && l.workers >= l.running {
			l.waiting = append(l.waiting, key)
		} else {
			l.workers++
			go l.work(key)
		}
	}
	*q = append(*q, item)
	return nil
}

// work runs key's items in order until its queue is empty, then the waiting
// keys' (when there is a bound). A key leaves the map in the same critical
// section that counts its last item done, so once Wait returns, Active is 0.
func (l *Lanes[T]) work(key string) {
	l.mu.Lock()
	for {
		q := l.queues[key]
		item := (*q)[0]
		var zero T
		(*q)[0] = zero
		*q = (*q)[1:]
		l.mu.Unlock()

		l.do(key, item)

		l.mu.Lock()
		if l.pending--; l.pending == 0 {
			close(l.idle)
		}
		more := len(*q) > 0
		if !more {
			delete(l.queues, key)
		}
		if len(l.waiting) > 0 {
			if more {
				l.waiting = append(l.waiting, key) // its turn again after the others
			}
			key, l.waiting = l.waiting[0], l.waiting[1:]
			continue
		}
		if !more {
			break
		}
	}
	l.workers--
	l.mu.Unlock()
}

// Close refuses new items; queued ones still run.
func (l *Lanes[T]) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

// Wait returns once no item is queued or running, or when ctx ends.
func (l *Lanes[T]) Wait(ctx context.Context) error {
	l.mu.Lock()
	idle, n := l.idle, l.pending
	l.mu.Unlock()
	if n == 0 {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Active is how many keys have work (queued or running).
func (l *Lanes[T]) Active() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queues)
}
