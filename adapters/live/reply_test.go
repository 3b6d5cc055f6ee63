package live

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/failover/failovertest"
)

// surface records what a reply asks of a platform, as "op id text".
type surface struct {
	mu      sync.Mutex
	ops     []string
	shown   map[string]string // id → text as a reader sees it now
	order   []string          // ids in posting order
	n       int
	fail    map[string]error // op → error for its next call
	abandon []bool           // per write: whether it could be abandoned
}

func newSurface() *surface { return &surface{shown: map[string]string{}, fail: map[string]error{}} }

func (s *surface) log(ctx context.Context, op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops = append(s.ops, op)
	s.abandon = append(s.abandon, Abandoned(ctx) != nil)
	name, _, _ := strings.Cut(op, " ")
	if err := s.fail[name]; err != nil {
		delete(s.fail, name)
		return err
	}
	return nil
}

func (s *surface) Post(ctx context.Context, i int, text string) (string, error) {
	s.mu.Lock()
	s.n++
	id := fmt.Sprintf("m%d", s.n)
	s.mu.Unlock()
	if err := s.log(ctx, fmt.Sprintf("post %s %d %s", id, i, text)); err != nil {
		return "", err
	}
	s.mu.Lock()
	s.shown[id] = text
	s.order = append(s.order, id)
	s.mu.Unlock()
	return id, nil
}

func (s *surface) Delete(ctx context.Context, id string) error {
	if err := s.log(ctx, "delete "+id); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.shown, id)
	s.mu.Unlock()
	return nil
}

func (s *surface) Send(ctx context.Context, out adapters.Outbound) error {
	if err := s.log(ctx, "send "+string(out.Kind)+" "+out.Text); err != nil {
		return err
	}
	s.mu.Lock()
	s.n++
	id := fmt.Sprintf("s%d", s.n)
	s.shown[id] = out.Text
	s.order = append(s.order, id)
	s.mu.Unlock()
	return nil
}

func (s *surface) set(ctx context.Context, op, id, text string, add bool) error {
	if err := s.log(ctx, op+" "+id+" "+text); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		text = s.shown[id] + text
	}
	s.shown[id] = text
	return nil
}

// screen is what a reader sees, message by message, in order.
func (s *surface) screen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, id := range s.order {
		if t, ok := s.shown[id]; ok {
			out = append(out, t)
		}
	}
	return out
}

func (s *surface) took() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ops)
}

// editing is a surface that edits in place (Discord's shape).
type editing struct{ *surface }

func (e editing) Edit(ctx context.Context, id, text string) error {
	return e.set(ctx, "edit", id, text, false)
}

// appending is a surface with a native append and no edit (Slack's shape).
type appending struct{ *surface }

func (a appending) Append(ctx context.Context, id, more string) error {
	return a.set(ctx, "append", id, more, true)
}

func (a appending) Stop(ctx context.Context, id, more string) error {
	return a.set(ctx, "stop", id, more, true)
}

func inline(s Surface, o Options) *Reply {
	o.Inline = true
	return New(s, o)
}

var ctx = context.Background()

func reply(text string) adapters.Outbound {
	return adapters.Outbound{Kind: adapters.KindReply, Text: text}
}

