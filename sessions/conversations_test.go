//go:build cgo

package sessions

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/commands"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/testdb"
	"github.com/detourbot/detour/llm"
)

// team is a test channel that can read a conversation's earlier messages and
// the files of a message (adapters.HistoryReader, adapters.FileReader).
type team struct {
	recorder
	mu      sync.Mutex
	earlier []adapters.Earlier
	asked   []int             // max of each ReadEarlier call
	files   map[string][]byte // Ref -> content
	reads   []string          // Refs read
}

func newTeam() *team { return &team{recorder: recorder{name: "team"}, files: map[string][]byte{}} }

func (tm *team) ReadEarlier(_ context.Context, _ string, max int) ([]adapters.Earlier, error) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.asked = append(tm.asked, max)
	out := tm.earlier
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out, nil
}

func (tm *team) ReadFile(_ context.Context, f adapters.File, max int64) ([]byte, error) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.reads = append(tm.reads, f.Ref)
	b, ok := tm.files[f.Ref]
	if !ok {
		return nil, fmt.Errorf("no such file")
	}
	if int64(len(b)) > max {
		return nil, adapters.ErrFileTooLarge
	}
	return b, nil
}

func (tm *team) readCount() (earlier, files int) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return len(tm.asked), len(tm.reads)
}

// withTeam adds the team channel to the harness.
func withTeam(tm *team) harnessOpt {
	return func(_ *Config, h *harness) { h.extra = append(h.extra, tm) }
}

func (h *harness) sayTeam(tm *team, in adapters.Inbound) []adapters.Outbound {
	h.t.Helper()
	in.Channel = "team"
	if in.SessionKey == "" {
		in.SessionKey = "team:T1:C1:100.1"
	}
	if in.User == "" {
		in.User = "team:U1"
	}
	in.ReplyTo = "r"
	h.sayAs(in)
	return tm.take()
}

// lastPrompt is the prompt of the fake provider's last call to model.
func lastPrompt(t *testing.T, f *fakeprovider.Server, model string) []fakeprovider.Logged {
	t.Helper()
	calls := f.Calls()
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Model == model {
			return calls[i].Messages
		}
	}
	t.Fatalf("no call to %s in %+v", model, calls)
	return nil
}

func promptText(ms []fakeprovider.Logged) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(m.Role + ": " + m.Text + "\n")
	}
	return b.String()
}

// covers H1, H2, H3, H4: the first turn in a conversation begun without the bot
// reads its earlier messages once, each attributed to its speaker, without the
// messages of people access.users refuses; they go at the head of every prompt
// of the conversation, and neither a later turn nor a restart reads again.
func TestRouter_H1_EarlierMessagesReadOnce(t *testing.T) { testdb.Each(t, testEarlierMessages) }

