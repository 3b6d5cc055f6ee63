package adapters

import (
	"testing"
	"time"
)

func TestRecent_TTL(t *testing.T) {
	now := time.Unix(0, 0)
	s := NewRecent(3, time.Minute, func() time.Time { return now })
	if s.Seen("a") || !s.Seen("a") {
		t.Fatal("the second sighting must be reported")
	}
	now = now.Add(2 * time.Minute)
	if s.Seen("a") {
		t.Fatal("an expired key was reported as seen")
	}
	for _, k := range []string{"b", "c", "d", "e"} {
		s.Seen(k)
	}
	if s.Len() != 3 {
		t.Fatalf("not bounded: %d keys", s.Len())
	}
	// Asked twice: the first call would hold it, the second would see it.
	if first, second := s.Seen(""), s.Seen(""); first || second {
		t.Fatal("an empty key is never held")
	}
}

func TestRecent_LeastRecentlyUsedGoesFirst(t *testing.T) {
	l := NewRecent(2, 0, nil)
	l.Add("x")
	l.Add("y")
	l.Has("x")
	l.Add("z") // evicts y
	if !l.Has("x") || l.Has("y") || !l.Has("z") || l.Len() != 2 {
		t.Fatal("eviction order wrong")
	}
}
