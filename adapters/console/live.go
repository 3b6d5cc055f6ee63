package console

import (
	"context"
	"strings"

	"github.com/detourbot/detour/adapters"
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

// StartStream prints the answer as it arrives (L2); a text that does not extend
// what was printed (a failed attempt's words, L3) is erased and replaced.
func (a *Adapter) StartStream(ctx context.Context, in adapters.Inbound) (adapters.Stream, error) {
	s := &stream{a: a}
	a.mu.Lock()
	a.live = s
	a.mu.Unlock()
	return s, nil
}

// above prints line (which ends in a newline) where the streamed text began and
// shows the text again below it. The caller holds a.mu.
func (s *stream) above(line string) {
	_, _ = s.a.bw.WriteString(restoreDown + line + saveCursor + s.shown)
}

type stream struct {
	a     *Adapter
	shown string // sanitized text on the screen since the saved cursor position
}

func (s *stream) Update(ctx context.Context, text string) error {
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	s.write(termsafe.Strip(text))
	return a.bw.Flush()
}

// write shows text, printing only what extends the screen, else replacing it.
// The caller holds a.mu.
func (s *stream) write(text string) {
	a := s.a
	switch {
	case !a.streaming:
		a.clearStatus()
		a.streaming = true
		_, _ = a.bw.WriteString(saveCursor + text)
	case strings.HasPrefix(text, s.shown):
		_, _ = a.bw.WriteString(text[len(s.shown):])
	default:
		_, _ = a.bw.WriteString(restoreDown + text)
	}
	s.shown = text
}

func (s *stream) Finish(ctx context.Context, final adapters.Outbound) error {
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	s.write(textLine(final))
	_, _ = a.bw.WriteString("\n")
	a.streaming = false
	if a.live == s {
		a.live = nil
	}
	err := a.bw.Flush()
	a.answer()
	return err
}
