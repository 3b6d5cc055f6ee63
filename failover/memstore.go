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

var _ StateStore = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore { return &MemStore{m: make(map[string]ProfileState)} }

// Get returns the state of key, or the zero state with Key set when absent.
func (s *MemStore) Get(ctx context.Context, key string) (ProfileState, error) {
	if err := ctx.Err(); err != nil {
		return ProfileState{Key: key}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[key]
	if !ok {
		return ProfileState{Key: key}, nil
	}
	return st, nil
}

// Update applies fn to the current state of key and stores the result.
func (s *MemStore) Update(ctx context.Context, key string, fn func(*ProfileState)) (ProfileState, error) {
	if fn == nil {
		return ProfileState{Key: key}, errors.New("failover: memstore update: nil function")
	}
	if err := ctx.Err(); err != nil {
		return ProfileState{Key: key}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[key]
	if !ok {
		st = ProfileState{Key: key}
	}
	fn(&st)
	st.Key = key
	s.m[key] = st
	return st, nil
}

// Len returns the number of stored keys (for tests).
func (s *MemStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
