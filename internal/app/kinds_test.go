package app_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/e2e"
)

// liveChannel is a channel that streams replies: it records what a person
// would see, in order (every version of the growing reply, the final one, and
// the other posts such as notices).
type liveChannel struct {
	in   chan adapters.Inbound
	mu   sync.Mutex
	seen []string // "update:…", "finish:<kind>:…", "post:<kind>:…"
	done chan struct{}
}

func newLiveChannel() *liveChannel {
	return &liveChannel{in: make(chan adapters.Inbound), done: make(chan struct{}, 16)}
}

func (l *liveChannel) Name() string { return "live" }

func (l *liveChannel) Run(ctx context.Context, inbox chan<- adapters.Inbound) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-l.in:
			inbox <- m
		}
	}
}

func (l *liveChannel) log(e string) {
	l.mu.Lock()
	l.seen = append(l.seen, e)
	l.mu.Unlock()
}

func (l *liveChannel) Send(_ context.Context, o adapters.Outbound) error {
	l.log("post:" + string(o.Kind) + ":" + o.Text)
	if o.Kind == adapters.KindReply || o.Kind == adapters.KindError {
		l.done <- struct{}{}
	}
	return nil
}

func (l *liveChannel) StartStream(context.Context, adapters.Inbound) (adapters.Stream, error) {
	return liveReply{l}, nil
}

type liveReply struct{ l *liveChannel }

func (r liveReply) Update(_ context.Context, text string) error {
	r.l.log("update:" + text)
	return nil
}

// Restart takes the shown text down and posts the lead as its own message, as
// the platforms' live.Reply does (A5).
func (r liveReply) Restart(ctx context.Context, lead *adapters.Outbound) error {
	r.l.log("restart")
	if lead != nil {
		return r.l.Send(ctx, *lead)
	}
	return nil
}

func (r liveReply) Finish(_ context.Context, final adapters.Outbound) error {
	r.l.log("finish:" + string(final.Kind) + ":" + final.Text)
	r.l.done <- struct{}{}
	return nil
}

func (l *liveChannel) say(t *testing.T, text string) []string {
	t.Helper()
	l.in <- adapters.Inbound{Channel: "live", SessionKey: "live:s1", User: "live:u1", Text: text, ReplyTo: "t1", Direct: true}
	select {
	case <-l.done:
	case <-time.After(e2e.Wait):
		t.Fatal("no answer")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

// covers L2, L3, N4 through every protocol: the primary (of each kind) streams
// a word and then fails mid-stream (an error event after the 200: Anthropic's
// overloaded_error, OpenAI's, Azure's and Gemini's error chunk). The reply the
// person sees was growing with the primary's words, is replaced in place by
// the fallback's whole answer (the fallback of another kind), the fallback
// notice is a post of its own, and no word of the primary is left.
func TestKinds_L3_FailoverMidStreamReplacesThePartialText(t *testing.T) {
	chains := []struct{ primary, fallback string }{
		{"anthropic", "azure"},
		{"azure", "openai"},
		{"gemini", "anthropic"},
		{"openai", "gemini"},
	}
	for _, ch := range chains {
		t.Run(ch.primary+"-then-"+ch.fallback, func(t *testing.T) {
			live := newLiveChannel()
			w := e2e.Start(t, e2e.Spec{
				Primary: ch.primary + "/alpha", Fallbacks: []string{ch.fallback + "/beta"},
				APIs: map[string]string{ch.primary: ch.primary, ch.fallback: ch.fallback},
				Keys: map[string]string{ch.primary + ":main": "sk-CANARY-live-" + ch.primary + "-0001",
					ch.fallback + ":main": "sk-CANARY-live-" + ch.fallback + "-0002"},
				Adapter: live,
			})
			w.LLM.Script(fakeprovider.Rule{Provider: ch.primary, Mode: fakeprovider.ModeMidstreamError, Reply: "partial words from the primary"})
			seen := live.say(t, "hello there")

			var updates []string
			final, notice := "", ""
			for _, e := range seen {
				switch {
				case strings.HasPrefix(e, "update:"):
					updates = append(updates, strings.TrimPrefix(e, "update:"))
				case strings.HasPrefix(e, "finish:reply:"):
					final = strings.TrimPrefix(e, "finish:reply:")
				case strings.HasPrefix(e, "post:notice:"):
					notice = strings.TrimPrefix(e, "post:notice:")
				case strings.HasPrefix(e, "post:reply:"), strings.HasPrefix(e, "post:error:"), strings.HasPrefix(e, "finish:error:"):
					t.Fatalf("the answer was not delivered in place: %q", seen)
				}
			}
			if len(updates) == 0 || !strings.HasPrefix(updates[0], "partial") {
				t.Fatalf("the primary's first word was not shown while it streamed: %q", seen)
			}
			want := "[" + ch.fallback + "/beta] you said: hello there"
			if final != want || strings.Contains(final, "partial") {
				t.Fatalf("final reply %q, want %q (seen %q)", final, want, seen)
			}
			if !strings.Contains(notice, "model fallback: "+ch.fallback+"/beta") {
				t.Fatalf("notice %q (seen %q)", notice, seen)
			}
			calls := w.LLM.Calls()
			if len(calls) < 2 || string(calls[0].API) != ch.primary || string(calls[len(calls)-1].API) != ch.fallback {
				t.Fatalf("calls %+v", calls)
			}
		})
	}
}

// covers L2: a healthy answer grows through several versions in every protocol.
func TestKinds_L2_ReplyGrowsInEveryProtocol(t *testing.T) {
	for _, api := range []string{"openai", "azure", "anthropic", "gemini"} {
		t.Run(api, func(t *testing.T) {
			live := newLiveChannel()
			w := e2e.Start(t, e2e.Spec{
				Primary: api + "/alpha", APIs: map[string]string{api: api},
				Keys:    map[string]string{api + ":main": "sk-CANARY-grow-" + api + "-0001"},
				Adapter: live,
			})
			w.LLM.Script(fakeprovider.Rule{Provider: api, Mode: fakeprovider.ModeSlowStream, Delay: 20 * time.Millisecond})
			seen := live.say(t, "tell me a long story please")
			updates, final := 0, ""
			for _, e := range seen {
				if strings.HasPrefix(e, "update:") {
					updates++
				}
				if strings.HasPrefix(e, "finish:reply:") {
					final = strings.TrimPrefix(e, "finish:reply:")
				}
			}
			if updates < 2 || final != "["+api+"/alpha] you said: tell me a long story please" {
				t.Fatalf("%d updates, final %q: %q", updates, final, seen)
			}
		})
	}
}
