package slack_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
)

// The platform rules end to end: the scopes the manifests grant, the notice
// above a streamed fallback answer (A5), 429s on the streaming calls, and
// answers past Slack's sizes.

func installed(file string) func(*setup) {
	return func(st *setup) {
		b, err := os.ReadFile(filepath.Join("..", "..", file))
		if err == nil {
			err = st.fake.InstallManifest(b)
		}
		if err != nil {
			panic(err)
		}
		st.config.MentionsOnly = st.fake.OnlyMentions
	}
}

// refusedCalls are the calls Slack refused, but for the rate limits a test asked for.
func refusedCalls(e *world) []fakeslack.Call {
	var out []fakeslack.Call
	for _, c := range e.slack.CallLog() {
		if c.Error != "" && c.Error != "ratelimited" {
			out = append(out, c)
		}
	}
	return out
}

// Every Web API method the adapter and `bot check --probe` call is granted by
// both manifests (the fake enforces each method's documented scopes), and the
// scopes are what makes the probe work: without channels:read and groups:read
// (as before) the admin channel cannot be checked.
func TestE2E_SlackScopes_TheManifestsCoverEveryCall(t *testing.T) {
	for _, file := range []string{"slack-manifest.yaml", "slack-manifest-mentions.yaml"} {
		t.Run(file, func(t *testing.T) {
			e := startE2E(t, live, installed(file), func(st *setup) { st.config.SuggestedPrompts = []string{"hi"} })
			e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeServer500, Times: 1})
			e.llm.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeSlowStream, Delay: 5 * time.Millisecond})
			m := e.slack.Mention("C1", "U1", "hello", "") // stream, status, a fallback notice
			e.messages("C1", m.TS)
			e.slack.Slash("/model", "", "C1", "U1") // an ephemeral picker
			if _, err := e.slack.WaitPost(wait, func(p fakeslack.Post) bool { return p.Ephemeral }); err != nil {
				t.Fatal(err)
			}
			th := e.slack.AssistantThreadStarted("D1", "U1", "") // prompts, then a title
			e.call("assistant.threads.setSuggestedPrompts", nil)
			e.slack.AssistantMessage("D1", "U1", "a question", th.TS)
			e.messages("D1", th.TS)
			e.call("assistant.threads.setTitle", nil)
			for _, target := range []string{"C1", "G1", "D1"} {
				for _, r := range e.adapters[0].Probe(context.Background(), target) {
					if !r.OK {
						t.Errorf("probe %s: %s: %s", target, r.What, r.Detail)
					}
				}
			}
			if refused := refusedCalls(e); len(refused) > 0 {
				t.Fatalf("Slack refused %d calls, first %s: %s", len(refused), refused[0].Method, refused[0].Error)
			}
			for _, method := range []string{"chat.startStream", "chat.stopStream", "assistant.threads.setStatus", "chat.postMessage",
				"chat.postEphemeral", "conversations.info"} {
				if len(e.slack.CallsOf(method)) == 0 {
					t.Errorf("%s was never called: the test covers less than it claims", method)
				}
			}
		})
	}
	t.Run("without the read scopes", func(t *testing.T) {
		e := startE2E(t, func(st *setup) {
			st.fake.Scopes = []string{"app_mentions:read", "chat:write", "channels:history", "im:history", "im:read", "commands", "assistant:write"}
		})
		for _, target := range []string{"C1", "G1"} {
			rs := e.adapters[0].Probe(context.Background(), target)
			if last := rs[len(rs)-1]; last.OK || !strings.Contains(last.Detail, "missing_scope") {
				t.Errorf("probe %s without its read scope = %+v, want missing_scope", target, last)
			}
		}
	})
}

// covers A5, N1, L2: the primary fails before any text; while the fallback's
// answer streams, its notice is in the thread before the answer's first text.
func TestE2E_SlackLive_A5_NoticeBeforeTheFallbacksFirstText(t *testing.T) {
	e := startE2E(t, live)
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeServer500})
	e.llm.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeSlowStream, Delay: 15 * time.Millisecond})
	m := e.slack.Mention("C1", "U1", "hello there", "")
	ms := e.messages("C1", m.TS)
	if len(ms) != 2 || !strings.Contains(ms[0].Shown(), "model fallback: p2/beta") || strings.Count(ms[0].Shown(), "model fallback") != 1 || !ms[1].Streamed ||
		!strings.HasPrefix(ms[1].Shown(), "[p2/beta] you said: hello there") {
		t.Fatalf("want the notice, then the streamed answer:%s", describeMessages(ms))
	}
	notice := e.call("chat.postMessage", func(c fakeslack.Call) bool { return strings.Contains(c.Arg("blocks"), "model fallback") })
	start := e.call("chat.startStream", nil)
	if notice.Seq > start.Seq || !notice.Answered {
		t.Fatalf("the notice (call %d) came after the answer's first text (call %d)", notice.Seq, start.Seq)
	}
	if n := len(e.slack.CallsOf("chat.startStream")); n != 1 {
		t.Fatalf("%d streams: nothing was shown before the fallback, so nothing to restart", n)
	}
}

