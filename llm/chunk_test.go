package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/detourbot/detour/internal/fakeprovider"
)

// oracleView decodes raw the way ChatCompletionStream.Recv does and returns
// the view the client would have used before the fast path existed.
func oracleView(raw []byte) (chunkView, error) {
	var r openai.ChatCompletionStreamResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return chunkView{}, err
	}
	var d chunkDecoder
	d.fromOpenAI(&r)
	return d.view, nil
}

func viewString(v chunkView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage=%v/%d/%d", v.hasUsage, v.promptTokens, v.completionTokens)
	for _, c := range v.choices {
		fmt.Fprintf(&b, " [%q tools=%v finish=%q]", c.content, c.tools, c.finish)
	}
	return b.String()
}

// warmChunk leaves escaped text in the decoder's scratch buffer and choices,
// so a stale-state bug in the next decode shows.
const warmChunk = `{"choices":[{"index":0,"delta":{"content":"st\u00e4le \ud83d\ude00"},"finish_reason":"length"},{"delta":{"content":"x"}}],"usage":{"prompt_tokens":7,"completion_tokens":9,"total_tokens":16}}`

// checkAgainstOracle asserts the fast path agrees with encoding/json whenever
// it answers, and that decode as a whole always agrees.
func checkAgainstOracle(t *testing.T, raw []byte) (fast bool) {
	t.Helper()
	want, werr := oracleView(raw)

	var d chunkDecoder
	if _, err := d.decode([]byte(warmChunk)); err != nil {
		t.Fatalf("warm chunk: %v", err)
	}
	d.reset()
	p := chunkParser{b: raw, d: &d}
	if p.chunk() {
		fast = true
		if werr != nil {
			t.Fatalf("fast path accepted %q, encoding/json refuses it: %v", raw, werr)
		}
		if got := viewString(d.view); got != viewString(want) {
			t.Fatalf("fast path on %q:\n got %s\nwant %s", raw, got, viewString(want))
		}
	}

	got, err := d.decode(raw)
	switch {
	case (err != nil) != (werr != nil):
		t.Fatalf("decode(%q) error %v, encoding/json error %v", raw, err, werr)
	case err != nil && err.Error() != werr.Error():
		t.Fatalf("decode(%q) error %q, want go-openai's %q", raw, err, werr)
	case err == nil && viewString(*got) != viewString(want):
		t.Fatalf("decode(%q):\n got %s\nwant %s", raw, viewString(*got), viewString(want))
	}
	return fast
}

