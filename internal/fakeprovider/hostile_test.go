package fakeprovider

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"
)

// rawClient neither inflates nor follows redirects: it sees the bytes as sent.
func rawClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func postWith(t *testing.T, c *http.Client, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// sseText joins the content deltas of an SSE body and returns its longest line.
func sseText(t *testing.T, body []byte) (text string, longest int, done bool) {
	t.Helper()
	var b strings.Builder
	for line := range bytes.SplitSeq(body, []byte("\n")) {
		longest = max(longest, len(line))
		payload, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		if string(payload) == "[DONE]" {
			done = true
			continue
		}
		var ch struct {
			Choices []struct{ Delta struct{ Content string } }
		}
		if json.Unmarshal(payload, &ch) != nil {
			continue // huge_line's line is no JSON on purpose
		}
		for _, c := range ch.Choices {
			b.WriteString(c.Delta.Content)
		}
	}
	return b.String(), longest, done
}

// covers T1: the hostile modes send what they say, at the size asked for.
func TestHostileModes_T1_Shapes(t *testing.T) {
	const size = 1 << 20
	s := start(t)
	c := rawClient(t)
	type check func(t *testing.T, resp *http.Response, body []byte)
	nonStreamContent := func(field string) check {
		return func(t *testing.T, resp *http.Response, body []byte) {
			var out map[string]any
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			var got string
			if field == "content" {
				got = out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
			} else {
				got = out[field].(string)
			}
			if len(got) != size {
				t.Fatalf("%s is %d bytes, want %d", field, len(got), size)
			}
		}
	}
	cases := []struct {
		mode   Mode
		stream bool
		status int
		check  check
	}{
		{ModeGzipBomb, true, 200, func(t *testing.T, resp *http.Response, body []byte) {
			if resp.Header.Get("Content-Encoding") != "gzip" || len(body) > size/100 {
				t.Fatalf("encoding %q, %d bytes on the wire", resp.Header.Get("Content-Encoding"), len(body))
			}
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			plain, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			text, _, done := sseText(t, plain)
			if len(plain) < size || !done || !strings.HasPrefix(text, "bomb bomb ") {
				t.Fatalf("inflated %d bytes, done %v, text %.20q", len(plain), done, text)
			}
		}},
		{ModeGzipBomb, false, 200, func(t *testing.T, resp *http.Response, body []byte) {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := io.ReadAll(zr)
			nonStreamContent("content")(t, resp, plain)
		}},
		{ModeHugeLine, true, 200, func(t *testing.T, _ *http.Response, body []byte) {
			if _, longest, done := sseText(t, body); longest != len("data: ")+size || !done {
				t.Fatalf("longest line %d, done %v", longest, done)
			}
		}},
		{ModeHugeLine, false, 200, nonStreamContent("x_padding")},
		{ModeHugeChunk, true, 200, func(t *testing.T, _ *http.Response, body []byte) {
			if text, _, done := sseText(t, body); len(text) != size || !done {
				t.Fatalf("content %d bytes, done %v", len(text), done)
			}
		}},
		{ModeHugeChunk, false, 200, nonStreamContent("content")},
		{ModeHugeErrorBody, true, 500, func(t *testing.T, _ *http.Response, body []byte) {
			var e struct {
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Type != "server_error" || len(e.Error.Message) != size {
				t.Fatalf("error body: %v %q %d", err, e.Error.Type, len(e.Error.Message))
			}
		}},
	}
	for _, tc := range cases {
		t.Run(string(tc.mode)+map[bool]string{true: "/stream", false: "/json"}[tc.stream], func(t *testing.T) {
			s.Reset()
			s.Script(Rule{Mode: tc.mode, Size: size})
			resp := postWith(t, c, s.BaseURL("p")+"/chat/completions", "k", chatBody("m", "x", tc.stream))
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != tc.status {
				t.Fatalf("status %d, err %v", resp.StatusCode, err)
			}
			tc.check(t, resp, body)
		})
	}
}

// covers T1: 100 MiB bodies and a 4 GiB bomb are made as they are sent; the
// fake never holds them (what the whole test process allocates stays small).
func TestHostileModes_T1_FakeMemoryBounded(t *testing.T) {
	s := start(t)
	c := rawClient(t)
	for _, m := range []Mode{ModeHugeLine, ModeHugeChunk, ModeHugeErrorBody, ModeGzipBomb} {
		t.Run(string(m), func(t *testing.T) {
			s.Reset()
			s.Script(Rule{Mode: m})
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp := postWith(t, c, s.BaseURL("p")+"/chat/completions", "k", chatBody("m", "x", true))
			n, err := io.CopyBuffer(io.Discard, resp.Body, make([]byte, 32<<10))
			resp.Body.Close()
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			want := int64(defaultHugeSize)
			if m == ModeGzipBomb {
				want = defaultBombSize / 1100 // compressed
			}
			if n < want {
				t.Fatalf("sent %d bytes, want at least %d", n, want)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
				t.Fatalf("allocated %d MiB to send %d MiB", alloc>>20, n>>20)
			}
		})
	}
}

// covers T1: endless_stream never ends by itself, and its handler ends when the
// client leaves.
func TestHostileModes_T1_EndlessStream(t *testing.T) {
	s := start(t)
	s.Script(Rule{Mode: ModeEndlessStream})
	c := rawClient(t)
	for _, stream := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.BaseURL("p")+"/chat/completions", strings.NewReader(chatBody("m", "x", stream)))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		head, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		if err != nil || len(head) != 4<<20 {
			t.Fatalf("read %d bytes: %v", len(head), err)
		}
		if stream {
			if text, _, done := sseText(t, head); done || !strings.HasPrefix(text, "word word ") {
				t.Fatalf("stream text %.20q done %v", text, done)
			}
		} else if !bytes.Contains(head[:200], []byte(`"content":"word word `)) {
			t.Fatalf("body starts %q", head[:200])
		}
		cancel()
		resp.Body.Close()
	}
	if calls := settled(t, s); len(calls) != 2 || calls[0].Mode != ModeEndlessStream {
		t.Fatalf("calls %+v", calls)
	}
}

