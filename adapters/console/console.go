// Package console is the terminal channel: a person (or a test) types lines on
// standard input and reads replies on standard output, in one of two formats
// (README "Console"):
//
//   - text: every line belongs to the session console:default; replies print as
//     they are, notices on their own line starting with "↪️", errors start with
//     "error:".
//   - jsonl: each input line is plain text or {"session","user","text","id"};
//     each output line is one JSON object {"type","session","text","model"},
//     with "replayed": true on an answer sent again for a line whose id was
//     answered before (M7).
//
// The console user is always an admin and every session is a direct one.
package console

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/internal/termsafe"
)

// Name is the adapter's channel name.
const Name = "console"

// Formats.
const (
	FormatText  = "text"
	FormatJSONL = "jsonl"
)

// DefaultSession is the session of text lines and of jsonl lines without one.
const DefaultSession = "default"

// TerminalLineLimit is the longest line a terminal in canonical mode passes on
// (Linux's 4,096-byte line buffer less the newline): anything typed or pasted
// beyond it is dropped by the terminal before the bot can read it.
const TerminalLineLimit = 4095

// cutLine answers a line the terminal cut at TerminalLineLimit.
const cutLine = "this line reached 4,095 bytes, the most a terminal passes on in one line, so the rest of what you typed or pasted was cut and nothing was sent; send long text in parts, or put it in a file and pipe it in (bot < message.txt: one message per line)"

// Options configure the console.
type Options struct {
	Format string    // FormatText (default) or FormatJSONL
	In     io.Reader // input lines (os.Stdin)
	Out    io.Writer // replies, notices, errors, reports (os.Stdout)
	// Reports prints admin reports (KindReport); set when admin.channel is console.
	Reports bool
	// MaxMessageBytes rejects longer messages with an error line (0 = 65536).
	MaxMessageBytes int
	// Interactive: a person types at a terminal (text format): a "> " prompt
	// shows when the bot waits for input.
	Interactive bool
}

// Adapter is the console channel. It is safe for concurrent Send calls.
type Adapter struct {
	opts Options
	mu   sync.Mutex // serialises writes so output lines never interleave
	bw   *bufio.Writer
	// waiting is set while a line's turn runs; the turn's reply or error clears
	// it and signals answered, so lines are answered one at a time, in order.
	waiting  bool
	answered chan struct{}
	// status: a progress line shows (any output erases it first); streaming: a
	// reply is being printed as it arrives, by live.
	status, streaming bool
	live              *stream
}

var _ adapters.Adapter = (*Adapter)(nil)

// New returns a console adapter.
func New(opts Options) *Adapter {
	opts.Format = cmp.Or(opts.Format, FormatText)
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 65536
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.In == nil {
		opts.In = strings.NewReader("")
	}
	return &Adapter{opts: opts, bw: bufio.NewWriter(opts.Out), answered: make(chan struct{}, 1)}
}

// Name returns "console".
func (a *Adapter) Name() string { return Name }

// line is one input line, or a read error.
type line struct {
	text    string
	tooLong int // > 0: the line was this many bytes and was dropped
	err     error
}

// Run reads input lines and sends one Inbound per message until the input ends
// (it then returns nil) or ctx ends (it returns ctx.Err()). A malformed or
// oversized line yields an error output line and reading continues.
//
// The reading goroutine stops when the input ends; a read that blocks forever
// (an idle terminal) is abandoned when ctx ends, since a blocked read of a file
// cannot be interrupted.
func (a *Adapter) Run(ctx context.Context, inbox chan<- adapters.Inbound) error {
	lines := make(chan line)
	done := make(chan struct{})
	defer close(done)
	go a.read(lines, done)
	for n := 1; ; n++ {
		a.prompt()
		var l line
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case l, ok = <-lines:
		}
		if !ok {
			return nil
		}
		if l.err != nil {
			return fmt.Errorf("console: read: %w", l.err)
		}
		in, errText := a.parse(l, n)
		if errText != "" {
			_ = a.Send(ctx, adapters.Outbound{Kind: adapters.KindError, Channel: Name, SessionKey: in.SessionKey, ReplyTo: in.ReplyTo, Text: errText})
			continue
		}
		if in.Text == "" {
			if a.opts.Format == FormatText {
				a.print("(empty line: nothing was sent)\n") // every line gets an answer
			}
			continue
		}
		a.mu.Lock()
		a.waiting = true
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case inbox <- in:
		}
		// One line, one answer: the next line is read only after this one's reply
		// or error, so output follows input order even across jsonl sessions.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.answered:
		}
	}
}

