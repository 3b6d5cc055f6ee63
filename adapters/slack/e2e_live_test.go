package slack_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
)

// Live replies end to end: the real router, failover engine and go-openai
// client against the fake provider streaming slowly, the real slack-go client
// against fakeslack.

func live(st *setup) { st.live = true }

// words is a reply long enough to stream in several steps.
const story = "once upon a time a model wrote a reply one word at a time and every word " +
	"reached the thread while the next one was still being written"

// call waits for a call of method matching pred.
func (e *world) call(method string, pred func(fakeslack.Call) bool) fakeslack.Call {
	e.t.Helper()
	c, err := e.slack.WaitCall(wait, func(c fakeslack.Call) bool {
		return c.Method == method && (pred == nil || pred(c))
	})
	if err != nil {
		e.t.Fatalf("%s: %v", method, err)
	}
	return c
}

// messages waits for a message in the thread, then until the router is idle,
// and returns the latest version of every message in the thread.
func (e *world) messages(channel, ts string) []fakeslack.Message {
	e.t.Helper()
	if ms, err := e.slack.WaitMessages(channel, ts, 1, wait); err != nil {
		e.t.Fatalf("%v:%s", err, describeMessages(ms))
	}
	e.drain()
	return e.slack.Messages(channel, ts)
}

func describeMessages(ms []fakeslack.Message) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString("\n  [" + m.TS + " streamed=" + boolText(m.Streamed) + "] " + m.Shown())
		for i, v := range m.Versions {
			b.WriteString("\n      v" + string(rune('0'+i%10)) + ": " + v)
		}
	}
	return b.String()
}

func boolText(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// covers L1: within a second of the mention, before the model's first word,
// the thread shows "is thinking…"; the reply clears it.
func TestE2E_SlackLive_L1_ProgressVisibleBeforeFirstToken(t *testing.T) {
	e := startE2E(t, live)
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 300 * time.Millisecond, Reply: "first words"})
	pushed := time.Now()
	m := e.slack.Mention("C1", "U1", "hello", "")
	status := e.call("assistant.threads.setStatus", func(c fakeslack.Call) bool { return c.Arg("status") != "" })
	if status.Arg("status") != "is thinking…" || status.Arg("channel_id") != "C1" || status.Arg("thread_ts") != m.TS {
		t.Fatalf("status call = %+v", status)
	}
	if d := status.Wall.Sub(pushed); d > time.Second {
		t.Fatalf("status shown %v after the message, want within 1 s", d)
	}
	if got := e.slack.Status("C1", m.TS); got != "is thinking…" && len(e.slack.CallsOf("chat.startStream")) == 0 {
		t.Fatalf("status before the first word = %q", got)
	}
	start := e.call("chat.startStream", nil)
	if status.Seq > start.Seq {
		t.Fatalf("the status came after the first text (call %d, stream %d)", status.Seq, start.Seq)
	}
	e.drain()
	if got := e.slack.Status("C1", m.TS); got != "" {
		t.Fatalf("status after the reply = %q, want cleared", got)
	}
}