// covers T2: redirect_other_port points at a trap on another port that records
// whatever a following client sends; redirect_loop points at itself.
func TestHostileModes_T2_Redirects(t *testing.T) {
	s := start(t)
	s.Script(Rule{Model: "away", Mode: ModeRedirectOtherPort})
	s.Script(Rule{Model: "loop", Mode: ModeRedirectLoop})
	raw := rawClient(t)
	base := s.BaseURL("p") + "/chat/completions"

	resp := postWith(t, raw, base, "sk-CANARY-trap-0001", chatBody("away", "secret prompt", false))
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	self, _ := url.Parse(s.URL())
	if err != nil || resp.StatusCode != http.StatusTemporaryRedirect || loc.Hostname() != "127.0.0.1" ||
		loc.Port() == self.Port() || loc.Path != "/p/v1/chat/completions" {
		t.Fatalf("status %d location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if hits := s.TrapHits(); len(hits) != 0 {
		t.Fatalf("trap hit without a follower: %+v", hits)
	}

	// A client that follows redirects (Go's default) leaks key and prompt to it.
	follow := &http.Client{Transport: &http.Transport{}}
	defer follow.Transport.(*http.Transport).CloseIdleConnections()
	resp = postWith(t, follow, base, "sk-CANARY-trap-0001", chatBody("away", "secret prompt", false))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	hits := s.TrapHits()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("answer from the redirect target")) ||
		len(hits) != 1 || hits[0].KeyID != KeyID("sk-CANARY-trap-0001") || hits[0].BodyBytes < int64(len("secret prompt")) {
		t.Fatalf("follower: %d %s, hits %+v", resp.StatusCode, body, hits)
	}
	tr, err := http.Get(s.URL() + "/_fake/trap")
	if err != nil {
		t.Fatal(err)
	}
	js, _ := io.ReadAll(tr.Body)
	tr.Body.Close()
	if strings.Contains(string(js), "CANARY") || !strings.Contains(string(js), `"key_id":"`+KeyID("sk-CANARY-trap-0001")+`"`) {
		t.Fatalf("trap json %s", js)
	}

	resp = postWith(t, raw, base, "k", chatBody("loop", "x", true))
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "/p/v1/chat/completions" {
		t.Fatalf("loop: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	req, _ := http.NewRequest(http.MethodPost, base, strings.NewReader(chatBody("loop", "x", true)))
	if _, err := follow.Do(req); err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("follower of the loop: %v", err)
	}
	if n := s.CallCount(Filter{Model: "loop"}); n != 1+10 {
		t.Fatalf("loop calls %d, want 11 (one raw, ten followed)", n)
	}
	s.Reset()
	if len(s.TrapHits()) != 0 {
		t.Fatal("reset kept trap hits")
	}
}
