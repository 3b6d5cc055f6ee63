package fakeprovider

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

const (
	defaultHugeSize = 100 << 20 // huge_line, huge_chunk, huge_error_body
	defaultBombSize = 4 << 30   // what gzip_bomb inflates to
	bombUnit        = 1 << 20   // what one precompressed gzip member inflates to
)

// fill is the read-only block the huge modes send again and again.
var fill = bytes.Repeat([]byte("a"), 32<<10)

// Gzip members of bombUnit bytes each, made once. A gzip body may be a series
// of members, so repeating one member makes a bomb of any size from ~1 KB of
// memory: bombChunks inflates to SSE content chunks, bombText to answer text.
var (
	bombOnce               sync.Once
	bombChunks, bombText   []byte
	bombChunksInflated     int64 // a whole number of lines, so a little under bombUnit
	bombDone, bombJSONTail []byte
)

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

func makeBombs() {
	line := `data: {"id":"chatcmpl-bomb","object":"chat.completion.chunk","created":0,"model":"bomb","choices":[{"index":0,"delta":{"content":"bomb "},"finish_reason":null}]}` + "\n\n"
	lines := bytes.Repeat([]byte(line), bombUnit/len(line))
	bombChunks, bombChunksInflated = gz(lines), int64(len(lines))
	bombText = gz(bytes.Repeat([]byte("a"), bombUnit))
	bombDone = gz([]byte("data: [DONE]\n\n"))
	bombJSONTail = gz([]byte(`"},"finish_reason":"stop"}]}`))
}

// PrepareBombs builds the gzip bomb's members now rather than on the first
// gzip_bomb call, which would otherwise spend its first moments compressing
// (long enough, on a loaded machine, for a short idle timeout to fire before
// any header is sent).
func PrepareBombs() {
	bombOnce.Do(makeBombs)
	anthropicBombOnce.Do(makeAnthropicBombs)
}

func (a *answer) size(def int64) int64 {
	if a.rule.Size > 0 {
		return a.rule.Size
	}
	return def
}

// gone reports whether the client left or the server is closing.
func (a *answer) gone() bool {
	select {
	case <-a.r.Context().Done():
		return true
	case <-a.s.done:
		return true
	default:
		return false
	}
}

// send writes b and reports whether the client is still there.
func (a *answer) send(b []byte) bool {
	if a.gone() {
		return false
	}
	_, err := a.w.Write(b)
	return err == nil
}

// sendFill writes n bytes of fill.
func (a *answer) sendFill(n int64) bool {
	for n > 0 {
		k := min(n, int64(len(fill)))
		if !a.send(fill[:k]) {
			return false
		}
		n -= k
	}
	return true
}

// jsonHead is the start of a completion object, up to and including the opening
// quote of the string field named last (e.g. `"choices":[{...,"content":"`).
func (a *answer) jsonHead(object, rest string) []byte {
	model, _ := json.Marshal(a.req.Model)
	return fmt.Appendf(nil, `{"id":%q,"object":%q,"created":%d,"model":%s,%s`, a.id, object, a.created, model, rest)
}

// hostile answers the T1/T2 modes; ok is false for any other mode.
func (a *answer) hostile(mode Mode) (status int, ok bool) {
	switch mode {
	case ModeRedirectOtherPort:
		base, err := a.s.trap.url(a.s)
		if err != nil {
			return writeRaw(a.w, http.StatusServiceUnavailable, "text/plain", "fake llm closed\n"), true
		}
		return a.redirect(base + a.r.URL.RequestURI()), true
	case ModeRedirectLoop:
		return a.redirect(a.r.URL.RequestURI()), true
	case ModeGzipBomb:
		return a.gzipBomb(a.framing()), true
	case ModeEndlessStream, ModeHugeLine, ModeHugeChunk, ModeHugeErrorBody:
	default:
		return 0, false
	}
	f, n := a.framing(), a.size(defaultHugeSize)
	switch {
	case mode == ModeHugeErrorBody:
		return a.body(http.StatusInternalServerError, f.errHead, n, []byte(`"}}`)), true
	case mode == ModeEndlessStream && !a.req.Stream:
		a.w.Header().Set("Content-Type", "application/json")
		a.w.WriteHeader(http.StatusOK)
		block := bytes.Repeat([]byte("word "), 4<<10)
		for ok := a.send(f.text); ok; ok = a.send(block) {
		}
	case mode == ModeEndlessStream:
		batch := bytes.Repeat(f.word, 64)
		for ok := f.start(); ok && a.send(batch); {
			a.flush()
		}
	case mode == ModeHugeLine && !a.req.Stream:
		return a.body(http.StatusOK, f.pad, n, f.padEnd), true
	case mode == ModeHugeLine:
		if f.start() && a.send(f.line) && a.sendFill(n) && a.send([]byte("\n\n")) {
			f.end(0)
		}
	case !a.req.Stream: // huge_chunk
		return a.body(http.StatusOK, f.text, n, f.textEnd), true
	default:
		if f.start() && a.send(f.deltaHead) && a.sendFill(n) && a.send(f.deltaEnd) {
			f.end(1)
		}
	}
	return http.StatusOK, true
}

