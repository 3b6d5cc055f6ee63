package console

import (
	"context"
	"strings"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/live"
	"github.com/detourbot/detour/internal/termsafe"
)

// Terminal control of the console's own making (never from model output, T4):
// back to the start of the line, and erase it.
const eraseLine = "\r\x1b[K"

var (
	_ adapters.Progress = (*Adapter)(nil)
	_ adapters.Streamer = (*Adapter)(nil)
)

// StartProgress shows a status line ("… thinking") at the terminal while a turn
// runs (L1); any output replaces it. The router asks for it only when a person
// chats at a terminal in text format.
func (a *Adapter) StartProgress(ctx context.Context, in adapters.Inbound) adapters.Indicator {
	p := &progress{a: a}
	p.Status("thinking…")
	return p
}

type progress struct {
	a       *Adapter
	stopped bool
}

func (p *progress) Status(text string) {
	a := p.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if p.stopped || a.streaming {
		return
	}
	_, _ = a.bw.WriteString(eraseLine + "… " + termsafe.Strip(strings.ReplaceAll(text, "\n", " ")))
	_ = a.bw.Flush()
	a.status = true
}

func (p *progress) Stop() {
	a := p.a
	a.mu.Lock()
	defer a.mu.Unlock()
	p.stopped = true
	a.clearStatus()
}

// clearStatus erases the status line, if one shows. The caller holds a.mu.
func (a *Adapter) clearStatus() {
	if a.status {
		_, _ = a.bw.WriteString(eraseLine)
		_ = a.bw.Flush()
		a.status = false
	}
}

// StartStream shows the answer as it arrives (L2) on one line of its own, the
// preview: "… " and the answer's last words, redrawn in place (\r, erase to the
// end of the line) as text comes. The answer itself prints once, whole, when
// it is final. A failed attempt's words therefore never stay in the
// terminal's scrollback, however long they grew (L3, A5; issue 37): text
// printed line by line scrolls up, past where any erase sequence reaches,
// while a single line is always erased whole. The preview is at most
// previewCols columns, so it fits a terminal of 64 and does not wrap.
func (a *Adapter) StartStream(ctx context.Context, in adapters.Inbound) (adapters.Stream, error) {
	s := &stream{a: a}
	a.mu.Lock()
	a.live = s
	a.mu.Unlock()
	r := live.New(s, live.Options{Inline: true, Render: func(kind adapters.Kind, text string) string {
		return textLine(adapters.Outbound{Kind: kind, Text: text})
	}})
	return &reply{Reply: r, s: s}, nil
}

// reply is the live kit's growing reply, whose Finish also ends the line when
// the kit brought the final text in by an edit (it stops only what grew).
type reply struct {
	*live.Reply
	s *stream
}

func (r *reply) Finish(ctx context.Context, final adapters.Outbound) error {
	err := r.Reply.Finish(ctx, final)
	r.s.end()
	return err
}

// previewCols bounds the preview line: "… " and at most this many columns of
// the answer's end.
const previewCols = 60

// stream is the terminal as a live.Surface: one message, the text of which
// shows as the preview line until it is final.
type stream struct {
	a     *Adapter
	text  string // the sanitized text of the reply so far
	shown bool   // the preview line is on the screen
}

// preview is the last previewCols columns of text on one line: line breaks
// and other controls as spaces, a wide character counted as two columns.
func preview(text string) string {
	rs := []rune(text)
	cols, i := 0, len(rs)
	for i > 0 {
		w := runeCols(rs[i-1])
		if cols+w > previewCols {
			break
		}
		cols, i = cols+w, i-1
	}
	out := []rune(nil)
	if i > 0 {
		out = append(out, '…')
	}
	for _, r := range rs[i:] {
		if r < 0x20 || r == 0x7f {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}

// runeCols is how many columns r takes: two for the wide characters of East
// Asian scripts and emoji, one otherwise (a bound, not a terminal's exact
// rule: the preview stays within a line either way).
func runeCols(r rune) int {
	switch {
	case r >= 0x1100 && r <= 0x115f, r >= 0x2e80 && r <= 0xa4cf, r >= 0xac00 && r <= 0xd7a3,
		r >= 0xf900 && r <= 0xfaff, r >= 0xfe30 && r <= 0xfe4f, r >= 0xff00 && r <= 0xff60,
		r >= 0xffe0 && r <= 0xffe6, r >= 0x1f000 && r <= 0x1faff, r >= 0x20000 && r <= 0x3fffd:
		return 2
	}
	return 1
}

// draw shows the preview of s.text; erase takes it off the screen. The caller
// holds a.mu.
func (s *stream) draw() {
	if strings.TrimSpace(s.text) == "" {
		s.erase()
		return
	}
	_, _ = s.a.bw.WriteString(eraseLine + "… " + preview(s.text))
	s.shown = true
}

func (s *stream) erase() {
	if s.shown {
		_, _ = s.a.bw.WriteString(eraseLine)
		s.shown = false
	}
}

// above prints line (which ends in a newline) in place of the preview and
// draws the preview again below it. The caller holds a.mu.
func (s *stream) above(line string) {
	s.erase()
	_, _ = s.a.bw.WriteString(line)
	s.draw()
}

// show makes text the reply so far and draws its preview.
func (s *stream) show(text string) error {
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	a.clearStatus() // a no-op once streaming: Status shows nothing then
	a.streaming = true
	s.text = text
	s.draw()
	return a.bw.Flush()
}

// end prints the reply's text whole in place of its preview, ends the line
// and lets Run read on; a no-op once done, or when nothing was posted.
func (s *stream) end() {
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.live == s {
		a.live = nil
	}
	if !a.streaming {
		return
	}
	s.erase()
	_, _ = a.bw.WriteString(s.text + "\n")
	a.streaming, s.text = false, ""
	a.answer()
	_ = a.bw.Flush()
}

func (s *stream) Post(_ context.Context, _ int, text string) (string, error) {
	return "", s.show(text)
}
func (s *stream) Edit(_ context.Context, _, text string) error {
	return s.show(text)
}
func (s *stream) Append(_ context.Context, _, more string) error {
	return s.show(s.text + more)
}
func (s *stream) Stop(_ context.Context, _, more string) error {
	s.a.mu.Lock()
	s.text += more
	s.a.mu.Unlock()
	s.end()
	return nil
}

// Delete takes the preview down; the line is free for a notice (A5).
func (s *stream) Delete(context.Context, string) error {
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	s.erase()
	a.streaming, s.text = false, ""
	return a.bw.Flush()
}

func (s *stream) Send(ctx context.Context, out adapters.Outbound) error { return s.a.Send(ctx, out) }
