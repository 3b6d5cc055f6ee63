package slack_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	slackgo "github.com/slack-go/slack"

	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/e2e"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
)

// covers H1, H2, H3 through Slack: mentioned in a thread of 12 earlier
// messages it did not start, the bot reads them with conversations.replies
// (paginated), and the model gets each with its speaker, without the bot's own
// earlier post; a later mention reads nothing again.
func TestE2E_H1_SlackThreadContext(t *testing.T) {
	e := startE2E(t, func(st *setup) { st.fake.RepliesPageSize = 5 })
	root := e.slack.ChannelMessage("C1", "U2", "the release is blocked on the migration", "")
	said := []string{"the release is blocked on the migration"}
	for i := 1; i <= 11; i++ {
		text := fmt.Sprintf("note %02d: step %d of the migration", i, i)
		e.slack.ThreadMessage("C1", fmt.Sprintf("U%d", 2+i%3), text, root.TS)
		said = append(said, text)
	}
	// The bot's own earlier post in that thread is never context.
	bot := slackgo.New(e2eBot, slackgo.OptionAPIURL(e.slack.URL()))
	if _, _, err := bot.PostMessage("C1", slackgo.MsgOptionText("↪️ model fallback: an old notice", false), slackgo.MsgOptionTS(root.TS)); err != nil {
		t.Fatal(err)
	}
	e.slack.Mention("C1", "U1", "what is blocking the release?", root.TS)
	ps := e.waitThread("C1", root.TS, 2)
	if !strings.Contains(ps[len(ps)-1].Text, "what is blocking the release?") {
		t.Fatalf("answer:%s", describe(ps))
	}
	p := e.LastPrompt("alpha")
	for i, s := range said {
		who := "slack:U2"
		if i > 0 {
			who = fmt.Sprintf("slack:U%d", 2+i%3)
		}
		if !strings.Contains(p, "- "+who+": "+s) {
			t.Fatalf("H2: the prompt lacks %q by %s:\n%s", s, who, p)
		}
	}
	if strings.Contains(p, "an old notice") {
		t.Fatalf("H2: the bot's own post reached the model:\n%s", p)
	}
	if strings.Index(p, said[0]) > strings.Index(p, said[11]) || strings.Index(p, said[11]) > strings.Index(p, "user: what is blocking") {
		t.Fatalf("H2: oldest first, then the question:\n%s", p)
	}
	reads := e.slack.Calls("conversations.replies")
	if reads < 3 {
		t.Fatalf("12 replies in pages of 5 take 3 reads, got %d", reads)
	}
	if en := e.entry("slack:T1:C1:" + root.TS); !en.ThreadRead || en.ThreadContext == "" {
		t.Fatalf("H3: not stored: %+v", en)
	}
	e.slack.Mention("C1", "U3", "and who owns it?", root.TS)
	e.waitThread("C1", root.TS, 3)
	if got := e.slack.Calls("conversations.replies"); got != reads {
		t.Fatalf("H3: the thread was read again (%d reads, was %d)", got, reads)
	}
	if !strings.Contains(e.LastPrompt("alpha"), said[5]) {
		t.Fatal("H2: the earlier messages are part of every later prompt")
	}
}