// framing is one protocol's shape of the hostile answers: a JSON answer up to
// the opening quote of its text or of a padding field and what closes each,
// an error body up to its message, a stream's opening, text deltas and end,
// and the gzip members of a bomb.
type framing struct {
	text, textEnd []byte
	pad, padEnd   []byte // padEnd closes the answer with the text "ok"
	errHead       []byte
	start         func() bool // a stream's opening, up to its first text delta
	word          []byte      // one delta of the text "word "
	deltaHead     []byte      // a delta up to its text's opening quote
	deltaEnd      []byte
	line          []byte // the start of an event's data line
	end           func(out int)
	bombDeltas    []byte // a gzip member of text deltas, inflating to bombInflated bytes
	bombInflated  int64
	bombEnd       []byte // gzip: a stream's end
	bombTail      []byte // gzip: what closes an answer after its text
}

func (a *answer) framing() framing {
	bombOnce.Do(makeBombs)
	if a.api == APIAnthropic {
		anthropicBombOnce.Do(makeAnthropicBombs)
		const delta = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`
		return framing{
			text: a.messageHead(messageText), textEnd: []byte(`"}],"stop_reason":"end_turn"}`),
			pad: a.messageHead(`"x_padding":"`), padEnd: []byte(`",` + messageText + `ok"}],"stop_reason":"end_turn"}`),
			errHead:   []byte(`{"type":"error","error":{"type":"api_error","message":"`),
			start:     func() bool { a.anthropicStart(); return true },
			word:      anthropicFrame("content_block_delta", []byte(delta+`word "}}`)),
			deltaHead: []byte("event: content_block_delta\ndata: " + delta), deltaEnd: []byte("\"}}\n\n"),
			line:       []byte("event: content_block_delta\ndata: "),
			end:        func(out int) { a.anthropicEnd("end_turn", out) },
			bombDeltas: anthropicBombDeltas, bombInflated: anthropicBombInflated,
			bombEnd: anthropicBombEnd, bombTail: anthropicMsgTail,
		}
	}
	chunk := func(rest string) []byte {
		return append([]byte("data: "), a.jsonHead("chat.completion.chunk", rest)...)
	}
	return framing{
		text:    a.jsonHead("chat.completion", `"choices":[{"index":0,"message":{"role":"assistant","content":"`),
		textEnd: []byte(`"},"finish_reason":"stop"}]}`),
		pad:     a.jsonHead("chat.completion", `"x_padding":"`),
		padEnd:  []byte(`","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`),
		errHead: []byte(`{"error":{"type":"server_error","param":null,"code":null,"message":"`),
		start: func() bool {
			a.startStream()
			return a.chunk(delta{Role: "assistant"}, nil)
		},
		word:      append(chunk(`"choices":[{"index":0,"delta":{"content":"word "},"finish_reason":null}]}`), "\n\n"...),
		deltaHead: chunk(`"choices":[{"index":0,"delta":{"content":"`), deltaEnd: []byte(`"},"finish_reason":null}]}` + "\n\n"),
		line:       []byte("data: "),
		end:        a.finishStream,
		bombDeltas: bombChunks, bombInflated: bombChunksInflated, bombEnd: bombDone, bombTail: bombJSONTail,
	}
}

// body answers status with a JSON body: head, n bytes of fill, then tail,
// for as long as the client reads.
func (a *answer) body(status int, head []byte, n int64, tail []byte) int {
	a.w.Header().Set("Content-Type", "application/json")
	a.w.WriteHeader(status)
	if a.send(head) && a.sendFill(n) {
		a.send(tail)
	}
	return status
}

func (a *answer) redirect(loc string) int {
	a.w.Header().Set("Location", loc)
	return writeRaw(a.w, http.StatusTemporaryRedirect, "text/plain", "moved to "+loc+"\n")
}