// covers L2: the reply grows in one streamed message (recipient fields set, in
// the thread) and ends complete; it is posted once and nothing else is posted.
func TestE2E_SlackLive_L2_ReplyGrowsAndEndsCompletePostedOnce(t *testing.T) {
	e := startE2E(t, live)
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 15 * time.Millisecond, Reply: story})
	m := e.slack.Mention("C1", "U1", "tell me a story", "")
	ms := e.messages("C1", m.TS)
	if len(ms) != 1 || !ms[0].Streamed {
		t.Fatalf("want one streamed message:%s", describeMessages(ms))
	}
	if ms[0].Shown() != story || strings.Contains(ms[0].Shown(), "\u200b") || ms[0].Streaming {
		t.Fatalf("final message = %q (blocks %s), want the whole answer, its stream stopped", ms[0].Shown(), ms[0].Blocks)
	}
	// Documented calls only: the stream ends with chat.stopStream, never chat.update.
	if stops, updates := len(e.slack.CallsOf("chat.stopStream")), len(e.slack.CallsOf("chat.update")); stops != 1 || updates != 0 {
		t.Fatalf("%d chat.stopStream and %d chat.update calls, want 1 and 0", stops, updates)
	}
	growing := 0
	for i := 1; i < len(ms[0].Versions)-1; i++ {
		if len(ms[0].Versions[i]) > len(ms[0].Versions[i-1]) {
			growing++
		}
	}
	if growing < 2 {
		t.Fatalf("the reply did not grow while the model wrote:%s", describeMessages(ms))
	}
	starts := e.slack.CallsOf("chat.startStream")
	if len(starts) != 1 || starts[0].Arg("recipient_team_id") != "T1" || starts[0].Arg("recipient_user_id") != "U1" ||
		starts[0].Arg("thread_ts") != m.TS {
		t.Fatalf("chat.startStream calls = %+v", starts)
	}
	if n := len(e.slack.CallsOf("chat.postMessage")); n != 0 {
		t.Fatalf("%d chat.postMessage calls besides the stream", n)
	}
	for _, c := range e.slack.CallLog() {
		if c.Error != "" {
			t.Fatalf("Slack refused a call: %+v", c)
		}
	}
}

// covers L3, N4, R8, A5, W1: the primary streams some words and stalls; the
// fallback answers. The primary's stream is deleted, the fallback notice is its
// own message, and the fallback's answer streams below it (A5: notice, then
// answer); the primary's partial text is in no message's latest version, and the
// answer is shown once.
func TestE2E_SlackLive_L3_StallThenFallbackReplacesPartialText(t *testing.T) {
	e := startE2E(t, live, func(st *setup) { st.idle = 300 * time.Millisecond })
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeStallAfterFirstChunk})
	e.llm.Script(fakeprovider.Rule{Provider: "p2", Mode: fakeprovider.ModeSlowStream, Delay: 20 * time.Millisecond})
	m := e.slack.Mention("C1", "U1", "hello there", "")
	ms := e.messages("C1", m.TS)
	if len(ms) != 2 {
		t.Fatalf("want the notice and the answer:%s", describeMessages(ms))
	}
	notice, answer := ms[0], ms[1]
	if !answer.Streamed || !strings.HasPrefix(answer.Shown(), "[p2/beta] you said: hello there") {
		t.Fatalf("final answer:%s", describeMessages(ms))
	}
	shown := false
	for _, msg := range e.slack.AllMessages() {
		shown = shown || (msg.Deleted && strings.Contains(msg.Versions[0], "[p1/alpha]"))
		if !msg.Deleted && strings.Contains(msg.Shown(), "p1/alpha]") {
			t.Fatalf("the primary's partial text is still shown:%s", describeMessages([]fakeslack.Message{msg}))
		}
	}
	if !shown {
		t.Fatalf("the primary's words were never shown (the test proves nothing):%s", describeMessages(e.slack.AllMessages()))
	}
	if !strings.Contains(string(notice.Blocks), `"context"`) || !strings.Contains(notice.Shown(), "model fallback: p2/beta") ||
		strings.Contains(notice.Shown(), "you said") {
		t.Fatalf("the notice is not its own status message:%s", describeMessages(ms))
	}
	if n := strings.Count(answer.Shown()+notice.Shown(), "model fallback"); n != 1 {
		t.Fatalf("the fallback notice is said %d times (W1):%s", n, describeMessages(ms))
	}
	if n := strings.Count(answer.Shown()+notice.Shown(), "you said: hello there"); n != 1 {
		t.Fatalf("the answer is shown %d times:%s", n, describeMessages(ms))
	}
	if n, u := len(e.slack.CallsOf("chat.startStream")), len(e.slack.CallsOf("chat.update")); n != 2 || u != 0 {
		t.Fatalf("%d streams started and %d chat.update calls, want the primary's (deleted) and the fallback's, no update", n, u)
	}
	if hist := e.history("slack:T1:C1:" + m.TS); len(hist) != 2 || strings.Contains(hist[1], "p1/alpha") {
		t.Fatalf("history = %q", hist)
	}
}