func TestDecodeChunk(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		fast bool   // the fast path must take it
		want string // viewString of the result; "" = compare with the oracle only
	}{
		{name: "fakeprovider role chunk", fast: true,
			raw:  `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			want: `usage=false/0/0 ["" tools=false finish=""]`},
		{name: "fakeprovider word chunk", fast: true,
			raw:  `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"word "},"finish_reason":null}]}`,
			want: `usage=false/0/0 ["word " tools=false finish=""]`},
		{name: "finish chunk", fast: true,
			raw:  `{"id":"c","choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}]}`,
			want: `usage=false/0/0 ["" tools=false finish="stop"]`},
		{name: "usage chunk", fast: true,
			raw:  `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":200,"total_tokens":212}}`,
			want: `usage=true/12/200`},
		{name: "openai extras", fast: true,
			raw:  `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","service_tier":"default","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Hi","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"aB3"}`,
			want: `usage=false/0/0 ["Hi" tools=false finish=""]`},
		{name: "whitespace everywhere", fast: true,
			raw:  " { \"choices\" :\t[ {\r\n\"delta\" : { \"content\" : \"a b\" } , \"finish_reason\" : \"stop\" } ] } ",
			want: `usage=false/0/0 ["a b" tools=false finish="stop"]`},
		{name: "escapes", fast: true,
			raw:  `{"choices":[{"delta":{"content":"q\"\\\/\b\f\n\r\t\u0041\u00e9\u4e2d"}}]}`,
			want: `usage=false/0/0 ["q\"\\/\b\f\n\r\tAé中" tools=false finish=""]`},
		{name: "surrogate pair", fast: true,
			raw:  `{"choices":[{"delta":{"content":"\ud83d\ude00!"}}]}`,
			want: `usage=false/0/0 ["😀!" tools=false finish=""]`},
		{name: "raw utf8", fast: true,
			raw:  `{"choices":[{"delta":{"content":"héllo 中文 😀"}}]}`,
			want: `usage=false/0/0 ["héllo 中文 😀" tools=false finish=""]`},
		{name: "empty tool_calls", fast: true,
			raw:  `{"choices":[{"delta":{"content":"x","tool_calls":[]}}]}`,
			want: `usage=false/0/0 ["x" tools=false finish=""]`},
		{name: "two choices", fast: true,
			raw:  `{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"},"finish_reason":"stop"}]}`,
			want: `usage=false/0/0 ["a" tools=false finish=""] ["b" tools=false finish="stop"]`},
		{name: "finish_reason string null", fast: true,
			raw:  `{"choices":[{"delta":{},"finish_reason":"null"}]}`,
			want: `usage=false/0/0 ["" tools=false finish="null"]`},

		// Left to encoding/json, with go-openai's result.
		{name: "tool call", raw: `{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`,
			want: `usage=false/0/0 ["" tools=true finish=""]`},
		{name: "function call", raw: `{"choices":[{"delta":{"function_call":{"name":"f","arguments":""}}}]}`,
			want: `usage=false/0/0 ["" tools=true finish=""]`},
		{name: "lone high surrogate", raw: `{"choices":[{"delta":{"content":"a\ud83dz"}}]}`,
			want: `usage=false/0/0 ["a�z" tools=false finish=""]`},
		{name: "lone low surrogate", raw: `{"choices":[{"delta":{"content":"\ude00"}}]}`,
			want: `usage=false/0/0 ["�" tools=false finish=""]`},
		{name: "invalid utf8", raw: "{\"choices\":[{\"delta\":{\"content\":\"a\xffb\"}}]}",
			want: `usage=false/0/0 ["a�b" tools=false finish=""]`},
		{name: "case-folded key", raw: `{"Choices":[{"Delta":{"Content":"hi"}}]}`,
			want: `usage=false/0/0 ["hi" tools=false finish=""]`},
		{name: "duplicate key", raw: `{"choices":[{"delta":{"content":"a","content":"b"}}]}`,
			want: `usage=false/0/0 ["b" tools=false finish=""]`},
		{name: "escaped key", raw: `{"\u0063hoices":[{"delta":{"content":"k"}}]}`,
			want: `usage=false/0/0 ["k" tools=false finish=""]`},
		{name: "usage details", raw: `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":0}}}`,
			want: `usage=true/3/4`},
		{name: "error field in chunk (ignored as before)", raw: `{"id":"c","error":{"message":"boom","code":502},"choices":[{"delta":{"content":""},"finish_reason":"error"}]}`,
			want: `usage=false/0/0 ["" tools=false finish="error"]`},
		{name: "azure content filter", raw: `{"choices":[{"delta":{"content":"a"},"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}],"prompt_filter_results":[{"prompt_index":0}]}`,
			want: `usage=false/0/0 ["a" tools=false finish=""]`},
		{name: "null choice", raw: `{"choices":[null]}`},
		{name: "float index", raw: `{"choices":[{"index":1.0,"delta":{"content":"a"}}]}`},
		{name: "huge created", raw: `{"created":123456789012345678901,"choices":[]}`},
		{name: "string created", raw: `{"created":"now","choices":[]}`},
		{name: "trailing garbage", raw: `{"choices":[]} x`},
		{name: "truncated", raw: `{"choices":[{"delta":{"content":"a`},
		{name: "empty", raw: ``},
		{name: "null", raw: `null`},
		{name: "bad escape", raw: `{"choices":[{"delta":{"content":"\x"}}]}`},
		{name: "control char", raw: "{\"choices\":[{\"delta\":{\"content\":\"a\x01\"}}]}"},
		{name: "leading zero", raw: `{"created":01,"choices":[]}`},
		{name: "unknown number", raw: `{"x":-1.5e+3,"choices":[]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fast := checkAgainstOracle(t, []byte(tc.raw))
			if tc.fast && !fast {
				t.Errorf("fast path refused %s", tc.raw)
			}
			if tc.want == "" {
				return
			}
			var d chunkDecoder
			v, err := d.decode([]byte(tc.raw))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if got := viewString(*v); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// FuzzDecodeChunk holds the fast path to encoding/json: the same result or a
// fallback, never a panic or a wrong text. Seeds: testdata/fuzz/FuzzDecodeChunk.
func FuzzDecodeChunk(f *testing.F) {
	f.Add([]byte(warmChunk))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkAgainstOracle(t, raw)
	})
}

// TestChat_FastPathOnFakeStream checks that every chunk fakeprovider streams takes
// the fast path (otherwise the benchmark measures the fallback).
func TestChat_FastPathOnFakeStream(t *testing.T) {
	r := newRig(t, 5*time.Second, fakeprovider.Rule{Reply: "tiny reply"})
	var raws [][]byte
	r.client.onChunk = func(raw []byte) { raws = append(raws, bytes.Clone(raw)) }
	if _, err := r.client.Chat(context.Background(), userReq("gpt-4o", "hi"), nil); err != nil {
		t.Fatal(err)
	}
	if len(raws) < 4 {
		t.Fatalf("saw %d chunks", len(raws))
	}
	for _, raw := range raws {
		if !checkAgainstOracle(t, raw) {
			t.Errorf("fast path refused a fakeprovider chunk: %s", raw)
		}
	}
}

// TestChat_DeltasStayValid: the strings given to onDelta share the text
// builder's memory; they must keep their value after the builder grows.
func TestChat_DeltasStayValid(t *testing.T) {
	var words []string
	for i := range 300 {
		words = append(words, fmt.Sprintf("w%03d", i))
	}
	reply := strings.Join(words, " ")
	r := newRig(t, 5*time.Second, fakeprovider.Rule{Reply: reply})
	var deltas []string
	out, err := r.client.Chat(context.Background(), userReq("gpt-4o", "hi"), func(s string) { deltas = append(deltas, s) })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(deltas, ""); got != out.Text {
		t.Fatalf("deltas joined = %q, text = %q", got, out.Text)
	}
	if len(deltas) != len(words) {
		t.Fatalf("%d deltas, want %d", len(deltas), len(words))
	}
	for i, d := range deltas {
		if strings.TrimSpace(d) != words[i] {
			t.Fatalf("delta %d = %q, want %q", i, d, words[i])
		}
	}
}