// covers L2, L3: what each platform shape is asked for as a reply grows, is
// replaced by another attempt's text, and ends.
func TestReply_L2_L3_WhatEachSurfaceIsAsked(t *testing.T) {
	tests := []struct {
		name    string
		shape   func(*surface) Surface
		updates []string
		final   string
		want    []string
	}{
		{"append: grows by appends, ends with a stop", func(s *surface) Surface { return appending{s} },
			[]string{"a", "ab", "abc"}, "abcd",
			[]string{"post m1 0 a", "append m1 b", "append m1 c", "stop m1 d"}},
		{"append: replaced text is taken down and posted anew", func(s *surface) Surface { return appending{s} },
			[]string{"partial", "other"}, "other answer",
			[]string{"post m1 0 partial", "delete m1", "post m2 0 other", "stop m2  answer"}},
		{"edit: replaced text is edited in place", func(s *surface) Surface { return editing{s} },
			[]string{"partial", "other"}, "other answer",
			[]string{"post m1 0 partial", "edit m1 other", "edit m1 other answer"}},
		{"edit: the final text as shown costs nothing", func(s *surface) Surface { return editing{s} },
			[]string{"done"}, "done",
			[]string{"post m1 0 done"}},
		{"nothing shown: the final is sent whole", func(s *surface) Surface { return editing{s} },
			nil, "whole",
			[]string{"send reply whole"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSurface()
			r := inline(tc.shape(s), Options{})
			for _, u := range tc.updates {
				if err := r.Update(ctx, u); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Finish(ctx, reply(tc.final)); err != nil {
				t.Fatal(err)
			}
			if got := s.took(); !slices.Equal(got, tc.want) {
				t.Fatalf("ops\n %q\nwant\n %q", got, tc.want)
			}
			if got := s.screen(); !slices.Equal(got, []string{tc.final}) {
				t.Fatalf("a reader sees %q, want %q", got, tc.final)
			}
		})
	}
}

// covers L5, L2: past the limit the reply continues in further messages; an
// append surface stops each part it leaves; the final holds the answer once.
func TestReply_L5_LongTextContinuesInFurtherMessages(t *testing.T) {
	for _, shape := range []func(*surface) Surface{
		func(s *surface) Surface { return appending{s} },
		func(s *surface) Surface { return editing{s} },
	} {
		s := newSurface()
		r := inline(shape(s), Options{Limit: 20})
		text := ""
		for i := range 12 {
			text += fmt.Sprintf("word%02d ", i)
			_ = r.Update(ctx, text)
		}
		_ = r.Finish(ctx, reply(text))
		want := adapters.Split(text, 20, func(s string) int { return len(s) })
		if got := s.screen(); !slices.Equal(got, want) || len(want) < 4 {
			t.Fatalf("%T: reader sees %q, want %q", shape(s), got, want)
		}
		for _, m := range s.screen() {
			if len(m) > 20 {
				t.Fatalf("a message holds %d > 20: %q", len(m), m)
			}
		}
	}
}

// covers A5: a restart takes the failed attempt's text down and sends the lead
// (the fallback notice) before the fallback's first text.
func TestReply_A5_RestartPutsTheLeadFirst(t *testing.T) {
	for _, shape := range []func(*surface) Surface{
		func(s *surface) Surface { return appending{s} },
		func(s *surface) Surface { return editing{s} },
	} {
		s := newSurface()
		r := New(shape(s), Options{})
		done := make(chan struct{})
		go func() { defer close(done); r.Run(ctx) }()
		_ = r.Update(ctx, "primary words")
		waitFor(t, func() bool { return len(s.screen()) == 1 })
		_ = r.Restart(ctx, &adapters.Outbound{Kind: adapters.KindNotice, Text: "↪️ model fallback: p2"})
		_ = r.Update(ctx, "fallback")
		if err := r.Finish(ctx, reply("fallback answer")); err != nil {
			t.Fatal(err)
		}
		<-done
		if got := s.screen(); !slices.Equal(got, []string{"↪️ model fallback: p2", "fallback answer"}) {
			t.Fatalf("%T: reader sees %q (ops %q)", shape(s), got, s.took())
		}
		ops := s.took()
		if i, j := slices.Index(ops, "delete m1"), slices.Index(ops, "send notice ↪️ model fallback: p2"); i < 0 || j < i {
			t.Fatalf("the partial text was not taken down before the notice: %q", ops)
		}
	}
}

// covers L2: updates coalesce (the newest text wins) at most one write per
// Every; the first text goes at once; Finish does not wait for the throttle;
// writes while growing may be abandoned, final ones may not.
func TestReply_L2_ThrottledNewestWins(t *testing.T) {
	clock := failovertest.NewClock(time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC))
	s := newSurface()
	gate := make(chan struct{})
	sleep := func(ctx context.Context, d time.Duration) error {
		select { // a sleep lasts until the test lets it end, or Finish cuts it
		case <-gate:
			return clock.Sleep(ctx, d)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r := New(editing{s}, Options{Every: time.Second, Now: clock.Now, Sleep: sleep})
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	_ = r.Update(ctx, "w0")
	waitFor(t, func() bool { return len(s.took()) == 1 })
	text := "w0"
	for i := 1; i < 100; i++ {
		text += fmt.Sprintf(" w%d", i)
		_ = r.Update(ctx, text)
	}
	if err := r.Finish(ctx, reply(text+".")); err != nil {
		t.Fatal(err)
	}
	<-done
	ops := s.took()
	if !slices.Equal(ops, []string{"post m1 0 w0", "edit m1 " + text + "."}) {
		t.Fatalf("ops = %q: want the first text at once and the final one, nothing between", ops)
	}
	if s.abandon[0] != true || s.abandon[1] != false {
		t.Fatalf("abandonable writes = %v, want the growing write only", s.abandon)
	}
	if len(clock.Sleeps()) != 0 {
		t.Fatalf("slept %v: Finish waited for the throttle", clock.Sleeps())
	}
}

// covers L2, L3: a reply that cannot grow (first post refused) ends with the
// final sent whole; one whose final cannot replace what shows takes it down
// (the caller posts the answer); a part gone meanwhile is shown anew.
func TestReply_L3_FailuresEndWithTheWholeAnswerOnce(t *testing.T) {
	refused := errors.New("refused")
	t.Run("first post refused", func(t *testing.T) {
		s := newSurface()
		s.fail["post"] = refused
		r := inline(appending{s}, Options{})
		_ = r.Update(ctx, "a")
		_ = r.Update(ctx, "ab")
		_ = r.Finish(ctx, reply("abc"))
		if got := s.took(); !slices.Equal(got, []string{"post m1 0 a", "send reply abc"}) {
			t.Fatalf("ops = %q", got)
		}
	})
	t.Run("final cannot replace: taken down, the caller posts it", func(t *testing.T) {
		s := newSurface()
		r := inline(editing{s}, Options{})
		_ = r.Update(ctx, "partial")
		s.fail["edit"] = refused
		if err := r.Finish(ctx, reply("final")); !errors.Is(err, refused) {
			t.Fatalf("Finish = %v, want the refusal", err)
		}
		if got := s.screen(); len(got) != 0 {
			t.Fatalf("reader sees %q (ops %q), want the partial text taken down", got, s.took())
		}
	})
	t.Run("stream gone: shown anew", func(t *testing.T) {
		s := newSurface()
		r := inline(appending{s}, Options{})
		_ = r.Update(ctx, "a")
		s.fail["append"] = ErrGone
		_ = r.Update(ctx, "ab")
		_ = r.Finish(ctx, reply("ab"))
		if got := s.screen(); !slices.Equal(got, []string{"ab"}) || !slices.Contains(s.took(), "delete m1") {
			t.Fatalf("reader sees %q (ops %q)", got, s.took())
		}
	})
	t.Run("whole from the start", func(t *testing.T) {
		s := newSurface()
		r := inline(appending{s}, Options{Whole: true})
		_ = r.Update(ctx, "a")
		_ = r.Finish(ctx, reply("ab"))
		if got := s.took(); !slices.Equal(got, []string{"send reply ab"}) {
			t.Fatalf("ops = %q", got)
		}
	})
}

// Finish gives up with ctx, and Run ends with its context.
func TestReply_FinishHonoursContext(t *testing.T) {
	s := newSurface()
	r := New(editing{s}, Options{})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(runCtx) }()
	stop()
	<-done
	fctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := r.Finish(fctx, reply("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Finish after Run ended = %v, want Run's context error", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}
