package slack

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
)

// threadIn is a message in thread ts of channel ch.
func threadIn(ch, ts, user string) adapters.Inbound {
	return adapters.Inbound{Channel: Name, SessionKey: "slack:T1:" + ch + ":" + ts, User: "slack:" + user,
		ReplyTo: target{Channel: ch, ThreadTS: ts}.encode(), Text: "q"}
}

// streamAll streams words into a new stream, a word every millisecond like a
// fast model, and finishes it.
func (h *harness) streamAll(in adapters.Inbound, words []string, final adapters.Outbound) {
	h.t.Helper()
	ctx := context.Background()
	s, err := h.a.StartStream(ctx, in)
	if err != nil {
		h.t.Fatal(err)
	}
	var sofar strings.Builder
	for _, w := range words {
		sofar.WriteString(w)
		if err := s.Update(ctx, sofar.String()); err != nil {
			h.t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // the model's pace, not a wait for the adapter
	}
	final.ReplyTo, final.Channel, final.SessionKey = in.ReplyTo, Name, in.SessionKey
	if err := s.Finish(ctx, final); err != nil {
		h.t.Fatalf("Finish: %v", err)
	}
}

func words(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("w%d ", i)
	}
	return out
}

// covers T3, L2: what is streamed renders no mention and no link to anything
// but http(s) or mailto, and it only ever grows: the safe text of a prefix is a
// prefix of the safe text of the whole.
func TestStreamSafe_T3_NoLiveMentionAndPrefixStable(t *testing.T) {
	cases := []struct {
		in       string
		contains []string
		not      []string
	}{
		{in: "hi <!here> and <@U123> and <#C1> <!subteam^S1>", not: []string{"<!", "<@", "<#"}},
		{in: "ping @channel and @here and @everyone", not: []string{"@channel", "@here", "@everyone"}},
		{in: "[x](javascript:alert(1)) [y](!channel)", not: []string{"](javascript", "](!channel"}},
		{in: "[docs](https://example.com/a) [mail](mailto:a@example.com)", contains: []string{"[docs](https://example.com/a)", "](mailto:"}},
		{in: "a ] b [c] (d)", contains: []string{"a ] b [c] (d)"}},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			out := streamSafe(c.in)
			if m := fakeslack.LiveMentions(out, false); len(m) > 0 {
				t.Errorf("live mentions %v in %q", m, out)
			}
			for _, s := range c.not {
				if strings.Contains(out, s) {
					t.Errorf("%q still holds %q", out, s)
				}
			}
			for _, s := range c.contains {
				if !strings.Contains(out, s) {
					t.Errorf("%q lost %q", out, s)
				}
			}
			checkPrefixStable(t, c.in)
		})
	}
	// A tail that cannot be judged yet is held back, not guessed.
	for in, want := range map[string]string{"see [x](htt": "see [x", "see [x]": "see [x", "see [x](http://a": "see [x](http://a"} {
		if got := streamSafe(in); got != want {
			t.Errorf("streamSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

func checkPrefixStable(t *testing.T, in string) {
	t.Helper()
	whole := streamSafe(in)
	for i := range len(in) + 1 {
		if !utf8.ValidString(in[:i]) {
			continue
		}
		if p := streamSafe(in[:i]); !strings.HasPrefix(whole, p) {
			t.Fatalf("not prefix-stable at %d: %q is not a prefix of %q", i, p, whole)
		}
	}
}

// covers T3, L2
func FuzzStreamSafe_T3_NoLiveMention(f *testing.F) {
	for _, s := range []string{"<!here>", "[x](javascript:1)", "@channel", "[a](https://b) <@U1>", "]]((", "&lt;!here&gt;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !utf8.ValidString(in) {
			return
		}
		out := streamSafe(in)
		if m := fakeslack.LiveMentions(out, false); len(m) > 0 {
			t.Fatalf("live mentions %v in %q", m, out)
		}
		checkPrefixStable(t, in)
	})
}

// covers L2: many replies streamed at once in one workspace stay inside every
// method's per-minute limit (the strict fake answers 429 otherwise); replies
// beyond chat.startStream's limit are posted whole; every answer arrives once.
func TestStream_L2_ManyStreamsStayInsideSlacksLimits(t *testing.T) {
	h := start(t, nil)
	const n = 30
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			in := threadIn(fmt.Sprintf("C%d", i), "1.000001", "U1")
			h.streamAll(in, words(40), adapters.Outbound{Kind: adapters.KindReply, Text: strings.Join(words(40), "")})
		})
	}
	wg.Wait()
	if th := h.srv.Throttles(); len(th) != 0 {
		t.Fatalf("Slack refused %d calls: %+v", len(th), th[0])
	}
	want := strings.TrimSpace(strings.Join(words(40), ""))
	for i := range n {
		ms := h.srv.Messages(fmt.Sprintf("C%d", i), "1.000001")
		if len(ms) != 1 || strings.TrimSpace(ms[0].Shown()) != want {
			t.Fatalf("thread %d: %+v", i, ms)
		}
	}
	if s := len(h.srv.CallsOf("chat.startStream")); s == 0 || s > fakeslack.Tier2 {
		t.Fatalf("%d streams started", s)
	}
}

