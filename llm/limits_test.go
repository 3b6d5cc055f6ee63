package llm

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

// covers T1: the body and line caps are exact, whatever the read sizes.
func TestBoundedBody_T1(t *testing.T) {
	cases := []struct {
		name      string
		body      string
		max, line int64
		wantErr   string // "" = the whole body reads
	}{
		{"at the body cap", strings.Repeat("x", 100), 100, 0, ""},
		{"one past the body cap", strings.Repeat("x", 101), 100, 0, "limits.max_response_bytes (100 bytes)"},
		{"lines at the line cap", strings.Repeat(strings.Repeat("x", 10)+"\n", 5), 100, 10, ""},
		{"a line one past the line cap", "xxxxxxxxxx\n" + strings.Repeat("y", 11) + "\n", 100, 10, "stream line longer than 10 bytes"},
		{"an unterminated line past the line cap", strings.Repeat("z", 50), 100, 10, "stream line longer than 10 bytes"},
		{"no line cap for JSON bodies", strings.Repeat("z", 50), 100, 0, ""},
		{"line cap before body cap", strings.Repeat("z", 200), 100, 30, "stream line longer than 30 bytes"},
	}
	for _, tc := range cases {
		for _, one := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/onebyte=%v", tc.name, one), func(t *testing.T) {
				var r io.Reader = strings.NewReader(tc.body)
				if one {
					r = iotest.OneByteReader(r)
				}
				b := &boundedBody{rc: io.NopCloser(r), max: tc.max, maxLine: tc.line}
				got, err := io.ReadAll(b)
				if tc.wantErr == "" {
					if err != nil || string(got) != tc.body {
						t.Fatalf("read %d bytes, err %v", len(got), err)
					}
					return
				}
				if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				if int64(len(got)) > tc.max || (tc.line > 0 && !strings.HasPrefix(tc.body, string(got))) {
					t.Fatalf("read %d bytes past the cap", len(got))
				}
				if _, again := b.Read(make([]byte, 8)); !errors.Is(again, ErrRefused) {
					t.Fatalf("second read: %v", again)
				}
			})
		}
	}
}

