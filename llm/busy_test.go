package llm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/fakeprovider"
)

// deltaLog records what onDelta was shown; the adapters call it from the
// call's goroutine, but the tests read it after, so it locks anyway.
type deltaLog struct {
	mu  sync.Mutex
	got []string
}

func (d *deltaLog) add(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, s)
}

func (d *deltaLog) all() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.got...)
}

// covers E4: a stream of keep-alives alone (SSE comments, chunks with an
// empty delta or whitespace; Anthropic's pings) is an idle timeout after
// IdleTimeout, in every protocol, and not a wait until the caller's
// deadline: nothing is shown, nothing is progress.
func TestKinds_E4_KeepAlivesAreNotProgress(t *testing.T) {
	const idle = 300 * time.Millisecond
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			r := newKindRig(t, k, idle, fakeprovider.Rule{Mode: fakeprovider.ModeKeepAliveOnly, Delay: 50 * time.Millisecond})
			ctx, cancel := context.WithTimeoutCause(context.Background(), 10*time.Second, classify.ErrAttemptTimeout)
			defer cancel()
			var deltas deltaLog
			t0 := time.Now()
			out, err := r.client.Chat(ctx, userReq("gpt-test", "hello"), deltas.add)
			elapsed := time.Since(t0)
			f := asFailure(t, err)
			if !f.Idle || f.Reason != classify.ReasonTimeout || !errors.Is(r.lastResponse(t).Err, classify.ErrIdleTimeout) {
				t.Fatalf("failure %+v, fed %+v: want an idle timeout", f, r.lastResponse(t))
			}
			// Bounds loose enough for a loaded -race run: never before the
			// idle timeout, and far from the caller's 10 s deadline.
			if elapsed < idle || elapsed > 3*time.Second {
				t.Fatalf("ended after %v, want about %v", elapsed, idle)
			}
			if got := deltas.all(); len(got) != 0 || out.Progress || strings.TrimSpace(out.Text) != "" {
				t.Fatalf("deltas %q, output %+v", got, out)
			}
			if r.fake.CallCount(fakeprovider.Filter{}) != 1 {
				t.Fatal("want exactly one call")
			}
		})
	}
}

// covers E4, R8: real text keeps a stream alive however long it runs: a slow
// stream whose whole is longer than the idle timeout, each gap a quarter of
// it, answers in every protocol (Anthropic's fake sends pings among its
// words).
func TestKinds_E4_SlowTextIsProgress(t *testing.T) {
	reply := "one two three four five six"
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			t.Parallel()
			r := newKindRig(t, k, time.Second, fakeprovider.Rule{Mode: fakeprovider.ModeSlowStream, Delay: 250 * time.Millisecond, Reply: reply})
			var deltas deltaLog
			out, err := r.client.Chat(context.Background(), userReq("gpt-test", "hi"), deltas.add)
			if err != nil || out.Text != reply || strings.Join(deltas.all(), "") != reply || !out.Progress {
				t.Fatalf("out %+v err %v deltas %q", out, err, deltas.all())
			}
		})
	}
}

// covers E5, R13: an answer of reasoning alone is empty output in every
// protocol (reasoning_content; Anthropic's thinking block): the engine
// retries it once, then falls back. No reasoning is shown or returned.
func TestKinds_E5_ReasoningIsNotAnAnswer(t *testing.T) {
	const reasoning = "secretly weighing whether to answer at all"
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			r := newKindRig(t, k, 3*time.Second, fakeprovider.Rule{Mode: fakeprovider.ModeReasoningOnly, Reply: reasoning})
			var deltas deltaLog
			out, err := r.client.Chat(context.Background(), userReq("gpt-test", "hello"), deltas.add)
			f := asFailure(t, err)
			if f.Reason != classify.ReasonEmptyResponse || f.Idle || !errors.Is(r.lastResponse(t).Err, classify.ErrEmptyOutput) {
				t.Fatalf("failure %+v, fed %+v: want empty output", f, r.lastResponse(t))
			}
			if got := deltas.all(); len(got) != 0 || out.Text != "" || out.Progress || out.FinishReason != "stop" {
				t.Fatalf("deltas %q, output %+v", got, out)
			}
			if strings.Contains(fmt.Sprintf("%v %+v %s", err, *f, r.logs.String()), "secretly") {
				t.Fatal("the reasoning reached the failure or the logs")
			}
		})
	}
}

// wire writes one protocol's stream frames: the OpenAI-compatible chunks
// (openai, azure, gemini) or Anthropic's events. reasoningKey is the delta
// field the OpenAI-compatible chunks carry reasoning in ("" =
// reasoning_content).
type wire struct {
	anthropic    bool
	reasoningKey string
}

func wireOf(k kind) wire { return wire{anthropic: k.api == APIAnthropic} }