// covers L2: an appendStream Slack rate limits is sent again after Retry-After;
// the answer ends complete, nothing doubled.
func TestStream_L2_AppendRateLimitedIsRetried(t *testing.T) {
	h := start(t, nil)
	h.srv.RateLimitNext("chat.appendStream", 2)
	text := strings.Join(words(10), "")
	h.streamAll(threadIn("C1", "1.000001", "U1"), words(10), adapters.Outbound{Kind: adapters.KindReply, Text: text})
	ms := h.srv.Messages("C1", "1.000001")
	if len(ms) != 1 || ms[0].Text != strings.TrimSpace(text) {
		t.Fatalf("messages = %+v", ms)
	}
	if len(h.srv.Throttles()) != 1 {
		t.Fatalf("throttles = %+v", h.srv.Throttles())
	}
	for _, v := range ms[0].Versions {
		if strings.Count(v, "w1 ") > 1 {
			t.Fatalf("text doubled: %q", v)
		}
	}
}

// covers L3: text that no longer extends what was streamed (another attempt
// answers) is never edited into the stream with chat.update, which no Slack page
// documents for streams: the streamed message is deleted and a new stream
// started; no partial text stays.
func TestStream_L3_UneditableMessageIsReplacedByANewPost(t *testing.T) {
	h := start(t, nil)
	in := threadIn("C1", "1.000001", "U1")
	ctx := context.Background()
	s, _ := h.a.StartStream(ctx, in)
	_ = s.Update(ctx, "partial words of the primary")
	if _, err := h.srv.WaitCall(wait, func(c fakeslack.Call) bool { return c.Method == "chat.startStream" }); err != nil {
		t.Fatal(err)
	}
	_ = s.Update(ctx, "the fallback")
	err := s.Finish(ctx, adapters.Outbound{Kind: adapters.KindReply, Channel: Name, ReplyTo: in.ReplyTo, Text: "the fallback answers"})
	if err != nil {
		t.Fatal(err)
	}
	ms := h.srv.Messages("C1", "1.000001")
	if len(ms) != 1 || !ms[0].Streamed || ms[0].Streaming || ms[0].Shown() != "the fallback answers" {
		t.Fatalf("messages = %+v", ms)
	}
	for _, m := range h.srv.AllMessages() {
		if !m.Deleted && strings.Contains(m.Shown(), "primary") {
			t.Fatalf("partial text still shown: %+v", m)
		}
	}
	if n, d := len(h.srv.CallsOf("chat.update")), len(h.srv.CallsOf("chat.delete")); n != 0 || d != 1 {
		t.Fatalf("%d chat.update and %d chat.delete calls, want none and the partial stream's", n, d)
	}
}

// covers L2, L5: a long answer streams into one message (at most 12,000
// characters), then continues in a further one; they hold the answer once.
func TestStream_L2_LongAnswerEndsSplit(t *testing.T) {
	h := start(t, nil)
	ws := make([]string, 300) // about 18,000 characters, 60 a word
	for i := range ws {
		ws[i] = fmt.Sprintf("%-59s ", fmt.Sprintf("w%d", i))
	}
	final := strings.Join(ws, "")
	h.streamAll(threadIn("C1", "1.000001", "U1"), ws, adapters.Outbound{Kind: adapters.KindReply, Text: final})
	ms := h.srv.Messages("C1", "1.000001")
	if len(ms) < 2 || !ms[0].Streamed || !ms[1].Streamed {
		t.Fatalf("%d messages", len(ms))
	}
	var all strings.Builder
	for _, m := range ms {
		if utf8.RuneCountInString(m.Shown()) > maxStreamed {
			t.Fatalf("a message holds %d characters", utf8.RuneCountInString(m.Shown()))
		}
		all.WriteString(m.Text + " ")
	}
	if got := strings.Join(strings.Fields(all.String()), " "); got != strings.Join(strings.Fields(final), " ") {
		t.Fatalf("the messages do not hold the answer once (%d vs %d characters)", len(got), len(final))
	}
	for _, v := range ms[0].Versions {
		if utf8.RuneCountInString(v) > maxStreamed { // one part of the answer
			t.Fatalf("streamed message grew to %d characters", utf8.RuneCountInString(v))
		}
	}
}

