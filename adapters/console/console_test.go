package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
)

// collect runs the adapter over input and returns every Inbound it produced.
func collect(t *testing.T, a *Adapter) []adapters.Inbound {
	t.Helper()
	inbox := make(chan adapters.Inbound)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []adapters.Inbound
	got := make(chan struct{})
	go func() {
		defer close(got)
		for in := range inbox {
			out = append(out, in)
			a.mu.Lock()
			a.answer() // stands in for the router's reply, without printing
			a.mu.Unlock()
		}
	}()
	err := a.Run(ctx, inbox)
	close(inbox)
	<-got
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return out
}

// TestRun_OneLineOneAnswer: the next line is read only after the previous line's
// reply or error, so jsonl output follows input order across sessions.
func TestRun_OneLineOneAnswer(t *testing.T) {
	var buf strings.Builder
	a := New(Options{Format: FormatJSONL, In: strings.NewReader("{\"session\":\"a\",\"text\":\"1\"}\n{\"session\":\"b\",\"text\":\"2\"}\n"), Out: &buf})
	inbox := make(chan adapters.Inbound)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, inbox) }()
	first := <-inbox
	select {
	case in := <-inbox:
		t.Fatalf("second line %q read before the first was answered", in.Text)
	case <-time.After(50 * time.Millisecond):
	}
	_ = a.Send(ctx, adapters.Outbound{Kind: adapters.KindNotice, SessionKey: first.SessionKey, Text: "↪️ n"})
	select {
	case in := <-inbox:
		t.Fatalf("a notice is not the answer; second line %q read early", in.Text)
	case <-time.After(50 * time.Millisecond):
	}
	_ = a.Send(ctx, adapters.Outbound{Kind: adapters.KindReply, SessionKey: first.SessionKey, Text: "r1"})
	second := <-inbox
	if second.SessionKey != "console:b" {
		t.Fatalf("second inbound %+v", second)
	}
	_ = a.Send(ctx, adapters.Outbound{Kind: adapters.KindError, SessionKey: second.SessionKey, Text: "e2"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestText_Inbound(t *testing.T) {
	var out strings.Builder
	a := New(Options{Format: FormatText, In: strings.NewReader("hello\r\n\n  \n{\"session\":\"x\",\"text\":\"hi\"}\n/status"), Out: &out})
	got := collect(t, a)
	if len(got) != 3 {
		t.Fatalf("got %d inbound, want 3 (the empty line and the line of spaces not sent): %+v", len(got), got)
	}
	want := adapters.Inbound{Channel: "console", SessionKey: "console:default", User: "console:local", Text: "hello", ReplyTo: "default", Direct: true, Admin: true}
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("got %+v, want %+v", got[0], want)
	}
	// text format does not interpret JSON: the line is the message.
	if got[1].SessionKey != "console:default" || !strings.HasPrefix(got[1].Text, "{") {
		t.Errorf("text format parsed JSON: %+v", got[1])
	}
	if got[2].Text != "/status" {
		t.Errorf("last line without newline lost: %+v", got[2])
	}
	// Every line gets an answer: the empty line a short note, the line of
	// spaces an error (issue 37).
	if out.String() != "(empty line: nothing was sent)\nerror: input line 3 holds only spaces or tabs: nothing was sent\n" {
		t.Errorf("unexpected output %q", out.String())
	}
}

// A person at a terminal sees a prompt whenever the bot waits for input, and
// model output never reaches the terminal with its control sequences (T4).
func TestText_PromptAndSanitizedOutput(t *testing.T) {
	var out strings.Builder
	a := New(Options{Format: FormatText, In: strings.NewReader("hi\n"), Out: &out, Interactive: true})
	inbox := make(chan adapters.Inbound)
	done := make(chan error, 1)
	ctx := context.Background()
	go func() { done <- a.Run(ctx, inbox) }()
	in := <-inbox
	_ = a.Send(ctx, adapters.Outbound{Kind: adapters.KindReply, SessionKey: in.SessionKey, Text: "\x1b]0;pwned\x07\x1b[2Jclean\u202e"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "> clean\n> " {
		t.Fatalf("terminal got %q", got)
	}
}

func TestText_Output(t *testing.T) {
	var out strings.Builder
	a := New(Options{Format: FormatText, Out: &out})
	ctx := context.Background()
	sends := []adapters.Outbound{
		{Kind: adapters.KindNotice, SessionKey: "console:default", Text: "↪️ model fallback: demo/fallback-1 (selected demo/primary; billing)"},
		{Kind: adapters.KindReply, SessionKey: "console:default", Text: "line one\nline two\n", Model: "demo/fallback-1"},
		{Kind: adapters.KindNotice, SessionKey: "console:default", Text: "model fallback cleared: demo/primary (was demo/fallback-1)"},
		{Kind: adapters.KindError, SessionKey: "console:default", Text: "all models are rate-limited"},
		{Kind: adapters.KindReport, Text: "all models down"}, // not printed without Reports
	}
	for _, o := range sends {
		if err := a.Send(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	want := "↪️ model fallback: demo/fallback-1 (selected demo/primary; billing)\n" +
		"line one\nline two\n" +
		"↪️ model fallback cleared: demo/primary (was demo/fallback-1)\n" +
		"error: all models are rate-limited\n"
	if out.String() != want {
		t.Errorf("output:\n%q\nwant:\n%q", out.String(), want)
	}
	out.Reset()
	a = New(Options{Format: FormatText, Out: &out, Reports: true})
	_ = a.Send(ctx, adapters.Outbound{Kind: adapters.KindReport, Text: "a\nb"})
	if out.String() != "report: a\nreport: b\n" {
		t.Errorf("report: %q", out.String())
	}
}

func TestJSONL_Inbound(t *testing.T) {
	input := strings.Join([]string{
		`plain words`,
		`{"session": "s1", "user": "u1", "text": "hello"}`,
		`{"text": "no session"}`,
		`{"session": "s2", "text": "bad json"`,
		`{"session": "s3", "user": "u3"}`,
		``,
		`{"session": "s4", "text": "after errors", "extra": 1}`,
	}, "\n") + "\n"
	var out strings.Builder
	a := New(Options{Format: FormatJSONL, In: strings.NewReader(input), Out: &out})
	got := collect(t, a)
	want := []adapters.Inbound{
		{Channel: "console", SessionKey: "console:default", User: "console:local", Text: "plain words", ReplyTo: "default", Direct: true, Admin: true},
		{Channel: "console", SessionKey: "console:s1", User: "console:u1", Text: "hello", ReplyTo: "s1", Direct: true, Admin: true},
		{Channel: "console", SessionKey: "console:default", User: "console:local", Text: "no session", ReplyTo: "default", Direct: true, Admin: true},
		{Channel: "console", SessionKey: "console:s4", User: "console:local", Text: "after errors", ReplyTo: "s4", Direct: true, Admin: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d inbound, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("[%d] got %+v, want %+v", i, got[i], want[i])
		}
	}
	// The malformed line and the line without text each yield one error line;
	// processing continued (the s4 line came through).
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 error lines, got %q", out.String())
	}
	for i, l := range lines {
		var o map[string]any
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("output line %q is not JSON: %v", l, err)
		}
		if o["type"] != "error" || o["session"] != []string{"default", "s3"}[i] {
			t.Errorf("error line %d = %v", i, o)
		}
		if _, ok := o["model"]; ok {
			t.Errorf("model on an error line: %v", o)
		}
	}
	if !strings.Contains(lines[0], "input line 4 is not valid JSON") || !strings.Contains(lines[1], "input line 5 has no text") {
		t.Errorf("error texts: %q", lines)
	}
}

func TestJSONL_Output(t *testing.T) {
	var out strings.Builder
	a := New(Options{Format: FormatJSONL, Out: &out, Reports: true})
	ctx := context.Background()
	_ = a.Send(ctx, adapters.Outbound{Kind: adapters.KindNotice, SessionKey: "console:s1", Text: "↪️ model fallback: p/b (selected p/a; billing)", Model: "p/b"})
	_ = a.Send(ctx, adapters.Outbound{Kind: adapters.KindReply, SessionKey: "console:s1", Text: "<ok> & \"quoted\"\nsecond", Model: "p/b"})
	_ = a.Send(ctx, adapters.Outbound{Kind: adapters.KindError, SessionKey: "console:default", Text: "nope"})
	_ = a.Send(ctx, adapters.Outbound{Kind: adapters.KindReport, Text: "all down"})
	want := `{"type":"notice","session":"s1","text":"↪️ model fallback: p/b (selected p/a; billing)"}` + "\n" +
		`{"type":"reply","session":"s1","text":"<ok> & \"quoted\"\nsecond","model":"p/b"}` + "\n" +
		`{"type":"error","session":"default","text":"nope"}` + "\n" +
		`{"type":"report","text":"all down"}` + "\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestOversizedLine checks that a line far beyond any buffer is reported as one
// error and reading continues.
func TestOversizedLine(t *testing.T) {
	for _, format := range []string{FormatText, FormatJSONL} {
		t.Run(format, func(t *testing.T) {
			huge := strings.Repeat("x", 300_000)
			justOver := strings.Repeat("y", 1001)
			input := "first\n" + huge + "\n" + justOver + "\nlast\n"
			var out strings.Builder
			a := New(Options{Format: format, In: strings.NewReader(input), Out: &out, MaxMessageBytes: 1000})
			got := collect(t, a)
			if len(got) != 2 || got[0].Text != "first" || got[1].Text != "last" {
				t.Fatalf("inbound = %d %v", len(got), got)
			}
			s := out.String()
			if strings.Count(s, "error") != 2 || !strings.Contains(s, "input line 2 is too long (300001 bytes") || !strings.Contains(s, "message too long (1001 bytes; limit 1000)") {
				t.Errorf("output: %q", s)
			}
			if len(s) > 1000 {
				t.Errorf("error output echoes the line: %d bytes", len(s))
			}
		})
	}
}

// TestRun_ContextEnds checks that Run returns when ctx ends even while the input
// is idle, and that the reader stops once the input closes.
func TestRun_ContextEnds(t *testing.T) {
	pr, pw := io.Pipe()
	a := New(Options{In: pr})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	inbox := make(chan adapters.Inbound, 1)
	go func() { errc <- a.Run(ctx, inbox) }()
	if _, err := pw.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if in := <-inbox; in.Text != "one" {
		t.Fatalf("got %+v", in)
	}
	cancel()
	select {
	case err := <-errc:
		if err != context.Canceled {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
	pw.Close()
}

func TestRun_ReadError(t *testing.T) {
	pr, pw := io.Pipe()
	pw.CloseWithError(io.ErrUnexpectedEOF)
	err := New(Options{In: pr}).Run(context.Background(), make(chan adapters.Inbound))
	if err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Errorf("Run = %v", err)
	}
}

func TestName(t *testing.T) {
	if New(Options{}).Name() != "console" {
		t.Error("name")
	}
}

// covers L1, L2, L3, T4 at a terminal: a status line while the turn runs, the
// answer shown as it arrives on one preview line, a failed attempt's words
// erased and replaced, the final answer printed whole on its own line, model
// control sequences stripped.
func TestText_LiveReplyAtATerminal(t *testing.T) {
	var out strings.Builder
	a := New(Options{Format: FormatText, In: strings.NewReader("hi\n"), Out: &out, Interactive: true})
	inbox := make(chan adapters.Inbound)
	done := make(chan error, 1)
	ctx := context.Background()
	go func() { done <- a.Run(ctx, inbox) }()
	in := <-inbox
	ind := a.StartProgress(ctx, in)
	ind.Status("waiting 20s for p1: rate limit")
	st, _ := a.StartStream(ctx, in)
	_ = st.Update(ctx, "partial \x1b[31mwords")
	_ = st.Update(ctx, "the fallback")
	_ = st.Update(ctx, "the fallback answers")
	ind.Stop()
	_ = st.Finish(ctx, adapters.Outbound{Kind: adapters.KindReply, SessionKey: in.SessionKey, Text: "the fallback answers"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := "> " + "\r\x1b[K… thinking…" + "\r\x1b[K… waiting 20s for p1: rate limit" + "\r\x1b[K" +
		"\r\x1b[K… partial words" + "\r\x1b[K… the fallback" + "\r\x1b[K… the fallback answers" +
		"\r\x1b[K" + "the fallback answers\n" + "> "
	if got := out.String(); got != want {
		t.Fatalf("terminal got\n%q\nwant\n%q", got, want)
	}
}

// covers N4, L3: a notice that arrives while the reply is already streaming
// goes on a line of its own above it, never glued to the end of the reply.
func TestText_N4_NoticeAboveAStreamingReply(t *testing.T) {
	var out strings.Builder
	a := New(Options{Format: FormatText, In: strings.NewReader("hi\n"), Out: &out, Interactive: true})
	inbox := make(chan adapters.Inbound)
	done := make(chan error, 1)
	ctx := context.Background()
	go func() { done <- a.Run(ctx, inbox) }()
	in := <-inbox
	st, _ := a.StartStream(ctx, in)
	_ = st.Update(ctx, "[backup/fallback-1] you said")
	_ = a.Send(ctx, adapters.Outbound{Kind: adapters.KindNotice, SessionKey: in.SessionKey, Text: "↪️ model fallback: backup/fallback-1 (selected demo/primary; rate limit)"})
	_ = st.Finish(ctx, adapters.Outbound{Kind: adapters.KindReply, SessionKey: in.SessionKey, Text: "[backup/fallback-1] you said: hi"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := "> " + "\r\x1b[K… [backup/fallback-1] you said" +
		"\r\x1b[K↪️ model fallback: backup/fallback-1 (selected demo/primary; rate limit)\n" + "\r\x1b[K… [backup/fallback-1] you said" +
		"\r\x1b[K" + "[backup/fallback-1] you said: hi\n" + "> "
	if got := out.String(); got != want {
		t.Fatalf("terminal got\n%q\nwant\n%q", got, want)
	}
}

// covers T4: at a terminal, a line of exactly TerminalLineLimit bytes is what the
// terminal left of a longer one: it is not sent, and the person is told why
// and what to do; the next line is read as usual.
func TestText_TerminalCutLineIsNotSent(t *testing.T) {
	var out strings.Builder
	cut := strings.Repeat("a", TerminalLineLimit)
	a := New(Options{Format: FormatText, In: strings.NewReader(cut + "\nhello\n"), Out: &out, Interactive: true})
	inbox := make(chan adapters.Inbound, 2)
	answering := inboxAnswering(a, inbox)
	err := a.Run(context.Background(), answering)
	close(answering)
	if err != nil {
		t.Fatal(err)
	}
	if len(inbox) != 1 || (<-inbox).Text != "hello" {
		t.Fatalf("the cut line was sent")
	}
	if !strings.Contains(out.String(), "error: "+cutLine+"\n") {
		t.Errorf("no warning:\n%q", out.String())
	}
}

// inboxAnswering answers every inbound at once with a reply, so Run reads on.
func inboxAnswering(a *Adapter, keep chan adapters.Inbound) chan adapters.Inbound {
	in := make(chan adapters.Inbound)
	go func() {
		for m := range in {
			keep <- m
			_ = a.Send(context.Background(), adapters.Outbound{Kind: adapters.KindReply, SessionKey: m.SessionKey, Text: "ok"})
		}
	}()
	return in
}

// covers M7: a jsonl line's optional id becomes the message's event id (one per
// id, whatever the session) with a replay asked for; an id too long is one
// error line; a replayed answer says so, and a raw C1 or bidi control never
// reaches the output (T4).
func TestJSONL_M7_MessageIDs(t *testing.T) {
	input := strings.Join([]string{
		`{"session": "s1", "id": "m-1", "text": "hello"}`,
		`{"session": "s2", "id": "m-1", "text": "hello"}`,
		`{"session": "s1", "id": "` + strings.Repeat("x", maxIDBytes+1) + `", "text": "hello"}`,
	}, "\n") + "\n"
	var out strings.Builder
	a := New(Options{Format: FormatJSONL, In: strings.NewReader(input), Out: &out})
	got := collect(t, a)
	if len(got) != 2 {
		t.Fatalf("got %d inbound, want 2: %+v", len(got), got)
	}
	for i, in := range got {
		if in.EventID != "console:id:m-1" || !in.Replay {
			t.Errorf("[%d] EventID %q, Replay %v; want console:id:m-1, true", i, in.EventID, in.Replay)
		}
	}
	if !strings.Contains(out.String(), `"type":"error"`) || !strings.Contains(out.String(), "has an id of 201 bytes") {
		t.Errorf("output for the long id: %q", out.String())
	}
	out.Reset()
	_ = a.Send(context.Background(), adapters.Outbound{Kind: adapters.KindReply, SessionKey: "console:s1", Text: "again\u009b2J\u202e",
		Model: "p/a", Replayed: true})
	if want := `{"type":"reply","session":"s1","text":"again\u009b2J\u202e","model":"p/a","replayed":true}` + "\n"; out.String() != want {
		t.Errorf("replayed output:\n%s\nwant:\n%s", out.String(), want)
	}
}

// covers A5 at a terminal: a failed attempt's printed words are erased, the
// fallback notice takes their line, and the fallback's answer prints below it.
func TestText_A5_NoticeAboveTheFallbacksAnswer(t *testing.T) {
	var out strings.Builder
	a := New(Options{Format: FormatText, In: strings.NewReader("hi\n"), Out: &out})
	inbox := make(chan adapters.Inbound)
	done := make(chan error, 1)
	ctx := context.Background()
	go func() { done <- a.Run(ctx, inbox) }()
	in := <-inbox
	st, _ := a.StartStream(ctx, in)
	_ = st.Update(ctx, "partial words")
	_ = st.Restart(ctx, &adapters.Outbound{Kind: adapters.KindNotice, SessionKey: in.SessionKey, Text: "↪️ model fallback: p2/beta"})
	_ = st.Update(ctx, "the fallback")
	_ = st.Finish(ctx, adapters.Outbound{Kind: adapters.KindReply, SessionKey: in.SessionKey, Text: "the fallback answers"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := "\r\x1b[K… partial words" + "\r\x1b[K" + "↪️ model fallback: p2/beta\n" + "\r\x1b[K… the fallback" +
		"\r\x1b[K" + "the fallback answers\n"
	if got := out.String(); got != want {
		t.Fatalf("terminal got\n%q\nwant\n%q", got, want)
	}
}

// covers issue 37 ("a line of only spaces gets no answer"): a line of spaces
// or tabs is no message, and gets one error line in the jsonl contract, never
// silence; an empty line stays a separator that jsonl skips.
func TestJSONL_Issue37_ALineOfOnlySpacesGetsAnError(t *testing.T) {
	input := strings.Join([]string{"   ", "\t \t", "", `{"session": "s1", "text": " \t "}`, "after"}, "\n") + "\n"
	var out strings.Builder
	a := New(Options{Format: FormatJSONL, In: strings.NewReader(input), Out: &out})
	got := collect(t, a)
	if len(got) != 1 || got[0].Text != "after" {
		t.Fatalf("inbound %+v, want only the last line", got)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []struct{ session, text string }{
		{"default", "input line 1 holds only spaces or tabs: nothing was sent"},
		{"default", "input line 2 holds only spaces or tabs: nothing was sent"},
		{"s1", "input line 4 has no text"},
	}
	if len(lines) != len(want) {
		t.Fatalf("output %q, want %d error lines", out.String(), len(want))
	}
	for i, l := range lines {
		var o jsonOut
		if err := json.Unmarshal([]byte(l), &o); err != nil || o.Type != "error" || o.Session != want[i].session || o.Text != want[i].text {
			t.Errorf("line %d: %q (%v), want an error %q for session %s", i, l, err, want[i].text, want[i].session)
		}
	}
}

// screen is a small terminal for the tests: lines of unbounded width, h rows
// on the screen, everything that scrolled above them kept as scrollback. It
// knows what the console writes: text, \r, \n (as CR LF), ESC 7 and ESC 8
// (save and restore the cursor's place on the screen), ESC [K and ESC [J.
type screen struct {
	lines    [][]rune // the scrollback, then the screen (the last h lines)
	top      int      // the first line on the screen
	row, col int      // the cursor: a line of lines, a column
	saved    [2]int   // ESC 7's screen row and column
	h        int
}

func newScreen(h int) *screen { return &screen{lines: [][]rune{nil}, h: h} }

func (s *screen) write(out string) {
	rs := []rune(out)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '\r':
			s.col = 0
		case r == '\n':
			s.row, s.col = s.row+1, 0
			if s.row == len(s.lines) {
				s.lines = append(s.lines, nil)
			}
			if s.row-s.top >= s.h {
				s.top = s.row - s.h + 1
			}
		case r == 0x1b && i+1 < len(rs) && rs[i+1] == '7':
			s.saved = [2]int{s.row - s.top, s.col}
			i++
		case r == 0x1b && i+1 < len(rs) && rs[i+1] == '8':
			s.row, s.col = min(s.top+s.saved[0], len(s.lines)-1), s.saved[1]
			i++
		case r == 0x1b && i+2 < len(rs) && rs[i+1] == '[' && (rs[i+2] == 'K' || rs[i+2] == 'J'):
			if l := s.lines[s.row]; len(l) > s.col {
				s.lines[s.row] = l[:s.col]
			}
			if rs[i+2] == 'J' { // to the end of the screen: the lines below go
				s.lines = s.lines[:s.row+1]
			}
			i += 2
		default:
			l := s.lines[s.row]
			for len(l) < s.col {
				l = append(l, ' ')
			}
			if s.col < len(l) {
				l[s.col] = r
			} else {
				l = append(l, r)
			}
			s.lines[s.row], s.col = l, s.col+1
		}
	}
}

// text is every line, scrollback and screen, without trailing empty lines.
func (s *screen) text() string {
	var out []string
	for _, l := range s.lines {
		out = append(out, string(l))
	}
	return strings.TrimRight(strings.Join(out, "\n"), "\n")
}

// covers L3, A5 (issue 37: "a 10 KB partial answer stays in the terminal
// scrollback after failover"): at a terminal of 24 rows, an attempt that
// streamed 10 KB over 200 lines and failed leaves nothing behind, neither on
// the screen nor above it: the terminal holds the notice and the final
// answer only. The answer shows on one preview line while it comes, at most
// previewCols columns of its end.
func TestText_Issue37_AFailedLongAnswerLeavesNothingInTheScrollback(t *testing.T) {
	var out strings.Builder
	a := New(Options{Format: FormatText, In: strings.NewReader("hi\n"), Out: &out})
	inbox := make(chan adapters.Inbound)
	done := make(chan error, 1)
	ctx := context.Background()
	go func() { done <- a.Run(ctx, inbox) }()
	in := <-inbox
	st, _ := a.StartStream(ctx, in)
	var partial strings.Builder
	for i := 0; partial.Len() < 10<<10; i++ {
		fmt.Fprintf(&partial, "partial line %03d of the failed attempt, 日本語\n", i)
		_ = st.Update(ctx, partial.String())
	}
	_ = st.Restart(ctx, &adapters.Outbound{Kind: adapters.KindNotice, SessionKey: in.SessionKey, Text: "↪️ model fallback: p2/beta"})
	_ = st.Update(ctx, "the fallback")
	_ = st.Update(ctx, "the fallback answers\nin two lines")
	_ = st.Finish(ctx, adapters.Outbound{Kind: adapters.KindReply, SessionKey: in.SessionKey, Text: "the fallback answers\nin two lines"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	term := newScreen(24)
	term.write(out.String())
	if got, want := term.text(), "↪️ model fallback: p2/beta\nthe fallback answers\nin two lines"; got != want {
		t.Fatalf("the terminal holds (%d lines)\n%s\nwant\n%s", len(term.lines), got, want)
	}
	// While it streamed, one line showed its end, within previewCols columns.
	for _, l := range strings.Split(out.String(), eraseLine) {
		if p, ok := strings.CutPrefix(l, "… "); ok {
			cols := 0
			for _, r := range p {
				cols += runeCols(r)
			}
			if cols > previewCols+1 || strings.ContainsAny(p, "\n\t") {
				t.Fatalf("a preview of %d columns: %q", cols, p)
			}
		}
	}
}

// covers L3, issue 37: a final answer the live kit brings in by an edit (it
// does not extend what showed) still ends the line and lets the console read
// the next one.
func TestText_Issue37_AFinalAnswerThatReplacesThePreviewEndsTheTurn(t *testing.T) {
	var out strings.Builder
	a := New(Options{Format: FormatText, In: strings.NewReader("hi\nagain\n"), Out: &out})
	inbox := make(chan adapters.Inbound)
	done := make(chan error, 1)
	ctx := context.Background()
	go func() { done <- a.Run(ctx, inbox) }()
	in := <-inbox
	st, _ := a.StartStream(ctx, in)
	_ = st.Update(ctx, "first words")
	_ = st.Finish(ctx, adapters.Outbound{Kind: adapters.KindError, SessionKey: in.SessionKey, Text: "all models are rate-limited"})
	select {
	case in = <-inbox:
	case <-time.After(5 * time.Second):
		t.Fatalf("the next line was never read; the terminal got %q", out.String())
	}
	_ = a.Send(ctx, adapters.Outbound{Kind: adapters.KindReply, SessionKey: in.SessionKey, Text: "ok"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	term := newScreen(24)
	term.write(out.String())
	if got, want := term.text(), "error: all models are rate-limited\nok"; got != want {
		t.Fatalf("the terminal holds\n%s\nwant\n%s", got, want)
	}
}
