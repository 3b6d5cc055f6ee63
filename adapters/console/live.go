package console

import (
	"context"
	"strings"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/live"
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
	_, _ = a.bw.WriteString(eraseLine + "… " + Sanitize(strings.ReplaceAll(text, "\n", " ")))
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
	return live.New(terminal{a}, live.Options{Inline: true, Render: func(kind adapters.Kind, text string) string {
		return textLine(adapters.Outbound{Kind: kind, Text: text})
	}}), nil
}

// terminal is the console as a live.Surface: one message from the saved cursor.
type terminal struct{ a *Adapter }

func (t terminal) write(s string, end bool) error {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.streaming {
		a.clearStatus()
		a.streaming = true
	}
	_, _ = a.bw.WriteString(s)
	if end {
		_, _ = a.bw.WriteString("\n")
		a.streaming = false
		defer a.answer()
	}
	return a.bw.Flush()
}

func (t terminal) Post(_ context.Context, _ int, text string) (string, error) {
	return "", t.write(saveCursor+text, false)
}
func (t terminal) Edit(_ context.Context, _, text string) error {
	return t.write(restoreDown+text, false)
}
func (t terminal) Append(_ context.Context, _, more string) error { return t.write(more, false) }
func (t terminal) Stop(_ context.Context, _, more string) error   { return t.write(more, true) }

// Delete erases what was printed; the line is free for a notice (A5).
func (t terminal) Delete(context.Context, string) error {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	_, _ = a.bw.WriteString(restoreDown)
	a.streaming = false
	return a.bw.Flush()
}

func (t terminal) Send(ctx context.Context, out adapters.Outbound) error { return t.a.Send(ctx, out) }