// covers L2: channels.slack.stream: false gives today's single post (and
// progress still shows).
func TestE2E_SlackLive_L2_StreamingOffPostsOnce(t *testing.T) {
	e := startE2E(t, live, func(st *setup) { st.channels = "slack: {stream: false}" })
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 20 * time.Millisecond, Reply: story})
	m := e.slack.Mention("C1", "U1", "tell me a story", "")
	ms := e.messages("C1", m.TS)
	if len(ms) != 1 || ms[0].Streamed || ms[0].Text != story || len(ms[0].Versions) != 1 {
		t.Fatalf("want one plain post:%s", describeMessages(ms))
	}
	if n := len(e.slack.CallsOf("chat.startStream")) + len(e.slack.CallsOf("chat.appendStream")); n != 0 {
		t.Fatalf("%d streaming calls with streaming off", n)
	}
	if len(e.slack.CallsOf("assistant.threads.setStatus")) == 0 {
		t.Fatal("progress is on, yet no status was shown")
	}
}

// covers L2: a workspace that refuses chat.startStream still gets the whole
// answer, once; the refusal is remembered, so the next reply does not ask again.
func TestE2E_SlackLive_L2_WorkspaceRefusingStreamsGetsTheWholeAnswer(t *testing.T) {
	for _, code := range []string{"unknown_method", "not_allowed", "method_not_supported_for_channel_type"} {
		t.Run(code, func(t *testing.T) {
			e := startE2E(t, live, func(st *setup) { st.fake.RefuseStreaming = code })
			e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 10 * time.Millisecond, Reply: "a whole answer"})
			for i, q := range []string{"first", "second"} {
				m := e.slack.Mention("C1", "U1", q, "")
				ms := e.messages("C1", m.TS)
				if len(ms) != 1 || ms[0].Text != "a whole answer" {
					t.Fatalf("reply %d:%s", i+1, describeMessages(ms))
				}
			}
			if n := len(e.slack.CallsOf("chat.startStream")); n != 1 {
				t.Fatalf("chat.startStream asked %d times, want once", n)
			}
		})
	}
}

// covers L1, R6: while the turn sleeps through a provider's stated wait because
// nothing else is usable, the thread's status says what it waits for.
func TestE2E_SlackLive_L1_R6_StatusShowsTheWait(t *testing.T) {
	e := startE2E(t, live, func(st *setup) { st.primary, st.fallbacks = "p1/alpha", nil })
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeRateLimit, RetryAfter: 20 * time.Second, Times: 1})
	m := e.slack.Mention("C1", "U1", "hi", "")
	c := e.call("assistant.threads.setStatus", func(c fakeslack.Call) bool { return strings.HasPrefix(c.Arg("status"), "waiting") })
	if c.Arg("status") != "waiting 20s for p1: rate_limit" || c.Arg("thread_ts") != m.TS {
		t.Fatalf("status = %q", c.Arg("status"))
	}
	if ms := e.messages("C1", m.TS); len(ms) != 1 || !strings.Contains(ms[0].Text, "you said: hi") {
		t.Fatalf("not answered after the wait:%s", describeMessages(ms))
	}
}

// covers L1: the status is set again while the model is silent (Slack drops it
// after two minutes), and no longer once the answer shows.
func TestE2E_SlackLive_L1_StatusRefreshedUntilTheAnswerShows(t *testing.T) {
	e := startE2E(t, live, func(st *setup) { st.config.StatusRefresh = 40 * time.Millisecond })
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 300 * time.Millisecond, Reply: "slow answer"})
	m := e.slack.Mention("C1", "U1", "hi", "")
	e.messages("C1", m.TS)
	start := e.slack.CallsOf("chat.startStream")[0]
	before, after := 0, 0
	for _, c := range e.slack.CallsOf("assistant.threads.setStatus") {
		switch {
		case c.Arg("status") == "":
		case c.Seq < start.Seq:
			before++
		default:
			after++
		}
	}
	// One set already on its way when the text appeared may land after it; it
	// is then cleared.
	if before < 3 || after > 1 {
		t.Fatalf("status set %d times before the first text (want ≥ 3) and %d after (want at most the one in flight)", before, after)
	}
	if got := e.slack.Status("C1", m.TS); got != "" {
		t.Fatalf("status after the answer = %q", got)
	}
}