// prompt shows "> " when a person waits at a terminal.
func (a *Adapter) prompt() {
	if a.opts.Interactive && a.opts.Format == FormatText {
		a.print("> ")
	}
}

// print writes text of the console's own (text format only).
func (a *Adapter) print(text string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, _ = a.bw.WriteString(text)
	_ = a.bw.Flush()
}

// read sends every input line to lines and closes it at the end of input.
func (a *Adapter) read(lines chan<- line, done <-chan struct{}) {
	defer close(lines)
	br := bufio.NewReaderSize(a.opts.In, 64*1024)
	// JSON escaping can double a message; anything longer than this cannot hold
	// an acceptable message, so it is dropped instead of buffered.
	limit := 2*a.opts.MaxMessageBytes + 4096
	send := func(l line) bool {
		select {
		case lines <- l:
			return true
		case <-done:
			return false
		}
	}
	for {
		var buf []byte
		size := 0
		err := bufio.ErrBufferFull
		for err == bufio.ErrBufferFull {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			size += len(chunk)
			if size <= limit {
				buf = append(buf, chunk...)
			}
		}
		if size > 0 {
			l := line{text: strings.TrimRight(string(buf), "\r\n")}
			if size > limit {
				l = line{tooLong: size}
			}
			if !send(l) {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				send(line{err: err})
			}
			return
		}
	}
}

// jsonIn is one structured jsonl input line.
type jsonIn struct {
	Session string `json:"session"`
	User    string `json:"user"`
	Text    string `json:"text"`
	// ID, optional, names the message for the client (M7): a line sent again
	// with an id already answered gets that answer again, marked replayed,
	// with no new model call and nothing stored twice.
	ID string `json:"id"`
}

// maxIDBytes bounds a message id.
const maxIDBytes = 200