func testEarlierMessages(t *testing.T, driver string) {
	tm := newTeam()
	tm.earlier = []adapters.Earlier{
		{User: "team:U2", Name: "Ann", Text: "the deploy is on friday"},
		{User: "team:U9", Name: "Stranger", Text: "SECRET from someone not allowed"},
		{User: "team:B1", Name: "ci", Bot: true, Text: "build 41 green"},
		{User: "team:U1", Name: "Bob", Text: "line one\nline two"},
	}
	h := newHarness(t, driver, withTeam(tm), func(c *Config, _ *harness) {
		c.ThreadMessages = 12
		c.Access.Users = []string{"team:U1", "team:U2"}
	})
	expect(t, h.sayTeam(tm, adapters.Inbound{Text: "what did we decide?", Earlier: "C1/100.1"}), "reply")
	p := promptText(lastPrompt(t, h.fake, "alpha"))
	for _, want := range []string{"Ann (team:U2): the deploy is on friday", "ci (bot team:B1): build 41 green",
		"Bob (team:U1): line one\n  line two", "user: what did we decide?"} {
		if !strings.Contains(p, want) {
			t.Fatalf("H2: prompt lacks %q:\n%s", want, p)
		}
	}
	if strings.Contains(p, "SECRET") {
		t.Fatalf("H4: a refused person's message reached the model:\n%s", p)
	}
	if strings.Index(p, "deploy is on friday") > strings.Index(p, "what did we decide?") {
		t.Fatalf("the earlier messages must come before the question:\n%s", p)
	}
	if n, _ := tm.readCount(); n != 1 || tm.asked[0] != 12 {
		t.Fatalf("H2: read %d times with max %v, want once with thread_context.max_messages 12", n, tm.asked)
	}
	// A later turn (even one still marked as a first address) does not read again.
	expect(t, h.sayTeam(tm, adapters.Inbound{Text: "and then?", Earlier: "C1/100.1"}), "reply")
	if !strings.Contains(promptText(lastPrompt(t, h.fake, "alpha")), "deploy is on friday") {
		t.Fatal("H2: the earlier messages are part of every prompt of the conversation")
	}
	// After a restart neither.
	r := h.replica()
	r.r.AddAdapter(tm)
	r.sayAs(adapters.Inbound{Channel: "team", SessionKey: "team:T1:C1:100.1", User: "team:U1", Text: "again", ReplyTo: "r", Earlier: "C1/100.1"})
	if n, _ := tm.readCount(); n != 1 {
		t.Fatalf("H3: earlier messages read %d times, want once", n)
	}
	tm.take()
	// /status says they are part of the context.
	out := h.sayTeam(tm, adapters.Inbound{Text: "/status"})
	if !strings.Contains(out[0].Text, "the thread's earlier messages are part of the context") {
		t.Fatalf("/status:\n%s", out[0].Text)
	}
}

