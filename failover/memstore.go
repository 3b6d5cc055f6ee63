package failover

import (
	"context"
	"errors"
	"sync"
)

// MemStore is an in-memory StateStore for tests and single-process use. Update is
// atomic under one mutex, so concurrent runs never lose an update.
type MemStore struct {
	mu sync.Mutex
	m  map[string]ProfileState
}

var (
	_ StateStore   = (*MemStore)(nil)
	_ BatchUpdater = (*MemStore)(nil)
	_ BatchGetter  = (*MemStore)(nil)
)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore { return &MemStore{m: make(map[string]ProfileState)} }

// Get returns the state of key, or the zero state with Key set when absent.
func (s *MemStore) Get(ctx context.Context, key string) (ProfileState, error) {
	st, err := s.apply(ctx, []string{key}, nil)
	if err != nil {
		return ProfileState{Key: key}, err
	}
	return st[0], nil
}

// Update applies fn to the current state of key and stores the result.
func (s *MemStore) Update(ctx context.Context, key string, fn func(*ProfileState)) (ProfileState, error) {
	if fn == nil {
		return ProfileState{Key: key}, errNilUpdate
	}
	st, err := s.apply(ctx, []string{key}, func(_ int, st *ProfileState) { fn(st) })
	if err != nil {
		return ProfileState{Key: key}, err
	}
	return st[0], nil
}

var errNilUpdate = errors.New("failover: memstore update: nil function")

// GetMany returns the states of keys in order, under one lock.
func (s *MemStore) GetMany(ctx context.Context, keys []string) ([]ProfileState, error) {
	return s.apply(ctx, keys, nil)
}

// UpdateMany applies fn(i, st) to the current state of keys[i] and stores the
// results, all under one lock; a repeated key sees the earlier result. It returns
// the stored states in keys' order.
func (s *MemStore) UpdateMany(ctx context.Context, keys []string, fn func(i int, st *ProfileState)) ([]ProfileState, error) {
	if fn == nil {
		return nil, errNilUpdate
	}
	return s.apply(ctx, keys, fn)
}

// apply reads the states of keys under one lock and, when fn is not nil,
// stores what fn makes of each.
func (s *MemStore) apply(ctx context.Context, keys []string, fn func(i int, st *ProfileState)) ([]ProfileState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]ProfileState, len(keys))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, key := range keys {
		st, ok := s.m[key]
		if !ok {
			st = ProfileState{Key: key}
		}
		out[i] = st
		if fn != nil { // fn sees out[i]: a pointer to st would move every read's copy to the heap
			fn(i, &out[i])
			out[i].Key = key
			s.m[key] = out[i]
		}
	}
	return out, nil
}

// Len returns the number of stored keys (for tests).
func (s *MemStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
