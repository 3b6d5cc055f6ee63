package app_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters/console"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/e2e"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// jsonlUser types into the console jsonl channel of a world and reads what it
// answers, as a script using the documented contract would.
type jsonlUser struct {
	t   *testing.T
	in  *io.PipeWriter
	out chan jsonlLine
}

type jsonlLine struct {
	Type    string `json:"type"`
	Session string `json:"session"`
	Text    string `json:"text"`
	Model   string `json:"model"`
}

// consoleWorld starts spec with the console jsonl channel as its adapter.
func consoleWorld(t *testing.T, spec e2e.Spec) (*e2e.World, *jsonlUser) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	u := &jsonlUser{t: t, in: inW, out: make(chan jsonlLine, 64)}
	go func() {
		defer close(u.out)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l jsonlLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l = jsonlLine{Type: "unreadable", Text: sc.Text()}
			}
			u.out <- l
		}
	}()
	spec.Adapter = console.New(console.Options{Format: console.FormatJSONL, In: inR, Out: outW})
	w := e2e.Start(t, spec)
	t.Cleanup(func() { _ = inW.Close(); _ = outW.Close() })
	return w, u
}

// say sends text on session and returns the lines up to its answer (a reply
// or an error).
func (u *jsonlUser) say(session, text string) []jsonlLine {
	u.t.Helper()
	b, _ := json.Marshal(map[string]string{"session": session, "text": text})
	if _, err := u.in.Write(append(b, '\n')); err != nil {
		u.t.Fatal(err)
	}
	var got []jsonlLine
	for {
		select {
		case l, ok := <-u.out:
			if !ok {
				u.t.Fatalf("the console closed; got %+v", got)
			}
			got = append(got, l)
			if l.Session == session && (l.Type == "reply" || l.Type == "error") {
				return got
			}
		case <-time.After(e2e.Wait):
			u.t.Fatalf("no answer to %q within %v; got %+v", text[:min(len(text), 40)], e2e.Wait, got)
		}
	}
}

// promptBytes is the text a call carried: every message of its prompt.
func promptBytes(c fakeprovider.Call) int {
	n := 0
	for _, m := range c.Messages {
		n += len(m.Text)
	}
	return n
}

// outageSpec: three providers, four profiles (p1 has two keys).
func outageSpec() e2e.Spec {
	return e2e.Spec{
		Primary: "p1/alpha", Fallbacks: []string{"p2/beta", "p3/gamma"},
		Keys: map[string]string{"p1:a": "sk-CANARY-p1a-000000", "p1:b": "sk-CANARY-p1b-000000",
			"p2:main": "sk-CANARY-p2-0000000", "p3:main": "sk-CANARY-p3-0000000"},
	}
}

// outageResult is what a 150 s total outage cost, measured at the fake provider.
type outageResult struct {
	Calls, Checks   int // calls during the outage, of which small checks
	PromptBytes     int // text of every prompt sent during the outage
	OneRequest      int // the text of one request of the conversation
	FirstAnswer     time.Duration
	Refused, Turns  int
	ConversationLen int // prompt bytes of the last request before the outage
}