// covers I1, I3, I5, N1 through Slack: a screenshot sent to a text-only
// primary goes to the image-capable fallback with a notice saying why; the
// file is downloaded with the bot token from Slack only; the next text message
// is back on the primary.
func TestE2E_I5_SlackImageToTextOnlyPrimary(t *testing.T) {
	e := startE2E(t, func(st *setup) { st.yaml = "models:\n  p2/beta: {input: [text, image]}\n" })
	e.llm.TextOnly("alpha") // the fake refuses images to it, as a model without vision does
	shot := e2e.PNG()
	m := e.slack.MentionFiles("C1", "U1", "what does this show?", "", e.slack.AddFile("screenshot.png", "image/png", shot))
	ps := e.waitThread("C1", m.TS, 2)
	if !isNotice(ps[0]) || ps[0].Shown() != "↪️ model fallback: p2/beta (selected p1/alpha; does not take images)" {
		t.Fatalf("N1 notice:%s", describe(ps))
	}
	if !strings.Contains(ps[1].Text, "[saw image 1: image/png, "+strconv.Itoa(len(shot))+" bytes") {
		t.Fatalf("I1: the answer does not prove the image reached the model:%s", describe(ps))
	}
	if n := e.llm.CallCount(fakeprovider.Filter{Model: "alpha"}); n != 0 {
		t.Fatalf("I5: %d call(s) to the text-only primary", n)
	}
	if d := e.slack.Downloads(); len(d) != 1 || !d[0].Token || !d[0].Served {
		t.Fatalf("I3: downloads %+v", d)
	}
	if hits := e.slack.SignInHits(); len(hits) != 0 {
		t.Fatalf("I3: the sign-in host was reached: %+v", hits)
	}
	e.slack.ThreadMessage("C1", "U1", "thanks, and in words?", m.TS)
	ps = e.waitThread("C1", m.TS, 3)
	if isNotice(ps[2]) || !strings.HasPrefix(ps[2].Text, "[p1/alpha]") {
		t.Fatalf("the next text turn is back on p1/alpha, with no notice:%s", describe(ps))
	}
	// I4: a file shared alone, with no text, is answered.
	e.slack.ShareFiles("D1", "U1", "", "", e.slack.AddFile("notes.txt", "text/plain", []byte("ship on friday")))
	if _, err := e.slack.WaitPost(wait, func(p fakeslack.Post) bool { return p.Channel == "D1" && strings.Contains(p.Text, "[p1/alpha]") }); err != nil {
		t.Fatal(err)
	}
	if p := e.LastPrompt("alpha"); !strings.Contains(p, "[file notes.txt]\nship on friday") {
		t.Fatalf("I1: the text file is not in the prompt:\n%s", p)
	}
}

