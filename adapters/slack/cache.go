package slack

import (
	"container/list"
	"sync"
	"time"
)

// ttlSet remembers keys for a while (event ids, message ids, trigger ids) so redelivered
// envelopes are handled once. It is bounded: the oldest keys go first when full.
type ttlSet struct {
	mu    sync.Mutex
	ttl   time.Duration
	max   int
	now   func() time.Time
	at    map[string]time.Time
	order *list.List // of string, oldest first
}

func newTTLSet(ttl time.Duration, max int, now func() time.Time) *ttlSet {
	return &ttlSet{ttl: ttl, max: max, now: now, at: map[string]time.Time{}, order: list.New()}
}

// Seen reports whether key was recorded within the TTL; if not, it records it now.
func (s *ttlSet) Seen(key string) bool {
	if key == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for e := s.order.Front(); e != nil; e = s.order.Front() {
		k := e.Value.(string)
		if now.Sub(s.at[k]) < s.ttl && s.order.Len() <= s.max {
			break
		}
		delete(s.at, k)
		s.order.Remove(e)
	}
	if t, ok := s.at[key]; ok && now.Sub(t) < s.ttl {
		return true
	}
	s.at[key] = now
	s.order.PushBack(key)
	return false
}

// Len is the number of keys held.
func (s *ttlSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

// lruSet is a bounded set of keys with least-recently-used eviction (active threads).
type lruSet struct {
	mu    sync.Mutex
	max   int
	items map[string]*list.Element
	order *list.List // front = most recent
}

func newLRUSet(max int) *lruSet {
	return &lruSet{max: max, items: map[string]*list.Element{}, order: list.New()}
}

// Add records key as most recently used, evicting the least recent beyond max.
func (s *lruSet) Add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[key]; ok {
		s.order.MoveToFront(e)
		return
	}
	s.items[key] = s.order.PushFront(key)
	for s.order.Len() > s.max {
		e := s.order.Back()
		delete(s.items, e.Value.(string))
		s.order.Remove(e)
	}
}

// Has reports whether key is held, refreshing it.
func (s *lruSet) Has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.items[key]
	if ok {
		s.order.MoveToFront(e)
	}
	return ok
}

// Len is the number of keys held.
func (s *lruSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}