// covers L2: a 429 on chat.startStream costs that answer its stream only: it
// is posted whole, once, and no stream is asked for until the Retry-After has
// passed; then answers stream again (no 10-minute switch-off). A 429 on
// chat.appendStream mid-answer is waited out and the answer ends complete.
func TestE2E_SlackLive_L2_RateLimitedStreamingCalls(t *testing.T) {
	e := startE2E(t, live)
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 5 * time.Millisecond, Reply: story})
	e.slack.RateLimitNext("chat.startStream", 2)
	m := e.slack.Mention("C1", "U1", "first", "")
	ms := e.messages("C1", m.TS)
	if len(ms) != 1 || ms[0].Streamed || ms[0].Text != story {
		t.Fatalf("the rate-limited answer:%s", describeMessages(ms))
	}
	m2 := e.slack.Mention("C2", "U1", "during the pause", "")
	if ms := e.messages("C2", m2.TS); len(ms) != 1 || ms[0].Streamed {
		t.Fatalf("streamed during the Retry-After:%s", describeMessages(ms))
	}
	if n := len(e.slack.CallsOf("chat.startStream")); n != 1 {
		t.Fatalf("chat.startStream called %d times, want the one refused", n)
	}
	e.sleeps.Advance(3 * time.Second) // the Retry-After has passed
	e.slack.RateLimitNext("chat.appendStream", 1)
	m3 := e.slack.Mention("C3", "U1", "after the pause", "")
	ms = e.messages("C3", m3.TS)
	if len(ms) != 1 || !ms[0].Streamed || ms[0].Shown() != story {
		t.Fatalf("the next answer did not stream again:%s", describeMessages(ms))
	}
	for _, v := range ms[0].Versions {
		if strings.Count(v, "once upon") > 1 {
			t.Fatalf("text doubled: %q", v)
		}
	}
	if th := e.slack.Throttles(); len(th) != 2 {
		t.Fatalf("throttles = %+v, want the two injected", th)
	}
}

// covers L5: an answer longer than anything one Slack message holds (40,000
// characters of text; 12,000 of markdown) is split into messages Slack takes,
// streamed or posted whole, never refused or cut.
func TestE2E_SlackLive_L5_OversizeAnswerSplitNeverRefused(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 45000; i++ { // few, long words: the fake provider streams a word a chunk
		b.WriteString(fmt.Sprintf("Line-%d-%s ends.\n\n", i, strings.Repeat("x", 150+i%40)))
	}
	answer := strings.TrimSpace(b.String())
	for _, tc := range []struct {
		name     string
		mod      func(*setup)
		streamed bool
		size     int // most characters a message may hold
	}{
		{"streamed", live, true, 12000}, // markdown_text's limit
		{"whole", func(*setup) {}, false, 4000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startE2E(t, tc.mod)
			e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 2 * time.Millisecond, Reply: answer})
			m := e.slack.Mention("C1", "U1", "a long one", "")
			e.slack.WaitMessages("C1", m.TS, 2, wait)
			ms := e.messages("C1", m.TS)
			var all []string
			for _, msg := range ms {
				if n := utf8.RuneCountInString(msg.Shown()); n > tc.size {
					t.Fatalf("a message holds %d characters", n)
				}
				all = append(all, msg.Shown())
			}
			if got := strings.Join(strings.Fields(strings.Join(all, " ")), " "); got != strings.Join(strings.Fields(answer), " ") {
				t.Fatalf("%d messages do not hold the answer once (%d of %d characters)", len(ms), len(got), len(answer))
			}
			if refused := refusedCalls(e); len(refused) > 0 {
				t.Fatalf("Slack refused %s: %s", refused[0].Method, refused[0].Error)
			}
			if ms[0].Streamed != tc.streamed || len(ms) < 45000/tc.size {
				t.Fatalf("%d messages, the first streamed %v: want %v", len(ms), ms[0].Streamed, tc.streamed)
			}
		})
	}
}