// runOutage plays the outage through the console: a 20-turn
// conversation of about 45 KB, then every provider answers 500 for 150 s while
// a turn comes every 2 s, then they recover and turns go on until one is
// answered. Time is the world's fake clock.
func runOutage(t *testing.T) outageResult {
	w, u := consoleWorld(t, outageSpec())
	var r outageResult
	for i := range 20 {
		msg := fmt.Sprintf("turn %02d: %s", i, strings.Repeat(fmt.Sprintf("fact %02d is worth keeping. ", i), 80))
		if got := u.say("s1", msg); got[len(got)-1].Type != "reply" {
			t.Fatalf("turn %d before the outage: %+v", i, got)
		}
		w.Clock.Advance(2 * time.Second)
	}
	calls := w.LLM.Calls()
	r.ConversationLen = promptBytes(calls[len(calls)-1]) // the 20th turn's request
	const outage = 150 * time.Second
	start := w.Clock.Now()
	w.LLM.Play([]fakeprovider.Phase{{For: outage, Rules: []fakeprovider.Rule{{Mode: fakeprovider.ModeServer500}}}})
	healed := start.Add(outage)
	for k := 0; ; k++ {
		at := start.Add(time.Duration(k) * 2 * time.Second)
		if at.Sub(healed) > time.Minute {
			t.Fatalf("no answer within a minute of the recovery")
		}
		if w.Clock.Now().Before(at) {
			w.Clock.Set(at)
		}
		got := u.say("s1", fmt.Sprintf("during the outage, message %d", k))
		r.Turns++
		last := got[len(got)-1]
		if last.Type == "reply" {
			if !w.Clock.Now().After(healed) {
				t.Fatalf("answered during the outage: %+v", last)
			}
			r.FirstAnswer = w.Clock.Now().Sub(healed)
			break
		}
		r.Refused++
	}
	for _, c := range w.LLM.Calls() {
		if c.Time.Before(start) || !c.Time.Before(healed) {
			continue
		}
		r.Calls++
		n := promptBytes(c)
		r.PromptBytes += n
		if !c.Stream {
			r.Checks++
		}
		r.OneRequest = max(r.OneRequest, n)
	}
	return r
}

// covers E1, E2, E6, A1: the outage. A 150 s total outage after a
// 20-turn conversation of ~45 KB (three providers, four profiles, a turn every
// 2 s) costs at most 24 calls, the prompts sent during it add up to at most
// (profiles + 2) times one request of the conversation, and the first answer
// comes within 35 s of the recovery.
func TestOutage_E1_E2_ConsoleOutageCostsChecksNotConversations(t *testing.T) {
	r := runOutage(t)
	t.Logf("conversation %d bytes; outage: %d turns (%d refused), %d calls (%d checks), %d prompt bytes (one request %d, %.1f times it); first answer %v after the recovery",
		r.ConversationLen, r.Turns, r.Refused, r.Calls, r.Checks, r.PromptBytes, r.OneRequest, float64(r.PromptBytes)/float64(max(r.OneRequest, 1)), r.FirstAnswer)
	if r.ConversationLen < 40_000 || r.ConversationLen > 50_000 {
		t.Fatalf("the conversation is %d bytes, want about 45 KB", r.ConversationLen)
	}
	if r.OneRequest <= r.ConversationLen {
		t.Fatalf("no call during the outage carried the conversation (largest %d bytes)", r.OneRequest)
	}
	if r.Calls > 24 {
		t.Errorf("the outage cost %d calls, want at most 24", r.Calls)
	}
	if max := (4 + 2) * r.OneRequest; r.PromptBytes > max {
		t.Errorf("the outage sent %d prompt bytes, want at most %d (6 requests of the conversation)", r.PromptBytes, max)
	}
	if r.FirstAnswer > 35*time.Second {
		t.Errorf("first answer %v after the recovery, want within 35 s", r.FirstAnswer)
	}
}