func readPNG(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/red.png")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// covers I1, I5, N1: an image sent to a conversation whose model takes no
// images goes to a model of the chain that does, with a notice saying why; the
// skip is recorded like B7's; the next text turn is back on the conversation's
// model, with no notice (nothing about the detour is kept).
func TestRouter_I5_ImageGoesToAModelThatTakesImages(t *testing.T) { testdb.Each(t, testImageChain) }

func testImageChain(t *testing.T, driver string) {
	tm := newTeam()
	tm.files["f1"] = readPNG(t)
	h := newHarness(t, driver, withTeam(tm), func(c *Config, _ *harness) {
		c.Models = map[failover.ModelRef]ModelInfo{mThird: {Images: true}}
	})
	h.fake.TextOnly("alpha", "beta") // the fake refuses images to them, as a model without vision does
	out := expect(t, h.sayTeam(tm, adapters.Inbound{Text: "what is on it?",
		Files: []adapters.File{{Name: "shot.png", MIME: "image/png", Size: int64(len(tm.files["f1"])), Ref: "f1"}}}), "notice,reply")
	if want := "↪️ model fallback: p3/gamma (selected p1/alpha; does not take images)"; out[0].Text != want {
		t.Fatalf("notice = %q, want %q", out[0].Text, want)
	}
	if out[1].Model != mThird || !strings.Contains(out[1].Text, "[saw image 1: image/png") {
		t.Fatalf("reply = %+v, want p3/gamma proving it saw the image", out[1])
	}
	for _, c := range h.fake.Calls() {
		if c.Model != "gamma" {
			t.Fatalf("I5: a model that takes no images was called: %+v", c)
		}
	}
	var rows []AttemptRow
	h.db.Where("skipped = ?", string(classify.ReasonImageInput)).Find(&rows)
	if len(rows) != 2 {
		t.Fatalf("I5: want p1/alpha and p2/beta recorded as skipped for image_input, got %+v", rows)
	}
	if e := h.entry("team:T1:C1:100.1"); e.ModelOverride != "" || e.NoticeActive == mThird {
		t.Fatalf("I5: the image detour was kept: %+v", e)
	}
	hist := h.history("team:T1:C1:100.1")
	if !strings.Contains(hist[0].Content, "[image: shot.png]") {
		t.Fatalf("history keeps %q, want a line naming the image", hist[0].Content)
	}
	out = expect(t, h.sayTeam(tm, adapters.Inbound{Text: "thanks"}), "reply")
	if out[0].Model != mPrimary {
		t.Fatalf("the next text turn answered by %s, want the conversation's model", out[0].Model)
	}
	st := expect(t, h.sayTeam(tm, adapters.Inbound{Text: "/status"}), "reply")
	if !strings.Contains(st[0].Text, "images: p1/alpha takes text only; a message with images goes to p3/gamma") {
		t.Fatalf("/status:\n%s", st[0].Text)
	}
}

// covers I5: with no model that takes images, the image is not sent and the
// person is told; the text is answered.
func TestRouter_I5_NoModelTakesImages(t *testing.T) {
	tm := newTeam()
	tm.files["f1"] = readPNG(t)
	h := newHarness(t, testdb.SQLite, withTeam(tm))
	out := expect(t, h.sayTeam(tm, adapters.Inbound{Text: "look", Files: []adapters.File{{Name: "a.png", MIME: "image/png", Ref: "f1"}}}), "notice,reply")
	if !strings.Contains(out[0].Text, "a.png (no model this conversation may use takes images") || out[1].Model != mPrimary {
		t.Fatalf("outbound:\n%s", dump(out))
	}
	if ms := lastPrompt(t, h.fake, "alpha"); len(ms[len(ms)-1].Images) != 0 {
		t.Fatal("an image went to a model that takes none")
	}
}

// covers I2, I4: files over their cap are not downloaded and the person is
// told in plain words; text files are put into the message; a message of files
// only is answered; one with nothing readable gets a clear error.
func TestRouter_I2_FileCaps(t *testing.T) { testdb.Each(t, testFileCaps) }

func testFileCaps(t *testing.T, driver string) {
	tm := newTeam()
	tm.files["notes"] = []byte("deploy: friday\nowner: ann\n")
	tm.files["big"] = make([]byte, 1)
	tm.files["bin"] = []byte{0, 1, 2, 3}
	h := newHarness(t, driver, withTeam(tm), func(c *Config, _ *harness) {
		c.Files = FileLimits{MaxBytes: 5 << 20, MaxFiles: 3, MaxTextBytes: 1 << 10}
	})
	files := []adapters.File{
		{Name: "notes.txt", MIME: "text/plain", Size: 26, Ref: "notes"},
		{Name: "holiday.png", MIME: "image/png", Size: 30 << 20, Ref: "big"},
		{Name: "report.pdf", MIME: "application/pdf", Size: 1000, Ref: "pdf"},
		{Name: "fourth.txt", MIME: "text/plain", Size: 10, Ref: "notes"},
	}
	out := expect(t, h.sayTeam(tm, adapters.Inbound{Files: files}), "notice,reply") // I4: no text, still answered
	for _, want := range []string{"holiday.png (30.0 MB; files over 5.0 MB are not read)",
		"report.pdf (PDF files are not read; images and text files are)", "fourth.txt (only the first 3 files of a message are read)"} {
		if !strings.Contains(out[0].Text, want) {
			t.Fatalf("I2: notice %q lacks %q", out[0].Text, want)
		}
	}
	if _, n := tm.readCount(); n != 1 || tm.reads[0] != "notes" {
		t.Fatalf("I2: files read %v, want notes.txt only (the others are refused before any download)", tm.reads)
	}
	p := promptText(lastPrompt(t, h.fake, "alpha"))
	if !strings.Contains(p, "[file notes.txt]\ndeploy: friday") || !strings.Contains(p, "[not read: holiday.png (30.0 MB") {
		t.Fatalf("I1: the model should see the text file and what was not read:\n%s", p)
	}
	// A text file over its cap, a binary "text" file: nothing to answer.
	out = expect(t, h.sayTeam(tm, adapters.Inbound{Files: []adapters.File{
		{Name: "huge.log", MIME: "text/plain", Size: 4096, Ref: "notes"},
		{Name: "x.txt", MIME: "text/plain", Ref: "bin"},
	}}), "notice,error")
	if !strings.Contains(out[0].Text, "huge.log (4 KB; text files of up to 1 KB are put into the message)") ||
		!strings.Contains(out[0].Text, "x.txt (it is not text)") || !strings.Contains(out[1].Text, "nothing to answer") {
		t.Fatalf("outbound:\n%s", dump(out))
	}
}

// covers R16, R15, P2: the oldest turns that no longer fit are replaced by a
// summary a model writes; the summary is bounded and part of later prompts,
// and the turns it stands for are gone from the history.
func TestRouter_R16_SummaryReplacesDroppedTurns(t *testing.T) { testdb.Each(t, testSummary) }

func testSummary(t *testing.T, driver string) {
	h := newHarness(t, driver, func(c *Config, _ *harness) {
		c.Models = map[failover.ModelRef]ModelInfo{mPrimary: {ContextWindow: 600}}
		c.Summary, c.SummaryMaxTokens = true, 60
	})
	long := strings.Repeat("word ", 80) // ≈ 100 tokens
	for i := range 5 {
		expect(t, h.say(key1, fmt.Sprintf("turn %d %s", i, long)), "reply")
	}
	e := h.entry(key1)
	if e.Summary == "" || e.CompactionCount == 0 {
		t.Fatalf("R16: no summary stored: %+v", e)
	}
	if EstimateTokens(e.Summary) > 61 || !strings.Contains(e.Summary, "User: turn 0") {
		t.Fatalf("R16: summary %q (the fake echoes the start of what it was asked to summarise)", e.Summary)
	}
	calls := h.fake.Calls()
	summaries := 0
	for _, c := range calls {
		if len(c.Messages) > 0 && strings.HasPrefix(c.Messages[0].Text, "You summarise conversations") {
			summaries++
			if !strings.Contains(c.Messages[1].Text, "turn 0") {
				t.Fatalf("the summary call did not get the dropped turns: %+v", c.Messages)
			}
		}
	}
	if summaries == 0 {
		t.Fatal("R16: no summary call was made")
	}
	hist := h.history(key1)
	for _, m := range hist {
		if strings.Contains(m.Content, "turn 0 ") {
			t.Fatal("R16: a summarised turn is still in the history")
		}
	}
	last := lastPrompt(t, h.fake, "alpha")
	if p := promptText(last); !strings.Contains(p, summaryIntro+e.Summary) {
		t.Fatalf("R16: the last prompt should hold the summary:\n%s", p)
	}
	for _, m := range last {
		if strings.HasPrefix(m.Text, "turn 0 ") {
			t.Fatalf("R16: the summarised turn is still sent: %q", m.Text)
		}
	}
	if e.PaidCalls != len(calls) {
		t.Fatalf("the summary calls are paid calls: %d recorded, %d made", e.PaidCalls, len(calls))
	}
}

// covers R16, B1: a summary's call counts in the turn's budget, and when it
// fails the oldest turns are dropped as before.
func TestRouter_R16_SummaryCountsAndFallsBackToDropping(t *testing.T) {
	testdb.Each(t, testSummaryBudget)
}

func testSummaryBudget(t *testing.T, driver string) {
	mem := map[string]*memLLM{}
	h := newHarness(t, driver, withMem(mem), func(c *Config, _ *harness) {
		c.Models = map[failover.ModelRef]ModelInfo{mPrimary: {ContextWindow: 300}}
		c.Summary, c.SummaryMaxTokens = true, 40
	})
	isSummary := func(req llm.Request) bool { return strings.HasPrefix(req.Messages[0].Content, "You summarise") }
	for _, m := range mem {
		m.fail = func(req llm.Request) error {
			if isSummary(req) {
				return &failover.Failure{Reason: classify.ReasonFormat, Class: classify.ClassDeterministic, Status: 400, Message: "bad request"}
			}
			return nil
		}
	}
	long := strings.Repeat("word ", 60)
	for range 5 {
		expect(t, h.say(key1, long), "reply")
	}
	if e := h.entry(key1); e.Summary != "" || e.CompactionCount == 0 {
		t.Fatalf("R16: failing summaries must fall back to dropping: %+v", e)
	}
	for i, req := range mem["p1"].requests() {
		if !isSummary(req) && estimate(req.Messages) > 300 {
			t.Fatalf("request %d does not fit the window", i)
		}
	}
	// B1: with one paid call a turn, the summary takes it and the turn stops.
	h.engine.Policy.MaxPaidAttemptsPerTurn = 1
	for _, m := range mem {
		m.fail = nil
	}
	before := len(mem["p1"].requests())
	out := expect(t, h.say(key1, long+long), "error")
	if reqs := mem["p1"].requests()[before:]; len(reqs) != 1 || !isSummary(reqs[0]) {
		t.Fatalf("B1: want the summary call and nothing else, got %d calls:\n%s", len(reqs), dump(out))
	}
}

// covers R17: /compact replaces the whole history by a summary and says so;
// with nothing to compact it says that.
func TestRouter_R17_CompactCommand(t *testing.T) { testdb.Each(t, testCompactCommand) }

func testCompactCommand(t *testing.T, driver string) {
	h := newHarness(t, driver)
	out := expect(t, h.say(key1, "/compact"), "reply")
	if !strings.Contains(out[0].Text, "nothing to compact") {
		t.Fatalf("empty /compact: %q", out[0].Text)
	}
	expect(t, h.say(key1, "we ship on friday"), "reply")
	expect(t, h.say(key1, "ann owns it"), "reply")
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Reply: "ships friday; ann owns it", Times: 1})
	out = expect(t, h.say(key1, "/compact"), "reply")
	if !strings.Contains(out[0].Text, "conversation compacted: 2 turn(s) replaced by a summary") {
		t.Fatalf("/compact: %q", out[0].Text)
	}
	if e := h.entry(key1); e.Summary != "ships friday; ann owns it" || len(h.history(key1)) != 0 || e.PaidCalls != 3 {
		t.Fatalf("after /compact: summary %q, history %d, paid %d", e.Summary, len(h.history(key1)), e.PaidCalls)
	}
	expect(t, h.say(key1, "who owns it?"), "reply")
	if p := promptText(lastPrompt(t, h.fake, "alpha")); !strings.Contains(p, "ships friday; ann owns it") {
		t.Fatalf("the summary is not in the next prompt:\n%s", p)
	}
	// A summary that cannot be written changes nothing.
	h.fake.Script(fakeprovider.Rule{Mode: fakeprovider.ModeBilling402, Times: 10})
	out = expect(t, h.say(key1, "/compact"), "reply")
	if !strings.Contains(out[0].Text, "not compacted") || len(h.history(key1)) != 2 {
		t.Fatalf("failed /compact: %q, history %d", out[0].Text, len(h.history(key1)))
	}
}

