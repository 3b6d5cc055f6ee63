package console

import (
	"context"
	"strings"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/live"
	"github.com/detourbot/detour/internal/termsafe"
)

// Terminal control of the console's own making (never from model output, T4).
const (
	eraseLine   = "\r\x1b[K"
	saveCursor  = "\x1b7"
	restoreDown = "\x1b8\x1b[J" // back to the saved position, erase what follows
)

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

// StartStream prints the answer as it arrives (L2), through the live kit's
// growing reply drawn on the terminal: text that extends what was printed is
// appended, any other replaces it (L3), and the final answer ends the line.
func (a *Adapter) StartStream(ctx context.Context, in adapters.Inbound) (adapters.Stream, error) {
	s := &stream{a: a}
	a.mu.Lock()
	a.live = s
	a.mu.Unlock()
	return live.New(s, live.Options{Inline: true, Render: func(kind adapters.Kind, text string) string {
		return textLine(adapters.Outbound{Kind: kind, Text: text})
	}}), nil
}

// stream is the terminal as a live.Surface: one message, printed from the saved
// cursor position.
type stream struct {
	a     *Adapter
	shown string // sanitized text on the screen since the saved cursor position
}

// above prints line (which ends in a newline) where the streamed text began and
// shows the text again below it. The caller holds a.mu.
func (s *stream) above(line string) {
	_, _ = s.a.bw.WriteString(restoreDown + line + saveCursor + s.shown)
}

// write prints out and makes shown what the screen holds; end finishes the line.
func (s *stream) write(out, shown string, end bool) error {
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	a.clearStatus() // a no-op once streaming: Status shows nothing then
	a.streaming = true
	_, _ = a.bw.WriteString(out)
	s.shown = shown
	if end {
		_, _ = a.bw.WriteString("\n")
		a.streaming = false
		if a.live == s {
			a.live = nil
		}
		defer a.answer()
	}
	return a.bw.Flush()
}

func (s *stream) Post(_ context.Context, _ int, text string) (string, error) {
	return "", s.write(saveCursor+text, text, false)
}
func (s *stream) Edit(_ context.Context, _, text string) error {
	return s.write(restoreDown+text, text, false)
}
func (s *stream) Append(_ context.Context, _, more string) error {
	return s.write(more, s.shown+more, false)
}
func (s *stream) Stop(_ context.Context, _, more string) error {
	return s.write(more, s.shown+more, true)
}

// Delete erases what was printed; the line is free for a notice (A5).
func (s *stream) Delete(context.Context, string) error {
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	_, _ = a.bw.WriteString(restoreDown)
	a.streaming, s.shown = false, ""
	return a.bw.Flush()
}

func (s *stream) Send(ctx context.Context, out adapters.Outbound) error { return s.a.Send(ctx, out) }