// covers E3, R11, D5: Anthropic's 429 with retry-after 45 and Gemini's
// RESOURCE_EXHAUSTED with a RetryInfo of 47 s: no call of any kind (a check, a
// probe of the primary, a conversation) goes to that provider before the
// stated time, from any session, on SQLite and on PostgreSQL; after it, the
// primary answers again.
func TestOutage_E3_StatedResetIsHonoured(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		for _, tc := range []struct {
			api  string
			wait time.Duration
		}{{"anthropic", 45 * time.Second}, {"gemini", 47 * time.Second}} {
			t.Run(tc.api, func(t *testing.T) {
				spec := e2e.Spec{Primary: "p1/alpha", Fallbacks: []string{"p2/beta"}, Driver: driver,
					Keys: map[string]string{"p1:main": "sk-CANARY-p1-0000000", "p2:main": "sk-CANARY-p2-0000000"},
					APIs: map[string]string{"p1": tc.api}}
				w, u := consoleWorld(t, spec)
				w.LLM.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeRateLimit, RetryAfter: tc.wait, Times: 1})
				start := w.Clock.Now()
				if got := u.say("first", "hello"); got[len(got)-1].Model != "p2/beta" {
					t.Fatalf("first turn: %+v", got)
				}
				p1 := func() int { return w.LLM.CallCount(fakeprovider.Filter{Provider: "p1"}) }
				if p1() != 1 {
					t.Fatalf("%d calls to p1, want the one that was limited", p1())
				}
				for _, at := range []time.Duration{7 * time.Second, 20 * time.Second, 31 * time.Second, tc.wait - time.Second} {
					w.Clock.Set(start.Add(at))
					session := fmt.Sprintf("new-%d", at/time.Second)
					if got := u.say(session, "anyone there?"); got[len(got)-1].Model != "p2/beta" {
						t.Fatalf("at %v: %+v", at, got)
					}
					if p1() != 1 {
						t.Fatalf("at %v a new session called p1 (%d calls), before its stated reset at %v", at, p1(), tc.wait)
					}
				}
				w.Clock.Set(start.Add(tc.wait + time.Second))
				if got := u.say("after", "and now?"); got[len(got)-1].Model != "p1/alpha" {
					t.Fatalf("after the reset: %+v", got)
				}
			})
		}
	})
}

// covers R5, E1, E4: a primary with two keys that stalls mid-stream, hangs
// before its headers, or sends keep-alives only: one more attempt on its
// second key, then the fallback answers: three calls, each stall cut after
// idle_seconds.
func TestOutage_E1_E4_StallGetsOneMoreAttemptThenFallback(t *testing.T) {
	for _, mode := range []fakeprovider.Mode{fakeprovider.ModeStallAfterFirstChunk, fakeprovider.ModeHangBeforeHeaders, fakeprovider.ModeKeepAliveOnly} {
		t.Run(string(mode), func(t *testing.T) {
			const idle = 300 * time.Millisecond
			spec := e2e.Spec{Primary: "p1/alpha", Fallbacks: []string{"p2/beta"}, Idle: idle,
				Keys: map[string]string{"p1:a": "sk-CANARY-p1a-000000", "p1:b": "sk-CANARY-p1b-000000", "p2:main": "sk-CANARY-p2-0000000"}}
			w, u := consoleWorld(t, spec)
			w.LLM.Script(fakeprovider.Rule{Provider: "p1", Mode: mode})
			got := u.say("s", "hello")
			if last := got[len(got)-1]; last.Type != "reply" || last.Model != "p2/beta" {
				t.Fatalf("answer %+v, want the fallback's", got)
			}
			calls := w.LLM.Calls()
			if len(calls) != 3 || calls[0].KeyID == calls[1].KeyID || calls[2].Provider != "p2" {
				t.Fatalf("calls %+v, want p1 on each key, then p2", calls)
			}
		})
	}
}

// covers E5, R13: a primary that answers with reasoning alone gets one nudged
// retry, then the fallback answers; none of the reasoning reaches the person.
func TestOutage_E5_ReasoningOnlyFallsBackUnseen(t *testing.T) {
	const reasoning = "SECRET-REASONING weighing the question"
	spec := e2e.Spec{Primary: "p1/alpha", Fallbacks: []string{"p2/beta"},
		Keys: map[string]string{"p1:main": "sk-CANARY-p1-0000000", "p2:main": "sk-CANARY-p2-0000000"}}
	w, u := consoleWorld(t, spec)
	w.LLM.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeReasoningOnly, Reply: reasoning})
	got := u.say("s", "hello")
	if last := got[len(got)-1]; last.Type != "reply" || last.Model != "p2/beta" {
		t.Fatalf("answer %+v, want the fallback's", got)
	}
	for _, l := range got {
		if strings.Contains(l.Text, "SECRET-REASONING") {
			t.Fatalf("reasoning reached the console: %+v", l)
		}
	}
	if n := w.LLM.CallCount(fakeprovider.Filter{Provider: "p1"}); n != 2 {
		t.Fatalf("%d calls to p1, want the answer and one nudged retry (R13)", n)
	}
}