// covers U1, T6: a provider that never reports usage is counted by the
// estimate, so the per-user dollar cap stops its user.
func TestRouter_U1_T6_CapActsWithoutReportedUsage(t *testing.T) { testdb.Each(t, testNoUsageCap) }

func testNoUsageCap(t *testing.T, driver string) {
	h := newHarness(t, driver, func(c *Config, _ *harness) {
		c.UserBudget = UserBudget{USD: 0.05}
		c.Models = map[failover.ModelRef]ModelInfo{mPrimary: {Price: failover.Price{InPerMTok: 500, OutPerMTok: 500}}}
	})
	h.fake.Script(fakeprovider.Rule{NoUsage: true})
	answered := 0
	for range 40 {
		out := h.say(key1, strings.Repeat("a question ", 10))
		if kinds(out) == "error" {
			if !strings.Contains(out[0].Text, "daily limit of $0.05") {
				t.Fatalf("refusal: %q", out[0].Text)
			}
			break
		}
		expect(t, out, "reply")
		answered++
	}
	if answered == 0 || answered >= 40 {
		t.Fatalf("U1: %d turns answered before the $0.05 cap stopped the user (want it to act)", answered)
	}
	for _, c := range h.fake.Calls() {
		if c.Usage != nil {
			t.Fatalf("the provider reported usage: %+v", c)
		}
	}
	out := expect(t, h.say(key1, "/usage"), "reply")
	if !strings.Contains(out[0].Text, fmt.Sprintf("your usage today (2026-03-01 UTC): %d paid call(s)", answered)) ||
		!strings.Contains(out[0].Text, fmt.Sprintf("(tokens of %d call(s) estimated: the provider sent no usage)", answered)) {
		t.Fatalf("/usage:\n%s", out[0].Text)
	}
}