// covers I2, I3 through Slack: a 30 MB file is refused with words before any
// download; one whose size Slack does not state is cut at the cap; without
// files:read Slack's sign-in page is refused, never followed.
func TestE2E_I2_SlackLargeFileRefused(t *testing.T) {
	e := startE2E(t)
	m := e.slack.MentionFiles("C1", "U1", "look at this", "", e.slack.AddLargeFile("holiday.png", "image/png", 30<<20, 30<<20))
	ps := e.waitThread("C1", m.TS, 2)
	if want := "📎 not read: holiday.png (30.0 MB; files over 5.0 MB are not read)"; ps[0].Shown() != want {
		t.Fatalf("I2: notice %q, want %q:%s", ps[0].Shown(), want, describe(ps))
	}
	if d := e.slack.Downloads(); len(d) != 0 {
		t.Fatalf("I2: a file over the cap was downloaded: %+v", d)
	}
	m = e.slack.MentionFiles("C2", "U1", "and this", "", e.slack.AddLargeFile("clip.png", "image/png", 30<<20, 0))
	ps = e.waitThread("C2", m.TS, 2)
	if want := "📎 not read: clip.png (larger than 5.0 MB, the most a file may have)"; ps[0].Shown() != want {
		t.Fatalf("I2: notice %q, want %q", ps[0].Shown(), want)
	}
	// An app installed without files:read (a manifest from before it).
	manifest, err := os.ReadFile(filepath.Join("..", "..", "slack-manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.slack.InstallManifest(bytes.ReplaceAll(manifest, []byte("- files:read"), nil)); err != nil {
		t.Fatal(err)
	}
	m = e.slack.MentionFiles("C3", "U1", "one more", "", e.slack.AddFile("a.png", "image/png", e2e.PNG()))
	ps = e.waitThread("C3", m.TS, 2)
	if !strings.Contains(ps[0].Shown(), "a.png (it could not be downloaded: slack answered with its sign-in page instead of the file: the bot token needs the files:read scope") {
		t.Fatalf("I3: notice %q", ps[0].Shown())
	}
	if hits := e.slack.SignInHits(); len(hits) != 0 {
		t.Fatalf("I3: the redirect to the sign-in host was followed: %+v", hits)
	}
}

// covers R16 through Slack: in a long thread the oldest turns are replaced by
// a summary the model wrote, which later prompts carry instead of them.
func TestE2E_R16_SlackSummaries(t *testing.T) {
	e := startE2E(t, func(st *setup) {
		st.yaml = "models:\n  p1/alpha: {context_window: 600}\n"
	})
	m := e.slack.Mention("C1", "U1", "turn 0 "+strings.Repeat("word ", 80), "")
	e.waitThread("C1", m.TS, 1)
	for i := 1; i < 5; i++ {
		e.slack.ThreadMessage("C1", "U1", fmt.Sprintf("turn %d %s", i, strings.Repeat("word ", 80)), m.TS)
		e.waitThread("C1", m.TS, i+1)
	}
	en := e.entry("slack:T1:C1:" + m.TS)
	if en.Summary == "" || en.CompactionCount == 0 {
		t.Fatalf("R16: no summary: %+v", en)
	}
	p := e.LastPrompt("alpha")
	if !strings.Contains(p, "Summary of the earlier part of this conversation") || !strings.Contains(p, en.Summary) || strings.Contains(p, "user: turn 0 ") {
		t.Fatalf("R16: the last prompt should carry the summary instead of turn 0:\n%s", p)
	}
	for _, h := range e.history("slack:T1:C1:" + m.TS) {
		if strings.HasPrefix(h, "turn 0 ") {
			t.Fatal("R16: the summarised turn is still in the history")
		}
	}
}

var usageLine = regexp.MustCompile(`your usage today \(2026-03-01 UTC\): (\d+) paid call\(s\), ([\d,]+) tokens in, ([\d,]+) out`)

// usageOf reads /usage's line of today.
func usageOf(t *testing.T, text string) (calls, in, out int64) {
	t.Helper()
	m := usageLine.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no usage line in %q", text)
	}
	n := func(s string) int64 {
		v, _ := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
		return v
	}
	return n(m[1]), n(m[2]), n(m[3])
}

// covers U2, U3, E1 through Slack: /usage adds up exactly the calls and tokens
// the fake provider's call log holds, a failed call and the check of the
// provider it made down included.
func TestE2E_U3_SlackUsageMatchesTheProvider(t *testing.T) {
	e := startE2E(t)
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeServer500, Times: 1})
	for i, ch := range []string{"C1", "C2", "C3"} {
		m := e.slack.Mention(ch, "U1", fmt.Sprintf("question %d about the release", i), "")
		e.waitThread(ch, m.TS, 1)
	}
	calls, in, out := e.ProviderTotals()
	m := e.slack.Mention("C4", "U1", "!usage", "")
	ps := e.waitThread("C4", m.TS, 1)
	gc, gi, gout := usageOf(t, ps[len(ps)-1].Text)
	if gc != calls || gi != in || gout != out || calls != 5 {
		t.Fatalf("U3: /usage says %d calls, %d in, %d out; the provider's log %d calls, %d in, %d out", gc, gi, gout, calls, in, out)
	}
}

// covers M1: the conversation tests again on Postgres (skipped without
// DETOUR_TEST_POSTGRES_DSN; .ci/with-postgres sets it).
func TestE2E_SlackConversationsOnPostgres(t *testing.T) {
	e2e.OnPostgres(t,
		TestE2E_H1_SlackThreadContext,
		TestE2E_I5_SlackImageToTextOnlyPrimary,
		TestE2E_I2_SlackLargeFileRefused,
		TestE2E_R16_SlackSummaries,
		TestE2E_U3_SlackUsageMatchesTheProvider,
	)
}