// capRig is a fake and a client with the given caps (0 = defaults).
func capRig(t *testing.T, maxResp, maxAnswer int, rules ...fakeprovider.Rule) (*rig, *Client) {
	t.Helper()
	r := newRig(t, 5*time.Second, rules...)
	c, err := New(Config{Provider: "openai", BaseURL: r.fake.BaseURL("openai"), ProfileID: "openai:main", APIKey: canary,
		IdleTimeout: 5 * time.Second, MaxResponseBytes: maxResp, MaxAnswerBytes: maxAnswer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return r, c
}

// covers T1: the answer text is capped; nothing past the cap is shown or returned.
func TestChat_T1_AnswerCap(t *testing.T) {
	cases := []struct {
		name      string
		rule      fakeprovider.Rule
		maxAnswer int
	}{
		{"endless stream, small answer cap", fakeprovider.Rule{Mode: fakeprovider.ModeEndlessStream}, 64 << 10},
		{"one 1.5 MiB chunk, default caps", fakeprovider.Rule{Mode: fakeprovider.ModeHugeChunk, Size: 3 << 19}, 0},
		{"a long ordinary answer", fakeprovider.Rule{Reply: strings.Repeat("word ", 3000)}, 10 << 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, c := capRig(t, 0, tc.maxAnswer, tc.rule)
			limit := tc.maxAnswer
			if limit == 0 {
				limit = DefaultMaxAnswerBytes
			}
			shown := 0
			out, err := c.Chat(context.Background(), userReq("m", "x"), func(d string) { shown += len(d) })
			f := asFailure(t, err)
			if f.Reason != classify.ReasonRefusedResponse || f.Class != classify.ClassTransient ||
				!strings.Contains(f.Message, fmt.Sprintf("limits.max_answer_bytes (%d bytes)", limit)) {
				t.Fatalf("failure %+v", f)
			}
			if len(out.Text) > limit || shown > limit || out.Progress {
				t.Fatalf("text %d bytes, shown %d, progress %v, cap %d", len(out.Text), shown, out.Progress, limit)
			}
		})
	}
}

// covers T1, T2, V5: a probe (used by /recover) obeys the same caps as a chat.
func TestProbe_T1_T2_Caps(t *testing.T) {
	cases := []struct {
		rule   fakeprovider.Rule
		reason classify.Reason
		says   string
	}{
		{fakeprovider.Rule{Mode: fakeprovider.ModeGzipBomb}, classify.ReasonRefusedResponse, `compressed body (Content-Encoding "gzip"`},
		{fakeprovider.Rule{Mode: fakeprovider.ModeEndlessStream}, classify.ReasonRefusedResponse, "limits.max_response_bytes (8388608 bytes)"},
		{fakeprovider.Rule{Mode: fakeprovider.ModeHugeLine}, classify.ReasonRefusedResponse, "limits.max_response_bytes (8388608 bytes)"},
		{fakeprovider.Rule{Mode: fakeprovider.ModeHugeChunk}, classify.ReasonRefusedResponse, "limits.max_response_bytes (8388608 bytes)"},
		{fakeprovider.Rule{Mode: fakeprovider.ModeHugeChunk, Size: 2 << 20}, classify.ReasonRefusedResponse, "limits.max_answer_bytes (1048576 bytes)"},
		{fakeprovider.Rule{Mode: fakeprovider.ModeHugeErrorBody}, classify.ReasonTimeout, "server"},
		{fakeprovider.Rule{Mode: fakeprovider.ModeRedirectOtherPort}, classify.ReasonRefusedResponse, "redirect to http://127.0.0.1:"},
		{fakeprovider.Rule{Mode: fakeprovider.ModeRedirectLoop}, classify.ReasonRefusedResponse, "redirect to http://127.0.0.1:"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%d", tc.rule.Mode, tc.rule.Size), func(t *testing.T) {
			r, c := capRig(t, 0, 0, tc.rule)
			f := asFailure(t, c.Probe(context.Background(), "gpt-4o-mini"))
			if f.Reason != tc.reason || !strings.Contains(f.Message, tc.says) || f.Model != "gpt-4o-mini" {
				t.Fatalf("failure %+v, want %s saying %q", f, tc.reason, tc.says)
			}
			if len(f.Message) > 1024 || strings.Contains(f.Message, "CANARY") {
				t.Fatalf("message %d bytes: %.200s", len(f.Message), f.Message)
			}
			if n := r.fake.CallCount(fakeprovider.Filter{}); n != 1 || len(r.fake.TrapHits()) != 0 {
				t.Fatalf("%d calls, trap hits %+v", n, r.fake.TrapHits())
			}
		})
	}
}

