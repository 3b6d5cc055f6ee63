package adapters

import (
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Recent remembers up to a fixed number of keys (event ids, threads the bot takes
// part in), each with an optional value (a thread's channel), forgetting the
// least recently used first; with a TTL a key is also forgotten once it is older
// than the TTL. It is the one bounded memory the adapters use, so a chatty
// workspace cannot grow the process without bound.
type Recent struct {
	mu    sync.Mutex // makes Seen's look-then-add atomic
	cache *lru.Cache[string, recentEntry]
	ttl   time.Duration
	now   func() time.Time
}

type recentEntry struct {
	at    time.Time
	value string
}

// NewRecent returns a Recent holding at most size keys. ttl 0 = no expiry; now nil
// = time.Now.
func NewRecent(size int, ttl time.Duration, now func() time.Time) *Recent {
	if now == nil {
		now = time.Now
	}
	c, _ := lru.New[string, recentEntry](max(size, 1)) // only a size < 1 errs
	return &Recent{cache: c, ttl: ttl, now: now}
}

// Add records key as just seen, holding no value.
func (r *Recent) Add(key string) { r.Put(key, "") }

// Put records key as just seen, holding value.
func (r *Recent) Put(key, value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cache.Add(key, recentEntry{at: r.now(), value: value})
}

// Value returns the value key holds, and whether key is held (and not
// expired), refreshing its recency.
func (r *Recent) Value(key string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.get(key)
	return e.value, ok
}

// Has reports whether key is held (and not expired), refreshing its recency.
func (r *Recent) Has(key string) bool {
	_, ok := r.Value(key)
	return ok
}

// get returns key's entry, when it is held and not expired.
func (r *Recent) get(key string) (recentEntry, bool) {
	e, ok := r.cache.Get(key)
	if ok && r.ttl > 0 && r.now().Sub(e.at) >= r.ttl {
		r.cache.Remove(key)
		return recentEntry{}, false
	}
	return e, ok
}

// Seen reports whether key was already held; if not, it records it. An empty key
// is never held.
func (r *Recent) Seen(key string) bool {
	if key == "" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.get(key); ok {
		return true
	}
	r.cache.Add(key, recentEntry{at: r.now()})
	return false
}

// Len is the number of keys held (expired ones included until they are looked up
// or pushed out).
func (r *Recent) Len() int { return r.cache.Len() }