// reasoningWires are the ways k's protocol streams reasoning: DeepSeek's
// reasoning_content and OpenRouter's (and Ollama's) reasoning for the
// OpenAI-compatible ones, thinking deltas for Anthropic.
func reasoningWires(k kind) []wire {
	if k.api == APIAnthropic {
		return []wire{{anthropic: true}}
	}
	return []wire{{reasoningKey: "reasoning_content"}, {reasoningKey: "reasoning"}}
}

func (w wire) name() string {
	if w.anthropic {
		return "thinking"
	}
	return w.reasoningKey
}

func (w wire) data(v any) string {
	b, _ := json.Marshal(v)
	return "data: " + string(b) + "\n\n"
}

func (w wire) event(typ string, v map[string]any) string {
	v["type"] = typ
	return "event: " + typ + "\n" + w.data(v)
}

func (w wire) start() string {
	if !w.anthropic {
		return w.data(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]string{"role": "assistant"}}}})
	}
	return w.event("message_start", map[string]any{"message": map[string]any{"usage": map[string]int{"input_tokens": 5, "output_tokens": 1}}}) +
		w.event("content_block_start", map[string]any{"index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
}

func (w wire) text(s string) string {
	if !w.anthropic {
		return w.data(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]string{"content": s}}}})
	}
	return w.event("content_block_delta", map[string]any{"index": 0, "delta": map[string]string{"type": "text_delta", "text": s}})
}

func (w wire) reasoning(s string) string {
	if !w.anthropic {
		key := cmp.Or(w.reasoningKey, "reasoning_content")
		return w.data(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": "", key: s}}}})
	}
	return w.event("content_block_delta", map[string]any{"index": 0, "delta": map[string]string{"type": "thinking_delta", "thinking": s}})
}

// comment is a keep-alive the protocol's own way (both take SSE comments).
func (w wire) comment() string { return ": keep-alive\n\n" }

func (w wire) stop() string {
	if !w.anthropic {
		return w.data(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]string{}, "finish_reason": "stop"}}}) +
			w.data(map[string]any{"choices": []any{}, "usage": map[string]int{"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}) +
			"data: [DONE]\n\n"
	}
	return w.event("content_block_stop", map[string]any{"index": 0}) +
		w.event("message_delta", map[string]any{"delta": map[string]string{"stop_reason": "end_turn"}, "usage": map[string]int{"output_tokens": 7}}) +
		w.event("message_stop", map[string]any{})
}

// frame is one write of a scripted stream, after a pause.
type frame struct {
	gap  time.Duration
	data string
}

// scripted serves a stream of frames to every request; with hold it then
// stays open until the client leaves. The client of kind k points at it.
func scripted(t *testing.T, k kind, idle time.Duration, hold bool, frames ...frame) *rig {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		for _, f := range frames {
			if f.gap > 0 {
				select {
				case <-time.After(f.gap):
				case <-req.Context().Done():
					return
				}
			}
			if _, err := fmt.Fprint(w, f.data); err != nil {
				return
			}
			_ = rc.Flush()
		}
		if hold {
			<-req.Context().Done()
		}
	}))
	cfg := k.config(fakeprovider.New(), canary)
	cfg.BaseURL = srv.URL + "/x"
	return clientRig(t, &rig{}, cfg, idle, srv.Close)
}

// every repeats f n times.
func every(n int, f frame) []frame {
	out := make([]frame, n)
	for i := range out {
		out[i] = f
	}
	return out
}

// covers E4, R13, R8: an answer of whitespace alone is empty output, not
// progress, and none of it is shown.
func TestKinds_E4_WhitespaceIsEmptyOutput(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			w := wireOf(k)
			r := scripted(t, k, 3*time.Second, false, frame{data: w.start() + w.text("\n\n") + w.text("  ") + w.text("\t \n") + w.stop()})
			var deltas deltaLog
			out, err := r.client.Chat(context.Background(), userReq("gpt-test", "hi"), deltas.add)
			f := asFailure(t, err)
			if f.Reason != classify.ReasonEmptyResponse || !errors.Is(r.lastResponse(t).Err, classify.ErrEmptyOutput) {
				t.Fatalf("failure %+v", f)
			}
			if got := deltas.all(); len(got) != 0 || out.Progress || out.FinishReason != "stop" || out.OutputTokens != 7 {
				t.Fatalf("deltas %q output %+v", got, out)
			}
		})
	}
}

