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
	if a.api == APIAnthropic {
		if status, ok := a.anthropicHostile(mode); ok {
			return status, true
		}
	}
	switch mode {
	case ModeGzipBomb:
		return a.gzipBomb(), true
	case ModeEndlessStream:
		return a.endless(), true
	case ModeHugeLine:
		return a.hugeLine(), true
	case ModeHugeChunk:
		return a.hugeChunk(), true
	case ModeHugeErrorBody:
		a.w.Header().Set("Content-Type", "application/json")
		a.w.WriteHeader(http.StatusInternalServerError)
		if a.send([]byte(`{"error":{"type":"server_error","param":null,"code":null,"message":"`)) &&
			a.sendFill(a.size(defaultHugeSize)) {
			a.send([]byte(`"}}`))
		}
		return http.StatusInternalServerError, true
	case ModeRedirectOtherPort:
		base, err := a.s.trap.url(a.s)
		if err != nil {
			return writeRaw(a.w, http.StatusServiceUnavailable, "text/plain", "fake llm closed\n"), true
		}
		return a.redirect(base + a.r.URL.RequestURI()), true
	case ModeRedirectLoop:
		return a.redirect(a.r.URL.RequestURI()), true
	}
	return 0, false
}

func (a *answer) redirect(loc string) int {
	a.w.Header().Set("Location", loc)
	return writeRaw(a.w, http.StatusTemporaryRedirect, "text/plain", "moved to "+loc+"\n")
}

func (a *answer) gzipBomb() int {
	bombOnce.Do(makeBombs)
	size := a.size(defaultBombSize)
	h := a.w.Header()
	h.Set("Content-Encoding", "gzip")
	if a.req.Stream {
		h.Set("Content-Type", "text/event-stream")
		a.w.WriteHeader(http.StatusOK)
		for sent := int64(0); sent < size; sent += bombChunksInflated {
			if !a.send(bombChunks) {
				return http.StatusOK
			}
		}
		a.send(bombDone)
		a.flush()
		return http.StatusOK
	}
	h.Set("Content-Type", "application/json")
	a.w.WriteHeader(http.StatusOK)
	if !a.send(gz(a.jsonHead("chat.completion", `"choices":[{"index":0,"message":{"role":"assistant","content":"`))) {
		return http.StatusOK
	}
	for sent := int64(0); sent < size; sent += bombUnit {
		if !a.send(bombText) {
			return http.StatusOK
		}
	}
	a.send(bombJSONTail)
	return http.StatusOK
}

// endless sends content as fast as the client reads it until the client leaves.
func (a *answer) endless() int {
	if !a.req.Stream {
		a.w.Header().Set("Content-Type", "application/json")
		a.w.WriteHeader(http.StatusOK)
		if !a.send(a.jsonHead("chat.completion", `"choices":[{"index":0,"message":{"role":"assistant","content":"`)) {
			return http.StatusOK
		}
		block := bytes.Repeat([]byte("word "), 4<<10)
		for a.send(block) {
		}
		return http.StatusOK
	}
	a.startStream()
	if !a.chunk(delta{Role: "assistant"}, nil) {
		return http.StatusOK
	}
	one := append([]byte("data: "), a.jsonHead("chat.completion.chunk", `"choices":[{"index":0,"delta":{"content":"word "},"finish_reason":null}]}`)...)
	one = append(one, "\n\n"...)
	batch := bytes.Repeat(one, 64)
	for a.send(batch) {
		a.flush()
	}
	return http.StatusOK
}

func (a *answer) hugeLine() int {
	n := a.size(defaultHugeSize)
	if !a.req.Stream {
		a.w.Header().Set("Content-Type", "application/json")
		a.w.WriteHeader(http.StatusOK)
		if a.send(a.jsonHead("chat.completion", `"x_padding":"`)) && a.sendFill(n) {
			a.send([]byte(`","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`))
		}
		return http.StatusOK
	}
	a.startStream()
	if !a.chunk(delta{Role: "assistant"}, nil) || !a.send([]byte("data: ")) || !a.sendFill(n) || !a.send([]byte("\n\n")) {
		return http.StatusOK
	}
	a.finishStream(0)
	return http.StatusOK
}

func (a *answer) hugeChunk() int {
	n := a.size(defaultHugeSize)
	if !a.req.Stream {
		a.w.Header().Set("Content-Type", "application/json")
		a.w.WriteHeader(http.StatusOK)
		if a.send(a.jsonHead("chat.completion", `"choices":[{"index":0,"message":{"role":"assistant","content":"`)) && a.sendFill(n) {
			a.send([]byte(`"},"finish_reason":"stop"}]}`))
		}
		return http.StatusOK
	}
	a.startStream()
	head := append([]byte("data: "), a.jsonHead("chat.completion.chunk", `"choices":[{"index":0,"delta":{"content":"`)...)
	if !a.chunk(delta{Role: "assistant"}, nil) || !a.send(head) || !a.sendFill(n) ||
		!a.send([]byte(`"},"finish_reason":null}]}`+"\n\n")) {
		return http.StatusOK
	}
	a.finishStream(1)
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
	mu       sync.Mutex
	srv      *http.Server
	ln       net.Listener
	serveErr chan error
	handlers sync.WaitGroup
	closed   bool
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			http.Error(w, "fake llm closed", http.StatusServiceUnavailable)
			return
		}
		t.handlers.Add(1) // under mu, so never racing close's Wait
		t.mu.Unlock()
		defer t.handlers.Done()

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
	})
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
