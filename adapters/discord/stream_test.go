package discord

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/internal/testkit/fakediscord"
)

func contents(ms []fakediscord.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Content
	}
	return out
}

// question mentions the bot in C1 and returns the Inbound it became.
func (h *harness) question() adapters.Inbound {
	h.t.Helper()
	h.fake.SendMention("G1", "C1", "U1", "a question")
	return h.recv()
}

func (h *harness) waitLatest(ch string, want []string) {
	h.t.Helper()
	err := fakediscord.WaitFor(wait, func() bool { return strings.Join(contents(h.fake.Latest(ch)), "\x00") == strings.Join(want, "\x00") })
	if err != nil {
		h.t.Fatalf("%s shows %d messages %.80q, want %d %.80q", ch, len(h.fake.Latest(ch)), contents(h.fake.Latest(ch)), len(want), want)
	}
}

func longText(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "Paragraph %d with some words in it to fill the line.\n\n", i)
	}
	return b.String()
}

// covers L2, L3: a text past 2,000 characters continues in further messages; a
// text that does not extend it (a fallback's answer) replaces it in place: the
// first message is edited and the continuations are deleted; Finish leaves the
// final answer alone, in the first message.
func TestStream_L3_ReplacementEditsInPlaceAndDeletesSurplus(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.EditEvery = time.Millisecond })
	in := h.question()
	st, err := h.a.StartStream(h.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	long := longText(4500)
	if err := st.Update(h.ctx, long); err != nil {
		t.Fatal(err)
	}
	h.waitLatest("C1", adapters.Split(long, MaxMessageLen, textLen))
	first := h.fake.Latest("C1")[0]
	if err := st.Update(h.ctx, "[fallback] short"); err != nil {
		t.Fatal(err)
	}
	h.waitLatest("C1", []string{"[fallback] short"})
	if err := st.Finish(h.ctx, adapters.Outbound{Kind: adapters.KindReply, Text: "[fallback] short and complete"}); err != nil {
		t.Fatal(err)
	}
	got := h.fake.Latest("C1")
	if len(got) != 1 || got[0].ID != first.ID || got[0].Content != "[fallback] short and complete" {
		t.Fatalf("latest = %+v, want the first message edited to the answer", got)
	}
	if d := h.fake.Deletes(); len(d) != 2 {
		t.Fatalf("deletes = %+v, want both continuations", d)
	}
	for _, m := range h.fake.Messages() {
		if !m.Deleted && strings.Contains(m.Content, "Paragraph") {
			t.Fatalf("message %s still shows replaced text", m.ID)
		}
	}
}

// covers L2: updates faster than EditEvery are coalesced: the newest text wins and
// what came between is never sent; Finish shows the final text.
func TestStream_L2_UpdatesCoalesce(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.EditEvery = 10 * time.Second })
	in := h.question()
	st, err := h.a.StartStream(h.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	for i := range 100 {
		text += fmt.Sprintf("w%d ", i)
		if err := st.Update(h.ctx, text); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Finish(h.ctx, adapters.Outbound{Kind: adapters.KindReply, Text: text}); err != nil {
		t.Fatal(err)
	}
	posts, edits := 0, len(h.fake.Edits())
	for _, r := range h.fake.Requests() {
		if r.Method == "POST" && r.Path == "/channels/C1/messages" {
			posts++
		}
	}
	if posts != 1 || edits > 1 {
		t.Fatalf("%d posts, %d edits for 100 updates within one edit interval: want 1 and at most 1", posts, edits)
	}
	h.waitLatest("C1", []string{strings.TrimSpace(text)})
}

// covers L2: a stream that never showed anything posts the final answer whole,
// replying to the question.
func TestStream_L2_FinishWithNothingShownPostsWhole(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	in := h.question()
	st, err := h.a.StartStream(h.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(h.ctx, "   "); err != nil { // blank: nothing to show yet
		t.Fatal(err)
	}
	if err := st.Finish(h.ctx, adapters.Outbound{Kind: adapters.KindError, Text: "every model failed"}); err != nil {
		t.Fatal(err)
	}
	got := h.fake.Latest("C1")
	if len(got) != 1 || got[0].Content != "every model failed" || got[0].Reference == "" || len(h.fake.Edits()) != 0 {
		t.Fatalf("latest = %+v, edits %d", got, len(h.fake.Edits()))
	}
}

// covers L3: when the final edit fails, the partial text is taken down and the
// error returned, so the router's whole post is the only version shown.
func TestStream_L3_FailedFinishTakesPartialTextDown(t *testing.T) {
	t.Parallel()
	h := start(t, func(c *Config) { c.EditEvery = time.Millisecond })
	in := h.question()
	st, err := h.a.StartStream(h.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(h.ctx, "partial words"); err != nil {
		t.Fatal(err)
	}
	h.waitLatest("C1", []string{"partial words"})
	h.fake.FailNext("PATCH /channels/{id}/messages/{mid}", 500, 0)
	if err := st.Finish(h.ctx, adapters.Outbound{Kind: adapters.KindReply, Text: "the answer"}); err == nil {
		t.Fatal("Finish reported success")
	}
	if got := h.fake.Latest("C1"); len(got) != 0 {
		t.Fatalf("latest = %+v, want the partial text taken down", got)
	}
}

// Answers to application commands are not streamed: they stay interaction answers.
func TestStream_InteractionAnswersNotStreamed(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	if _, err := h.a.StartStream(h.ctx, adapters.Inbound{ReplyTo: "interaction:1:C1", Native: true}); err == nil {
		t.Fatal("an interaction answer was streamed")
	}
}

// covers L4: the menu holds Discord's 25 options at most, skips choices that do
// not fit its 100-character fields, and is absent without choices.
func TestPickerComponents_L4_DiscordLimits(t *testing.T) {
	t.Parallel()
	var many []adapters.Choice
	for i := range 30 {
		many = append(many, adapters.Choice{Label: fmt.Sprintf("p/m%d", i), Command: fmt.Sprintf("/model p/m%d", i)})
	}
	long := adapters.Choice{Label: "long", Command: "/model " + strings.Repeat("x", 100)}
	tests := []struct {
		name    string
		choices []adapters.Choice
		want    int // options; 0 = no menu
	}{
		{"none", nil, 0},
		{"thirty", many, 25},
		{"too long and a duplicate", []adapters.Choice{long, many[0], many[0], {Label: "", Command: "/model x"}}, 1},
	}
	for _, tc := range tests {
		comps := pickerComponents(tc.choices, nil)
		if tc.want == 0 {
			if comps != nil {
				t.Errorf("%s: a menu without choices", tc.name)
			}
			continue
		}
		b, _ := (comps[0]).MarshalJSON()
		if n := strings.Count(string(b), `"value":`); n != tc.want || !strings.Contains(string(b), `"custom_id":"`+pickID+`"`) {
			t.Errorf("%s: %d options, want %d: %s", tc.name, n, tc.want, b)
		}
	}
}

func TestThreadName(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"How do I bake bread?", "How do I bake bread?"},
		{"  spaced   out\twords \nsecond line", "spaced out words"},
		{"", threadFallback},
		{strings.Repeat("word ", 40), strings.TrimSpace(strings.Repeat("word ", 19)) + "…"},
		{strings.Repeat("é", 150), strings.Repeat("é", 99) + "…"},
	}
	for _, tc := range tests {
		got := threadName(tc.in)
		if got != tc.want || len([]rune(got)) > maxThreadName {
			t.Errorf("threadName(%.20q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