// covers E4, L2: whitespace ahead of the first visible text is shown with
// that text, and everything after it as it comes, so the pieces shown are
// still the answer.
func TestKinds_E4_LeadingWhitespaceShownWithText(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			w := wireOf(k)
			r := scripted(t, k, 3*time.Second, false, frame{data: w.start() + w.text("\n\n") + w.text("Hello") + w.text(" ") + w.text("world") + w.text("\n") + w.stop()})
			var deltas deltaLog
			out, err := r.client.Chat(context.Background(), userReq("gpt-test", "hi"), deltas.add)
			want := []string{"\n\nHello", " ", "world", "\n"}
			if err != nil || out.Text != "\n\nHello world\n" || !out.Progress || fmt.Sprint(deltas.all()) != fmt.Sprint(want) {
				t.Fatalf("out %+v err %v deltas %q, want %q", out, err, deltas.all(), want)
			}
		})
	}
}

// covers E5: reasoning keeps a stream from being idle (it is the model at
// work) although it is never shown: reasoning for longer than the idle
// timeout, each piece within it, and then the answer, which alone is shown.
func TestKinds_E5_ReasoningKeepsTheStreamAlive(t *testing.T) {
	const idle, gap = time.Second, 250 * time.Millisecond
	for _, k := range kinds {
		for _, w := range reasoningWires(k) {
			t.Run(string(k.api)+"/"+w.name(), func(t *testing.T) {
				t.Parallel()
				frames := []frame{{data: w.start()}}
				frames = append(frames, every(6, frame{gap: gap, data: w.reasoning("hmm ")})...)
				frames = append(frames, frame{gap: gap, data: w.text("The answer.") + w.stop()})
				r := scripted(t, k, idle, false, frames...)
				var deltas deltaLog
				out, err := r.client.Chat(context.Background(), userReq("gpt-test", "hi"), deltas.add)
				if err != nil || out.Text != "The answer." || strings.Join(deltas.all(), "") != "The answer." || !out.Progress {
					t.Fatalf("out %+v err %v deltas %q", out, err, deltas.all())
				}
			})
		}
	}
}

// covers E5, R13: reasoning alone is empty output whichever field carries
// it, and none of it is shown or returned.
func TestKinds_E5_ReasoningOnlyInEverySpelling(t *testing.T) {
	for _, k := range kinds {
		for _, w := range reasoningWires(k) {
			t.Run(string(k.api)+"/"+w.name(), func(t *testing.T) {
				r := scripted(t, k, 3*time.Second, false, frame{data: w.start() + w.reasoning("private ") + w.reasoning("musing") + w.stop()})
				var deltas deltaLog
				out, err := r.client.Chat(context.Background(), userReq("gpt-test", "hi"), deltas.add)
				f := asFailure(t, err)
				if f.Reason != classify.ReasonEmptyResponse || len(deltas.all()) != 0 || out.Text != "" || out.Progress {
					t.Fatalf("failure %+v out %+v deltas %q", f, out, deltas.all())
				}
			})
		}
	}
}

// covers E4: go-openai stops reading a stream after 300 lines in a row that
// are not data (comments, blank lines) with ErrTooManyEmptyStreamMessages;
// the client lifts that limit, so many keep-alive comments ahead of an
// answer are read through, and a stream of comments alone, however fast,
// ends as an idle timeout rather than an unclassified failure. Anthropic's
// reader skips comments as well.
func TestKinds_E4_ManyCommentsAreKeepAlives(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			w := wireOf(k)
			r := scripted(t, k, 3*time.Second, false,
				frame{data: w.start() + strings.Repeat(w.comment(), 400) + w.text("late answer") + w.stop()})
			out, err := r.client.Chat(context.Background(), userReq("gpt-test", "hi"), nil)
			if err != nil || out.Text != "late answer" {
				t.Fatalf("out %+v err %v", out, err)
			}

			const idle = 300 * time.Millisecond
			r = scripted(t, k, idle, true, append([]frame{{data: w.start()}}, every(2000, frame{gap: time.Millisecond, data: w.comment()})...)...)
			t0 := time.Now()
			_, err = r.client.Chat(context.Background(), userReq("gpt-test", "hi"), nil)
			f := asFailure(t, err)
			if !f.Idle || f.Reason != classify.ReasonTimeout || time.Since(t0) > 3*time.Second {
				t.Fatalf("failure %+v after %v, fed %+v", f, time.Since(t0), r.lastResponse(t))
			}
		})
	}
}

