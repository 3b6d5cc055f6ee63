package sessions

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/llm"
)

// tape is a channel that records what a message shows, as events: progress,
// a growing reply (start, update, restart with its lead, finish) and whole
// posts. Consecutive updates with the same text are one event.
type tape struct {
	mu sync.Mutex
	ev []string
}

func (p *tape) Name() string                                       { return "tape" }
func (p *tape) Run(context.Context, chan<- adapters.Inbound) error { return nil }
func (p *tape) Send(_ context.Context, out adapters.Outbound) error {
	p.add("send " + show(out))
	return nil
}
func (p *tape) StartProgress(context.Context, adapters.Inbound) adapters.Indicator {
	p.add("progress")
	return tapeIndicator{p}
}
func (p *tape) StartStream(context.Context, adapters.Inbound) (adapters.Stream, error) {
	p.add("stream")
	return tapeStream{p}, nil
}

func (p *tape) add(e string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.ev); n > 0 && p.ev[n-1] == e && strings.HasPrefix(e, "update ") {
		return
	}
	p.ev = append(p.ev, e)
}

func (p *tape) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ev := p.ev
	p.ev = nil
	return ev
}

type tapeIndicator struct{ p *tape }

func (i tapeIndicator) Status(string) {}
func (i tapeIndicator) Stop()         { i.p.add("progress stop") }

type tapeStream struct{ p *tape }

func (s tapeStream) Update(_ context.Context, text string) error {
	s.p.add("update " + text)
	return nil
}
func (s tapeStream) Restart(_ context.Context, lead *adapters.Outbound) error {
	if lead == nil {
		s.p.add("restart")
		return nil
	}
	s.p.add("restart, lead " + show(*lead))
	return nil
}
func (s tapeStream) Finish(_ context.Context, out adapters.Outbound) error {
	s.p.add("finish " + show(out))
	return nil
}

// show names an outbound message by its kind and the start of its text.
func show(out adapters.Outbound) string {
	text, _, _ := strings.Cut(out.Text, " (")
	return string(out.Kind) + ": " + text
}

// scripted is an in-process model per provider: "ok" streams two words,
// "fail" fails before any text (a server error), "partial" streams a word and
// stalls, "panic" panics.
type scripted struct {
	provider string
	mode     func() string
}

func (m *scripted) Chat(_ context.Context, req llm.Request, onDelta func(string)) (failover.Output, error) {
	say := func(s string) {
		if onDelta != nil {
			onDelta(s)
		}
	}
	switch m.mode() {
	case "fail":
		return failover.Output{}, &failover.Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Status: 500, Message: "server error"}
	case "partial":
		say("part")
		return failover.Output{Text: "part"}, &failover.Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Idle: true, Message: "stalled"}
	case "panic":
		panic("the model exploded")
	}
	say(m.provider)
	say(" answers")
	return failover.Output{Text: m.provider + " answers", FinishReason: "stop", Progress: true, InputTokens: 1, OutputTokens: 2}, nil
}

func (m *scripted) Check(context.Context, string) (failover.Output, error) {
	return failover.Output{}, nil
}

// covers W1: a second final answer is refused by the writer itself, and a
// notice text is shown once however often it is given.
func TestWriter_W1_OneFinalAnswerEachNoticeOnce(t *testing.T) {
	p := &tape{}
	w := newWriter(adapters.Inbound{Channel: "tape", SessionKey: "tape:s"}, p, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	w.notice(ctx, "↪️ model fallback: b (selected a; rate limit)")
	w.notice(ctx, "↪️ model fallback: b (selected a; rate limit)")
	w.notice(ctx, "")
	if err := w.finish(ctx, adapters.Outbound{Kind: adapters.KindReply, Text: "one"}); err != nil {
		t.Fatal(err)
	}
	if err := w.finish(ctx, adapters.Outbound{Kind: adapters.KindError, Text: "two"}); err != errAnswered {
		t.Fatalf("a second final answer: %v, want errAnswered", err)
	}
	if got := fmt.Sprint(p.take()); got != "[send notice: ↪️ model fallback: b send reply: one]" {
		t.Fatalf("events %s", got)
	}
	if given, delivered := w.answered(); !given || !delivered {
		t.Fatalf("answered %v, delivered %v", given, delivered)
	}
}
