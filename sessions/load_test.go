//go:build cgo

package sessions

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// 1,000 sessions × 5 messages at once through the real engine, llm client, fake
// LLM server and SQLite: every reply lands in its own session, in order, and the
// database never reports "database is locked".
func TestRouter_ManySessionsInOrder(t *testing.T) { testdb.Each(t, testRouter_ManySessionsInOrder) }

func testRouter_ManySessionsInOrder(t *testing.T, driver string) {
	sessions, perSession := 1000, 5
	if testing.Short() {
		sessions = 100
	}
	h := newHarness(t, driver)
	var wg sync.WaitGroup
	for s := 0; s < sessions; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("test:load:%d", s)
			for m := 0; m < perSession; m++ {
				h.r.Handle(context.Background(), adapters.Inbound{Channel: "test", SessionKey: key, Text: fmt.Sprintf("%s msg %d", key, m)})
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := h.r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	next := map[string]int{}
	for _, o := range h.rec.take() {
		if o.Kind != adapters.KindReply {
			t.Fatalf("non-reply outbound: %+v", o)
		}
		want := fmt.Sprintf("%s msg %d", o.SessionKey, next[o.SessionKey])
		if !strings.HasSuffix(o.Text, "you said: "+want) {
			t.Fatalf("session %s: reply %q, want the answer to %q (wrong session or order)", o.SessionKey, o.Text, want)
		}
		next[o.SessionKey]++
	}
	if len(next) != sessions {
		t.Fatalf("%d sessions answered, want %d", len(next), sessions)
	}
	for k, n := range next {
		if n != perSession {
			t.Fatalf("session %s got %d replies", k, n)
		}
	}
	if strings.Contains(h.logs.String(), "database is locked") {
		t.Fatal("database is locked")
	}
	var stored int64
	h.db.Model(&Message{}).Count(&stored)
	if stored != int64(2*sessions*perSession) {
		t.Fatalf("stored %d messages, want %d", stored, 2*sessions*perSession)
	}
	if h.r.Active() != 0 {
		t.Fatalf("%d session workers still alive after drain", h.r.Active())
	}
}

// An idle session costs no goroutine and (almost) no memory: its state lives in
// the database only.
func TestRouter_IdleSessionsCostNoGoroutine(t *testing.T) {
	testdb.Each(t, testRouter_IdleSessionsCostNoGoroutine)
}

func testRouter_IdleSessionsCostNoGoroutine(t *testing.T, driver string) {
	mem := map[string]*memLLM{}
	h := newHarness(t, driver, withMem(mem))
	expect(t, h.say("test:warm", "warm up"), "reply")
	const n = 500
	perSession := idleBytes(t, h, n, 0)
	t.Logf("memory per idle session: %.0f B", perSession)
	if perSession > 4096 {
		t.Fatalf("idle session costs %.0f B, want < 4 KiB", perSession)
	}
}

// idleBytes creates n idle sessions (one turn each, then drained) and returns
// the Go heap growth per session.
func idleBytes(t testing.TB, h *harness, n, offset int) float64 {
	goroutines := runtime.NumGoroutine()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		h.r.Handle(context.Background(), adapters.Inbound{Channel: "test", SessionKey: fmt.Sprintf("test:idle:%d", offset+i), Text: "hi"})
	}
	if err := h.r.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.rec.take()
	for i := 0; i < 100 && runtime.NumGoroutine() > goroutines; i++ {
		time.Sleep(time.Millisecond) // workers return right after their last turn
	}
	if g := runtime.NumGoroutine(); g > goroutines {
		t.Fatalf("goroutines %d -> %d: idle sessions keep goroutines", goroutines, g)
	}
	if a := h.r.Active(); a != 0 {
		t.Fatalf("%d idle sessions still have workers", a)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}