// readChunk and readEvent decide what kicks the watchdog (E4) and what is
// answer text (E5); each case is one chunk or event.
func TestReadChunk_E4_E5_Activity(t *testing.T) {
	stop := openai.FinishReasonStop
	cases := []struct {
		name   string
		delta  openai.ChatCompletionStreamChoiceDelta
		finish openai.FinishReason
		active bool
		text   string
	}{
		{name: "empty delta"},
		{name: "role only", delta: openai.ChatCompletionStreamChoiceDelta{Role: "assistant"}},
		{name: "whitespace", delta: openai.ChatCompletionStreamChoiceDelta{Content: " \n\t"}, text: " \n\t"},
		{name: "text", delta: openai.ChatCompletionStreamChoiceDelta{Content: "hi"}, active: true, text: "hi"},
		{name: "reasoning", delta: openai.ChatCompletionStreamChoiceDelta{ReasoningContent: "let me see"}, active: true},
		{name: "whitespace reasoning", delta: openai.ChatCompletionStreamChoiceDelta{ReasoningContent: "\n"}},
		{name: "refusal", delta: openai.ChatCompletionStreamChoiceDelta{Refusal: "I can't"}, active: true},
		{name: "tool call", delta: openai.ChatCompletionStreamChoiceDelta{ToolCalls: []openai.ToolCall{{ID: "c1"}}}, active: true},
		{name: "stop", finish: stop, active: true},
		{name: "null stop", finish: openai.FinishReasonNull},
	}
	for _, tc := range cases {
		c := &Client{cfg: Config{MaxAnswerBytes: 100}}
		k := &call{c: c}
		var shown []string
		k.onDelta = func(s string) { shown = append(shown, s) }
		ck := openai.ChatCompletionStreamResponse{Choices: []openai.ChatCompletionStreamChoice{{Delta: tc.delta, FinishReason: tc.finish}}}
		active, ok := k.readChunk(&ck)
		if !ok || active != tc.active || k.text.String() != tc.text || k.visible != (strings.TrimSpace(tc.text) != "") {
			t.Errorf("%s: active %v ok %v text %q visible %v", tc.name, active, ok, k.text.String(), k.visible)
		}
		if want := strings.TrimSpace(tc.text) != ""; want != (len(shown) == 1) {
			t.Errorf("%s: shown %q", tc.name, shown)
		}
	}
}

func TestReadEvent_E4_E5_Activity(t *testing.T) {
	cases := []struct {
		typ, data string
		active    bool
		text      string
	}{
		{"ping", `{"type":"ping"}`, false, ""},
		{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":3}}}`, false, ""},
		{"content_block_start", `{"type":"content_block_start","content_block":{"type":"text","text":""}}`, false, ""},
		{"content_block_start", `{"type":"content_block_start","content_block":{"type":"thinking","thinking":""}}`, false, ""},
		{"content_block_start", `{"type":"content_block_start","content_block":{"type":"redacted_thinking","data":"xyz"}}`, true, ""},
		{"content_block_start", `{"type":"content_block_start","content_block":{"type":"tool_use","id":"t1","name":"f"}}`, true, ""},
		{"content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"  "}}`, false, "  "},
		{"content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"}}`, true, "Hi"},
		{"content_block_delta", `{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"so..."}}`, true, ""},
		{"content_block_delta", `{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"\n"}}`, false, ""},
		{"content_block_delta", `{"type":"content_block_delta","delta":{"type":"signature_delta","signature":"abc"}}`, false, ""},
		{"content_block_delta", `{"type":"content_block_delta","delta":{"type":"input_json_delta","partial_json":"{"}}`, true, ""},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`, false, ""},
		{"message_delta", `{"type":"message_delta","delta":{},"usage":{"output_tokens":9}}`, false, ""},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`, true, ""},
	}
	for _, tc := range cases {
		var ev anthropicEvent
		if err := json.Unmarshal([]byte(tc.data), &ev); err != nil {
			t.Fatal(err)
		}
		k := &call{}
		text, active := k.readEvent(tc.typ, &ev)
		if text != tc.text || active != tc.active {
			t.Errorf("%s %s: text %q active %v, want %q %v", tc.typ, tc.data, text, active, tc.text, tc.active)
		}
	}
}

// covers E4, R8: Progress is visible text or a completed tool call; an
// answer of whitespace is empty output, not progress.
func TestFinish_E4_WhitespaceIsNoProgress(t *testing.T) {
	c, err := New(Config{Provider: "p", BaseURL: "http://127.0.0.1:1/v1", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		deltas   []string
		progress bool
	}{
		{[]string{" ", "\n"}, false},
		{nil, false},
		{[]string{"\n", "ok"}, true},
	} {
		k := c.begin(context.Background(), "m")
		for _, d := range tc.deltas {
			k.add(d)
		}
		k.stop = "stop"
		out, err := k.finish()
		k.done()
		if out.Progress != tc.progress || (err == nil) != tc.progress {
			t.Errorf("%q: progress %v err %v", tc.deltas, out.Progress, err)
		}
		var f *failover.Failure
		if !tc.progress && (!errors.As(err, &f) || f.Reason != classify.ReasonEmptyResponse) {
			t.Errorf("%q: failure %v, want empty_response", tc.deltas, err)
		}
	}
}