// covers U2, U3, U4: /usage adds up exactly what the provider reported, for
// the user today and this month, and for admins by user, channel and model.
func TestRouter_U2_UsageMatchesTheProvider(t *testing.T) { testdb.Each(t, testUsageTotals) }

func testUsageTotals(t *testing.T, driver string) {
	h := newHarness(t, driver, func(c *Config, _ *harness) {
		c.Models = map[failover.ModelRef]ModelInfo{mPrimary: {Price: failover.Price{InPerMTok: 1, OutPerMTok: 2}}}
	})
	ask := func(user, key, text string) []adapters.Outbound {
		h.sayAs(adapters.Inbound{Channel: "test", SessionKey: key, User: user, Text: text, ReplyTo: "r"})
		return h.rec.take()
	}
	for i := range 3 {
		expect(t, ask("test:u1", fmt.Sprintf("slack:T1:C1:10%d", i), "hello there"), "reply")
	}
	// A failed call counts too (with no tokens: the provider bills none).
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeRateLimit, Times: 1})
	expect(t, ask("test:u2", "slack:T1:C2:99", "a longer question for the model"), "notice,reply")
	// A thread counts with its channel (Inbound.Parent); it comes after the
	// reset the rate limit stated, before which p1 is not called (E3).
	h.clock.Advance(2 * time.Minute)
	h.sayAs(adapters.Inbound{Channel: "test", SessionKey: "discord:G1:T9", Parent: "discord:G1:C9", User: "test:u2", Text: "in a thread", ReplyTo: "r"})
	expect(t, h.rec.take(), "reply")
	var in, outT int64
	calls := map[string]int64{}
	for _, c := range h.fake.Calls() {
		if c.Usage != nil {
			in += int64(c.Usage.PromptTokens)
			outT += int64(c.Usage.CompletionTokens)
		}
		calls[c.Provider]++
	}
	if calls["p1"] != 5 || calls["p2"] != 1 {
		t.Fatalf("fake calls by provider: %v", calls)
	}
	out := expect(t, ask("test:admin", "console:x", "/usage all"), "reply")
	text := out[0].Text
	total := int64(len(h.fake.Calls()))
	if want := fmt.Sprintf("everyone today: %d paid call(s), %s tokens in, %s out", total, commands.Thousands(in), commands.Thousands(outT)); !strings.Contains(text, want) {
		t.Fatalf("U4: /usage all lacks %q:\n%s", want, text)
	}
	for _, want := range []string{"by user, this month:", "test:u1: 3 paid call(s)", "test:u2: 3 paid call(s)",
		"by channel, this month:", "slack:T1:C1: 3 paid call(s)", "slack:T1:C2: 2 paid call(s)", "discord:G1:C9: 1 paid call(s)",
		"by model, this month:", "p1/alpha: 5 paid call(s)", "p2/beta: 1 paid call(s)"} {
		if !strings.Contains(text, want) {
			t.Fatalf("U4: /usage all lacks %q:\n%s", want, text)
		}
	}
	out = expect(t, ask("test:u2", "slack:T1:C2:99", "/usage all"), "error")
	if !strings.Contains(out[0].Text, "for admins") {
		t.Fatalf("a non-admin's /usage all: %q", out[0].Text)
	}
	out = expect(t, ask("test:u2", "slack:T1:C2:99", "/usage"), "reply")
	if !strings.Contains(out[0].Text, "your usage today (2026-03-01 UTC): 3 paid call(s)") || !strings.Contains(out[0].Text, "this month (March 2026): 3 paid call(s)") {
		t.Fatalf("U3: /usage:\n%s", out[0].Text)
	}
}