// covers T1, A2: no compression is asked for, even through a caller's transport that
// would, and a compressed answer is refused rather than inflated.
func TestChat_T1_NoCompression(t *testing.T) {
	var asked atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		asked.Store(req.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, `data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
		zw.Close()
	}))
	defer srv.Close()
	for _, hc := range []*http.Client{nil, {Transport: &http.Transport{}}} {
		r := &rig{logs: &syncbuf.Buffer{}}
		c := r.newClient(t, srv.URL+"/v1", time.Second, hc)
		_, err := c.Chat(context.Background(), userReq("m", "x"), nil)
		c.CloseIdleConnections()
		if hc != nil {
			hc.Transport.(*http.Transport).CloseIdleConnections()
		}
		f := asFailure(t, err)
		if asked.Load() != "identity" || f.Reason != classify.ReasonRefusedResponse || !strings.Contains(f.Message, "not asked for") {
			t.Fatalf("Accept-Encoding %q, failure %+v", asked.Load(), f)
		}
	}
}

// covers T2, A2, P4: a redirect is never followed, and the error names it with the
// location's secrets hidden (scheme and host only); neither key nor prompt
// reaches the target.
func TestChat_T2_RedirectNamedAndRedacted(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	defer target.Close()
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				key := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
				loc := strings.Replace(target.URL, "http://", "http://admin:hunter2@", 1) + "/steal?api_key=" + key
				http.Redirect(w, req, loc, status)
			}))
			defer src.Close()
			r := &rig{logs: &syncbuf.Buffer{}}
			c := r.newClient(t, src.URL+"/v1", time.Second, nil)
			defer c.CloseIdleConnections()
			_, err := c.Chat(context.Background(), userReq("m", "the secret prompt"), nil)
			perr := c.Probe(context.Background(), "m")
			for _, e := range []error{err, perr} {
				f := asFailure(t, e)
				dump := fmt.Sprintf("%v %+v %s", e, *f, r.logs.String())
				if f.Reason != classify.ReasonRefusedResponse || f.Status != status ||
					!strings.Contains(f.Message, "redirect to http://127.0.0.1:") ||
					!strings.Contains(f.Message, fmt.Sprintf("(HTTP %d, never followed)", status)) {
					t.Fatalf("failure %+v", f)
				}
				if strings.Contains(dump, "CANARY") || strings.Contains(dump, "hunter2") {
					t.Fatalf("secret in %s", dump)
				}
			}
			for _, resp := range r.seen {
				if strings.Contains(fmt.Sprintf("%+v %v", resp, resp.Err), "CANARY") {
					t.Fatalf("canary fed to Classify: %v", resp.Err)
				}
			}
			if n := hits.Load(); n != 0 {
				t.Fatalf("the redirect target was reached %d times", n)
			}
		})
	}
}

func TestNew_T1_Caps(t *testing.T) {
	c, err := New(Config{Provider: "p", BaseURL: "http://127.0.0.1:1/v1"})
	if err != nil || c.cfg.MaxResponseBytes != DefaultMaxResponseBytes || c.cfg.MaxAnswerBytes != DefaultMaxAnswerBytes {
		t.Fatalf("defaults: %v %+v", err, c.cfg)
	}
	if _, err := New(Config{Provider: "p", BaseURL: "http://127.0.0.1:1/v1", MaxAnswerBytes: -1}); err == nil {
		t.Fatal("negative cap accepted")
	}
	if got := streamLineCap(DefaultMaxResponseBytes, DefaultMaxAnswerBytes); got != 2<<20+64<<10 {
		t.Fatalf("line cap %d", got)
	}
	if got := streamLineCap(1<<20, DefaultMaxAnswerBytes); got != 1<<20 {
		t.Fatalf("line cap %d above the body cap", got)
	}
}

// covers T2, A2, P4: a key of no known shape, echoed in a long Location, never
// shows: the location is named by scheme and host only.
func TestChat_T2_RedirectHidesKeyBeforeShortening(t *testing.T) {
	const key = "plainkey1234xyz"
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		key := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
		// the key sits near the end of what the 200-rune message shows
		pad := strings.Repeat("p", 90)
		http.Redirect(w, req, "http://127.0.0.1:1/"+pad+"/"+key+"/more", http.StatusFound)
	}))
	defer src.Close()
	logs := &bytes.Buffer{}
	c, err := New(Config{Provider: "p", BaseURL: src.URL + "/v1", APIKey: key,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	_, err = c.Chat(context.Background(), userReq("m", "x"), nil)
	f := asFailure(t, err)
	if dump := fmt.Sprintf("%v %+v %s", err, *f, logs); strings.Contains(dump, "plainke") || strings.Contains(dump, "ppp") ||
		!strings.Contains(f.Message, "redirect to http://127.0.0.1:1/…") {
		t.Fatalf("key (or part of it) shown: %s", dump)
	}
}