// parse turns line n into an Inbound, or gives the text of an error line for
// the session in names; an empty line gives neither (in.Text is "").
func (a *Adapter) parse(l line, n int) (in adapters.Inbound, errText string) {
	in = adapters.Inbound{Channel: Name, SessionKey: Name + ":" + DefaultSession, User: Name + ":local", ReplyTo: DefaultSession, Direct: true, Admin: true}
	if a.opts.Interactive && len(l.text) == TerminalLineLimit {
		// The terminal's line discipline keeps at most this many bytes of a
		// line and drops the rest: sending what is left would answer half a
		// question as if it were whole.
		return in, cutLine
	}
	if l.tooLong > 0 {
		return in, fmt.Sprintf("input line %d is too long (%d bytes; limit %d); it was ignored", n, l.tooLong, a.opts.MaxMessageBytes)
	}
	text, trimmed := l.text, strings.TrimSpace(l.text)
	structured := a.opts.Format == FormatJSONL && strings.HasPrefix(trimmed, "{")
	if structured {
		var j jsonIn
		dec := json.NewDecoder(strings.NewReader(trimmed))
		if err := dec.Decode(&j); err != nil {
			if j.Session != "" {
				// A field of the wrong type ("id": 5): encoding/json read the
				// others, so the error goes to the session the line names.
				in.SessionKey, in.ReplyTo = Name+":"+j.Session, j.Session
			}
			return in, fmt.Sprintf("input line %d is not valid JSON (%s); want plain text or {\"session\": \"s1\", \"user\": \"u1\", \"text\": \"hello\"}", n, shortErr(err))
		}
		if dec.More() {
			return in, fmt.Sprintf("input line %d has more than one JSON value", n)
		}
		if j.Session != "" {
			in.SessionKey, in.ReplyTo = Name+":"+j.Session, j.Session
		}
		if len(j.ID) > maxIDBytes {
			return in, fmt.Sprintf("input line %d has an id of %d bytes; the limit is %d", n, len(j.ID), maxIDBytes)
		}
		if j.User != "" {
			in.User = Name + ":" + j.User
		}
		if j.ID != "" {
			// One id names one message of the console's clients, whatever the
			// session (M7).
			in.EventID, in.Replay = Name+":id:"+j.ID, true
		}
		text = j.Text
	}
	if strings.TrimSpace(text) == "" {
		switch {
		case structured:
			return in, fmt.Sprintf("input line %d has no text", n)
		case text != "":
			// Spaces or tabs alone are no message, but a line someone meant
			// to send: an error line, in either format, never silence
			// (issue 37). An empty line stays a separator: jsonl skips it,
			// text notes it (Run).
			return in, fmt.Sprintf("input line %d holds only spaces or tabs: nothing was sent", n)
		}
		return in, ""
	}
	if len(text) > a.opts.MaxMessageBytes {
		return in, fmt.Sprintf("message too long (%d bytes; limit %d)", len(text), a.opts.MaxMessageBytes)
	}
	in.Text = text
	return in, ""
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// jsonOut is one jsonl output line.
type jsonOut struct {
	Type    string `json:"type"`
	Session string `json:"session,omitempty"`
	Text    string `json:"text"`
	Model   string `json:"model,omitempty"`
	// Replayed marks an answer given before to a line with the same id (M7).
	Replayed bool `json:"replayed,omitempty"`
}

// Send prints one outbound message. Reports print only with Options.Reports.
func (a *Adapter) Send(ctx context.Context, out adapters.Outbound) error {
	kind := cmp.Or(out.Kind, adapters.KindReply)
	if kind == adapters.KindReport && !a.opts.Reports {
		return nil
	}
	var b bytes.Buffer
	if a.opts.Format == FormatJSONL {
		o := jsonOut{Type: string(kind), Session: strings.TrimPrefix(out.SessionKey, Name+":"), Text: out.Text, Replayed: out.Replayed}
		if out.SessionKey == "" && kind != adapters.KindReport {
			o.Session = out.ReplyTo
		}
		if kind == adapters.KindReply {
			o.Model = out.Model
		}
		enc := json.NewEncoder(termsafe.NewJSONWriter(&b)) // T4: no raw C1 or bidi control either
		enc.SetEscapeHTML(false)
		if err := enc.Encode(o); err != nil {
			return fmt.Errorf("console: encode: %w", err)
		}
	} else {
		b.WriteString(textLine(out) + "\n")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.clearStatus()
	if a.live != nil && a.streaming {
		if kind == adapters.KindNotice {
			// N4: a notice is a line of its own before the reply, even when
			// the reply is already showing: it goes above the preview.
			a.live.above(b.String())
			return a.bw.Flush()
		}
		a.live.erase() // the line is this message's
	}
	_, _ = a.bw.Write(b.Bytes()) // a failed write fails the Flush too
	err := a.bw.Flush()
	if kind == adapters.KindReply || kind == adapters.KindError {
		a.answer()
	}
	if err != nil {
		return fmt.Errorf("console: write: %w", err)
	}
	return nil
}

// answer lets Run read the next line once the pending turn is answered. The
// caller holds a.mu.
func (a *Adapter) answer() {
	if !a.waiting {
		return
	}
	a.waiting = false
	select {
	case a.answered <- struct{}{}:
	default:
	}
}

// textLine renders one outbound message for the text format, with terminal
// control sequences removed (T4).
func textLine(out adapters.Outbound) string {
	text := termsafe.Strip(strings.TrimRight(out.Text, "\n"))
	switch out.Kind {
	case adapters.KindNotice:
		if !strings.HasPrefix(text, "↪️") {
			text = "↪️ " + text
		}
	case adapters.KindError:
		if !strings.HasPrefix(text, "error:") {
			text = "error: " + text
		}
	case adapters.KindReport:
		text = "report: " + strings.ReplaceAll(text, "\n", "\nreport: ")
	}
	return text
}