// gzipBomb sends gzip members that inflate to the answer's size: text deltas
// of a stream, or the text of one answer.
func (a *answer) gzipBomb(f framing) int {
	size, sent := a.size(defaultBombSize), int64(0)
	h := a.w.Header()
	h.Set("Content-Encoding", "gzip")
	if a.req.Stream {
		h.Set("Content-Type", "text/event-stream")
		a.w.WriteHeader(http.StatusOK)
		for ; sent < size && a.send(f.bombDeltas); sent += f.bombInflated {
		}
		if sent >= size {
			a.send(f.bombEnd)
			a.flush()
		}
		return http.StatusOK
	}
	h.Set("Content-Type", "application/json")
	a.w.WriteHeader(http.StatusOK)
	if !a.send(gz(f.text)) {
		return http.StatusOK
	}
	for ; sent < size && a.send(bombText); sent += bombUnit {
	}
	if sent >= size {
		a.send(f.bombTail)
	}
	return http.StatusOK
}

// finishStream sends the stop chunk, the usage chunk if asked for, and [DONE].
func (a *answer) finishStream(completion int) {
	stop := "stop"
	a.chunk(delta{}, &stop)
	if a.req.StreamOptions != nil && a.req.StreamOptions.IncludeUsage {
		b, _ := json.Marshal(map[string]any{
			"id": a.id, "object": "chat.completion.chunk", "created": a.created, "model": a.req.Model,
			"choices": []any{}, "usage": a.usage(completion),
		})
		a.event(b)
	}
	a.event([]byte("[DONE]"))
	a.flush()
}

// TrapHit is one request that reached the redirect target of
// redirect_other_port: a client that follows redirects sent its key (KeyID says
// which) and its prompt (BodyBytes) to a place it never meant to.
type TrapHit struct {
	Time      time.Time `json:"time"`
	Method    string    `json:"method"`
	Path      string    `json:"path"`
	KeyID     string    `json:"key_id"` // KeyID of the bearer or x-api-key sent; "" = none
	BodyBytes int64     `json:"body_bytes"`
}

// trap is a second listener on 127.0.0.1 that records every request and answers
// it like a provider would, so a client that follows the redirect "succeeds".
type trap struct {
	gate     // its mu also guards the fields below
	srv      *http.Server
	ln       net.Listener
	serveErr chan error
	hits     []TrapHit
}

// url starts the trap on first use and returns its root URL.
func (t *trap) url(s *Server) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return "", errors.New("fakeprovider: closed")
	}
	if t.ln == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("fakeprovider: trap listen: %w", err)
		}
		t.ln = ln
		t.srv = &http.Server{Handler: t.handler(s), ReadHeaderTimeout: 10 * time.Second}
		t.serveErr = make(chan error, 1)
		go func() { t.serveErr <- t.srv.Serve(ln) }()
	}
	return "http://" + t.ln.Addr().String(), nil
}

func (t *trap) handler(s *Server) http.Handler {
	return t.let(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		n, _ := io.Copy(io.Discard, r.Body)
		t.mu.Lock()
		t.hits = append(t.hits, TrapHit{Time: s.now(), Method: r.Method, Path: r.URL.Path,
			KeyID: KeyID(anyKey(r)), BodyBytes: int64(len(body)) + n})
		t.mu.Unlock()

		var req chatRequest
		if json.Unmarshal(body, &req) != nil {
			writeRaw(w, http.StatusOK, "text/plain", "ok\n")
			return
		}
		a := &answer{s: s, w: w, r: r, req: &req, provider: "trap", rule: Rule{Reply: "answer from the redirect target"}}
		a.run(ModeOK)
	}))
}

// anyKey is whichever credential a request carries: a client that follows a
// redirect sends the header of its own protocol.
func anyKey(r *http.Request) string {
	if k := r.Header.Get("api-key"); k != "" {
		return k
	}
	return bearerKey(r)
}

func (t *trap) close() {
	t.mu.Lock()
	t.closed = true
	srv := t.srv
	t.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
		<-t.serveErr
	}
	t.handlers.Wait()
}

func (t *trap) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hits = nil
}

// TrapHits returns what reached the redirect target of redirect_other_port,
// oldest first. A client that never follows redirects leaves it empty.
func (s *Server) TrapHits() []TrapHit {
	s.trap.mu.Lock()
	defer s.trap.mu.Unlock()
	return slices.Clone(s.trap.hits)
}

func (s *Server) handleTrap(w http.ResponseWriter, _ *http.Request) {
	hits := s.TrapHits()
	if hits == nil {
		hits = []TrapHit{}
	}
	writeJSON(w, http.StatusOK, hits)
}