// covers L1: a status call Slack rate limits is dropped: the reply is not held
// up and no status call is made until the Retry-After has passed.
func TestE2E_SlackLive_L1_StatusRateLimitedIsDropped(t *testing.T) {
	e := startE2E(t, live)
	// The model takes 100 ms to start: the refused status call is long answered
	// when the next turn begins.
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 100 * time.Millisecond})
	e.slack.RateLimitNext("assistant.threads.setStatus", 30)
	m := e.slack.Mention("C1", "U1", "hi", "")
	if ms := e.messages("C1", m.TS); len(ms) != 1 || !strings.Contains(ms[0].Text, "you said: hi") {
		t.Fatalf("reply:%s", describeMessages(ms))
	}
	m2 := e.slack.Mention("C2", "U1", "again", "")
	e.messages("C2", m2.TS)
	if calls := e.slack.CallsOf("assistant.threads.setStatus"); len(calls) != 1 || calls[0].Error != "ratelimited" {
		t.Fatalf("status calls = %+v, want the one refused and none during its Retry-After", calls)
	}
}

// covers L4: /model typed in a channel offers the models in an ephemeral select;
// picking one sends the choice back over Socket Mode (acknowledged), and it is
// applied like "/model <ref>": to new threads of the channel. In a thread,
// "!model" offers the picker to the one who typed it and the pick sets the
// thread's model.
func TestE2E_SlackLive_L4_ModelPickerSetsTheModel(t *testing.T) {
	e := startE2E(t, live, asAdmin)
	e.slack.Slash("/model", "", "C1", "U1")
	picker, err := e.slack.WaitPost(wait, func(p fakeslack.Post) bool { return p.Ephemeral && strings.Contains(string(p.Blocks), "static_select") })
	if err != nil {
		t.Fatal(err)
	}
	if picker.Method != "chat.postEphemeral" || picker.User != "U1" || picker.Channel != "C1" {
		t.Fatalf("picker = %+v", picker)
	}
	for _, ref := range []string{"p1/alpha", "p2/beta", "p3/gamma", "default"} {
		if !strings.Contains(string(picker.Blocks), `"value":"/model `+ref+`"`) {
			t.Fatalf("picker lacks %s: %s", ref, picker.Blocks)
		}
	}
	if _, err := e.slack.Pick(picker, "U2", "/model p3/gamma"); err == nil {
		t.Fatal("someone else picked in U1's ephemeral picker")
	}
	pick, err := e.slack.Pick(picker, "U1", "/model p3/gamma")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitAck(pick.EnvelopeID, wait); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitPost(wait, func(p fakeslack.Post) bool {
		return p.Ephemeral && p.User == "U1" && strings.HasPrefix(p.Text, "new threads in #general will use p3/gamma")
	}); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if ch := e.entry("slack:T1:C1"); ch.ModelOverride != "gamma" || ch.ModelOverrideSource != "user" {
		t.Fatalf("the pick did not set the channel's model: %+v", ch)
	}

	m := e.slack.Mention("C1", "U2", "start a thread", "")
	e.messages("C1", m.TS)
	e.slack.ThreadMessage("C1", "U2", "!model", m.TS)
	tp, err := e.slack.WaitPost(wait, func(p fakeslack.Post) bool {
		return p.Ephemeral && p.ThreadTS == m.TS && strings.Contains(string(p.Blocks), "static_select")
	})
	if err != nil {
		t.Fatal(err)
	}
	if tp.User != "U2" {
		t.Fatalf("thread picker shown to %q, want U2 who asked", tp.User)
	}
	if _, err := e.slack.Pick(tp, "U2", "/model p2/beta"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.WaitPost(wait, func(p fakeslack.Post) bool {
		return p.Ephemeral && p.ThreadTS == m.TS && strings.HasPrefix(p.Text, "model set to p2/beta")
	}); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if th := e.entry("slack:T1:C1:" + m.TS); th.ModelOverride != "beta" || th.ModelOverrideSource != "user" {
		t.Fatalf("the pick did not set the thread's model: %+v", th)
	}
	if ch := e.entry("slack:T1:C1"); ch.ModelOverride != "gamma" {
		t.Fatalf("the thread's pick changed the channel default: %+v", ch)
	}
}

// The AI app container: a new chat gets the configured suggested prompts; its
// first question names it and is answered in it; each chat is its own session,
// apart from the DM's own conversation.
func TestE2E_SlackLive_AssistantThreadOwnSessionAndPrompts(t *testing.T) {
	prompts := []string{"Summarise this channel", "What model are you on?"}
	e := startE2E(t, live, func(st *setup) { st.config.SuggestedPrompts = prompts })
	started := e.slack.AssistantThreadStarted("D1", "U1", "")
	c := e.call("assistant.threads.setSuggestedPrompts", nil)
	var got []struct{ Title, Message string }
	if err := json.Unmarshal([]byte(c.Arg("prompts")), &got); err != nil || len(got) != 2 || got[1].Message != prompts[1] {
		t.Fatalf("prompts = %s (%v)", c.Arg("prompts"), err)
	}
	if c.Arg("channel_id") != "D1" || c.Arg("thread_ts") != started.TS {
		t.Fatalf("prompts set on %s/%s, want D1/%s", c.Arg("channel_id"), c.Arg("thread_ts"), started.TS)
	}

	e.slack.AssistantMessage("D1", "U1", "what is a  detour?", started.TS)
	if ms := e.messages("D1", started.TS); len(ms) != 1 || !strings.Contains(ms[0].Text, "you said: what is a  detour?") {
		t.Fatalf("chat answer:%s", describeMessages(ms))
	}
	if title := e.call("assistant.threads.setTitle", nil); title.Arg("title") != "what is a detour?" || title.Arg("thread_ts") != started.TS {
		t.Fatalf("title = %+v", title.Args)
	}
	e.entry("slack:T1:D1:" + started.TS) // the chat's own session

	second := e.slack.AssistantThreadStarted("D1", "U1", "")
	e.slack.AssistantMessage("D1", "U1", "another chat", second.TS)
	e.messages("D1", second.TS)
	e.slack.DM("D1", "U1", "plain DM")
	e.messages("D1", "")
	if hist := e.history("slack:T1:D1:" + second.TS); len(hist) != 2 || strings.Contains(strings.Join(hist, " "), "detour?") {
		t.Fatalf("second chat's history = %q: chats share a session", hist)
	}
	if hist := e.history("slack:T1:D1"); len(hist) != 2 || !strings.Contains(hist[0], "plain DM") {
		t.Fatalf("the DM's own conversation = %q", hist)
	}
}

// covers T3, L2: hostile model output streamed word by word never forms a live
// mention or a link to anything but http(s)/mailto, in any streamed call or in
// the final message (the world also checks every post for live mentions).
func TestE2E_SlackLive_T3_StreamedHostileOutputNeverPings(t *testing.T) {
	e := startE2E(t, live)
	hostile := "hey <!here> and <@U123> see [x](javascript:alert(1)) or [docs](https://example.com) @channel <!subteam^S1>"
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 10 * time.Millisecond, Reply: hostile})
	m := e.slack.Mention("C1", "U1", "say something rude", "")
	ms := e.messages("C1", m.TS)
	if len(ms) != 1 || !ms[0].Streamed {
		t.Fatalf("want one streamed message:%s", describeMessages(ms))
	}
	streamed := ""
	for _, c := range e.slack.CallLog() {
		if strings.HasSuffix(c.Method, "Stream") {
			streamed += c.Arg("markdown_text")
		}
	}
	if !strings.Contains(streamed, "hey") || !strings.Contains(streamed, "[docs](https://example.com)") {
		t.Fatalf("streamed text = %q", streamed)
	}
	if m := fakeslack.LiveMentions(streamed, false); len(m) > 0 || strings.Contains(streamed, "](javascript") || strings.Contains(streamed, "@channel") {
		t.Fatalf("streamed text pings or links: %q (%v)", streamed, m)
	}
	for _, v := range ms[0].Versions {
		if m := fakeslack.LiveMentions(v, false); len(m) > 0 {
			t.Fatalf("a version pings %v: %q", m, v)
		}
	}
}