// covers L2: a direct message outside a thread cannot stream (Slack streams
// replies in threads): the answer is posted whole, once.
func TestStream_L2_TopLevelDirectMessagePostsWhole(t *testing.T) {
	h := start(t, nil)
	in := adapters.Inbound{Channel: Name, SessionKey: "slack:T1:D1", User: "slack:U1", ReplyTo: "D1"}
	h.streamAll(in, words(5), adapters.Outbound{Kind: adapters.KindReply, Text: "the answer"})
	if n := len(h.srv.CallsOf("chat.startStream")); n != 0 {
		t.Fatalf("%d stream calls", n)
	}
	if ms := h.srv.Messages("D1", ""); len(ms) != 1 || ms[0].Text != "the answer" {
		t.Fatalf("messages = %+v", ms)
	}
}

// covers L3: an error that ends the turn replaces the partial text.
func TestStream_L3_ErrorReplacesPartialText(t *testing.T) {
	h := start(t, nil)
	h.streamAll(threadIn("C1", "1.000001", "U1"), []string{"partial ", "words"},
		adapters.Outbound{Kind: adapters.KindError, Text: "all models are rate-limited"})
	ms := h.srv.Messages("C1", "1.000001")
	if len(ms) != 1 || ms[0].Text != "all models are rate-limited" || strings.Contains(ms[0].Shown(), "partial") {
		t.Fatalf("messages = %+v", ms)
	}
}

// covers L1: Stop clears a status that was set; StartProgress never waits for
// Slack, even a slow one.
func TestProgress_L1_NeverWaitsAndStopClears(t *testing.T) {
	h := start(t, nil)
	in := threadIn("C1", "1.000001", "U1")
	began := time.Now()
	ind := h.a.StartProgress(context.Background(), in)
	ind.Status("waiting 20s for p1: rate_limit")
	if d := time.Since(began); d > 50*time.Millisecond {
		t.Fatalf("StartProgress and Status took %v", d)
	}
	if _, err := h.srv.WaitCall(wait, func(c fakeslack.Call) bool {
		return c.Method == "assistant.threads.setStatus" && c.Arg("status") == "waiting 20s for p1: rate_limit"
	}); err != nil {
		t.Fatal(err)
	}
	ind.Stop()
	ind.Stop()
	if _, err := h.srv.WaitCall(wait, func(c fakeslack.Call) bool {
		return c.Method == "assistant.threads.setStatus" && c.Arg("status") == ""
	}); err != nil {
		t.Fatal(err)
	}
	if got := h.srv.Status("C1", "1.000001"); got != "" {
		t.Fatalf("status after Stop = %q", got)
	}
	// Outside a thread there is no status to show.
	none := h.a.StartProgress(context.Background(), adapters.Inbound{ReplyTo: "D1"})
	none.Status("x")
	none.Stop()
}

// covers L4: a picker where nobody in particular asked (no known asker) is
// posted in the thread for everyone; choices that do not fit Slack's sizes are
// left out, and a reply without any that fit is plain text.
func TestPicker_L4_SizesAndAudience(t *testing.T) {
	h := start(t, nil)
	long := "/model " + strings.Repeat("x", 200)
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C9|5.000001", SessionKey: "slack:T1:C9:5.000001",
		Text: "model: p1/alpha", Choices: []adapters.Choice{{Label: strings.Repeat("L", 90), Command: "/model p2/beta"}, {Label: "too long", Command: long}}})
	p, err := h.srv.WaitPost(wait, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Method != "chat.postMessage" || p.Ephemeral || p.ThreadTS != "5.000001" ||
		!strings.Contains(string(p.Blocks), `"value":"/model p2/beta"`) || strings.Contains(string(p.Blocks), "xxxx") {
		t.Fatalf("picker = %+v", p)
	}
	h.send(adapters.Outbound{Kind: adapters.KindReply, ReplyTo: "C9|6.000001", SessionKey: "slack:T1:C9:6.000001",
		Text: "only a long one", Choices: []adapters.Choice{{Label: "x", Command: long}}})
	p2, err := h.srv.WaitPost(wait, func(p fakeslack.Post) bool { return p.ThreadTS == "6.000001" })
	if err != nil {
		t.Fatal(err)
	}
	if len(p2.Blocks) != 0 || p2.Text != "only a long one" {
		t.Fatalf("plain answer = %+v", p2)
	}

	// A pick is an Inbound of the picker, in the picker's session.
	sent, err := h.srv.Pick(p, "U7", "/model p2/beta")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.WaitAck(sent.EnvelopeID, wait); err != nil {
		t.Fatal(err)
	}
	in := h.recv()
	if in.Text != "/model p2/beta" || in.SessionKey != "slack:T1:C9:5.000001" || in.User != "slack:U7" || !in.Native ||
		in.DefaultsFor != "" || decodeTarget(in.ReplyTo).User != "U7" || in.EventID == "" {
		t.Fatalf("inbound = %+v", in)
	}
}
