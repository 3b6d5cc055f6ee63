package llm

import (
	"encoding/json"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// chunkView is the part of one stream event (one SSE data payload) that the
// client uses. It is only valid until the next decode.
type chunkView struct {
	hasUsage         bool
	promptTokens     int
	completionTokens int
	choices          []choiceView
}

// choiceView is what the client uses of one choice of a chunk.
type choiceView struct {
	content []byte // delta.content, decoded
	tools   bool   // delta.tool_calls non-empty or delta.function_call present
	finish  string // finish_reason as sent ("" for null or absent)
}

// chunkDecoder turns the raw payloads of go-openai's RecvRaw into chunkViews.
//
// The fast path is a strict parser for the shapes providers actually stream
// (id/object/created/model/choices[index, delta{role, content}, finish_reason]
// /usage and scalar extras). It gives up on anything it does not model exactly
// (tool calls, logprobs, non-ASCII or escaped keys, keys that match a known
// field only case-insensitively, lone surrogates, invalid UTF-8, duplicate
// keys, non-integer numbers, ...) and the payload is then decoded with
// encoding/json into openai.ChatCompletionStreamResponse, exactly as
// ChatCompletionStream.Recv does, so results and errors stay what go-openai
// gives. FuzzDecodeChunk holds the fast path to that oracle.
type chunkDecoder struct {
	view    chunkView
	scratch []byte // unescaped strings of the current chunk
	fast    int    // payloads decoded by the fast path (tests)
	slow    int    // payloads decoded by encoding/json (tests)
}

// decode decodes one payload. The error is encoding/json's, as Recv returns it.
func (d *chunkDecoder) decode(raw []byte) (*chunkView, error) {
	d.reset()
	p := chunkParser{b: raw, d: d}
	if p.chunk() {
		d.fast++
		return &d.view, nil
	}
	d.reset()
	d.slow++
	var resp openai.ChatCompletionStreamResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, err
	}
	d.fromOpenAI(&resp)
	return &d.view, nil
}

func (d *chunkDecoder) reset() {
	d.view.hasUsage, d.view.promptTokens, d.view.completionTokens = false, 0, 0
	d.view.choices = d.view.choices[:0]
	d.scratch = d.scratch[:0]
}

// fromOpenAI fills the view from go-openai's own decoding.
func (d *chunkDecoder) fromOpenAI(r *openai.ChatCompletionStreamResponse) {
	if r.Usage != nil {
		d.view.hasUsage = true
		d.view.promptTokens, d.view.completionTokens = r.Usage.PromptTokens, r.Usage.CompletionTokens
	}
	for _, ch := range r.Choices {
		var content []byte
		if ch.Delta.Content != "" {
			content = []byte(ch.Delta.Content)
		}
		d.view.choices = append(d.view.choices, choiceView{
			content: content,
			tools:   len(ch.Delta.ToolCalls) > 0 || ch.Delta.FunctionCall != nil,
			finish:  string(ch.FinishReason),
		})
	}
}

// Field names of the go-openai structs per level, lower-cased and without
// '_' or '-': a key that folds to one of these but is not spelled exactly as
// the fast path expects goes to encoding/json, which matches names
// case-insensitively.
var (
	topNames    = []string{"id", "object", "created", "model", "choices", "systemfingerprint", "promptannotations", "promptfilterresults", "usage"}
	choiceNames = []string{"index", "delta", "logprobs", "finishreason", "contentfilterresults"}
	deltaNames  = []string{"content", "role", "functioncall", "toolcalls", "refusal", "reasoningcontent"}
	usageNames  = []string{"prompttokens", "completiontokens", "totaltokens", "prompttokensdetails", "completiontokensdetails"}
)

// foldsTo reports whether key, ignoring ASCII case, '_' and '-', equals one of names.
func foldsTo(key []byte, names []string) bool {
	for _, n := range names {
		i, j := 0, 0
		for {
			for i < len(key) && (key[i] == '_' || key[i] == '-') {
				i++
			}
			if i == len(key) || j == len(n) {
				break
			}
			c := key[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != n[j] {
				break
			}
			i, j = i+1, j+1
		}
		if i == len(key) && j == len(n) {
			return true
		}
	}
	return false
}

// chunkParser is the fast path. Every method returns false to mean "not
// handled here": the caller falls back to encoding/json.
type chunkParser struct {
	b []byte
	i int
	d *chunkDecoder
}

func (p *chunkParser) ws() {
	b, i := p.b, p.i
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	p.i = i
}

// next skips whitespace and consumes c if it is next.
func (p *chunkParser) next(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// word consumes a literal such as null.
func (p *chunkParser) word(w string) bool {
	p.ws()
	if len(p.b)-p.i >= len(w) && string(p.b[p.i:p.i+len(w)]) == w {
		p.i += len(w)
		return true
	}
	return false
}

// object parses {"k": v, ...}, calling field with each key (ASCII, no
// escapes; the value follows). names are the go-openai field names of this
// level; known has one bit per key the caller handles, to refuse duplicates.
func (p *chunkParser) object(names []string, field func(key []byte) (bit uint16, ok bool)) bool {
	if !p.next('{') {
		return false
	}
	if p.next('}') {
		return true
	}
	var seen uint16
	for {
		key, ok := p.key()
		if !ok || !p.next(':') {
			return false
		}
		bit, ok := field(key)
		if !ok {
			return false
		}
		if bit == 0 {
			// Not a field the caller knows. encoding/json would still match
			// it case-insensitively to a struct field: leave that to it.
			if foldsTo(key, names) || !p.skipScalar() {
				return false
			}
		} else {
			if seen&bit != 0 {
				return false
			}
			seen |= bit
		}
		if p.next(',') {
			continue
		}
		return p.next('}')
	}
}

// key reads an object key made of printable ASCII without escapes.
func (p *chunkParser) key() ([]byte, bool) {
	if !p.next('"') {
		return nil, false
	}
	b, start := p.b, p.i
	for i := start; i < len(b); i++ {
		c := b[i]
		if c == '"' {
			p.i = i + 1
			return b[start:i], true
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			return nil, false
		}
	}
	return nil, false
}

// str reads a JSON string. If keep, it returns the decoded bytes (a slice of
// the input when there are no escapes, else of d.scratch) and refuses what
// encoding/json would repair (invalid UTF-8, lone surrogates); otherwise it
// only checks the syntax.
func (p *chunkParser) str(keep bool) ([]byte, bool) {
	if !p.next('"') {
		return nil, false
	}
	b, start := p.b, p.i
	nonASCII := false
	for i := start; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			p.i = i + 1
			s := b[start:i]
			if keep && nonASCII && !utf8.Valid(s) {
				return nil, false
			}
			return s, true
		case c == '\\':
			p.i = i
			return p.escaped(start, keep)
		case c < 0x20:
			return nil, false
		case c >= 0x80:
			nonASCII = true
		}
	}
	return nil, false
}

// escaped continues str at the first backslash, unescaping into d.scratch.
func (p *chunkParser) escaped(start int, keep bool) ([]byte, bool) {
	d := p.d
	from := len(d.scratch)
	if keep {
		d.scratch = append(d.scratch, p.b[start:p.i]...)
	}
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !keep {
				return nil, true
			}
			s := d.scratch[from:len(d.scratch):len(d.scratch)]
			if !utf8.Valid(s) {
				return nil, false
			}
			return s, true
		case c < 0x20:
			return nil, false
		case c != '\\':
			if keep {
				d.scratch = append(d.scratch, c)
			}
			p.i++
			continue
		}
		// backslash
		if p.i+1 >= len(p.b) {
			return nil, false
		}
		e := p.b[p.i+1]
		p.i += 2
		var out byte
		switch e {
		case '"', '\\', '/':
			out = e
		case 'b':
			out = '\b'
		case 'f':
			out = '\f'
		case 'n':
			out = '\n'
		case 'r':
			out = '\r'
		case 't':
			out = '\t'
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, false
			}
			if 0xD800 <= r && r < 0xE000 {
				// A surrogate: only a high one followed by an escaped low one
				// is handled here; encoding/json replaces the rest with U+FFFD.
				if !keep {
					continue
				}
				if r >= 0xDC00 || p.i+1 >= len(p.b) || p.b[p.i] != '\\' || p.b[p.i+1] != 'u' {
					return nil, false
				}
				p.i += 2
				lo, ok := p.hex4()
				if !ok || lo < 0xDC00 || lo >= 0xE000 {
					return nil, false
				}
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
			}
			if keep {
				d.scratch = utf8.AppendRune(d.scratch, r)
			}
			continue
		default:
			return nil, false
		}
		if keep {
			d.scratch = append(d.scratch, out)
		}
	}
	return nil, false
}

func (p *chunkParser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.i += 4
	return r, true
}

// strOrNull reads a string or null (null leaves a Go string unchanged, so it
// reads as empty here).
func (p *chunkParser) strOrNull(keep bool) ([]byte, bool) {
	if p.word("null") {
		return nil, true
	}
	return p.str(keep)
}

// integer reads a JSON integer of at most 18 digits (so it fits int64 and,
// for digits <= 9, a 32-bit int). Fractions and exponents, which encoding/json
// refuses for integer fields, are left to it.
func (p *chunkParser) integer(digits int) (int64, bool) {
	p.ws()
	neg := false
	if p.i < len(p.b) && p.b[p.i] == '-' {
		neg = true
		p.i++
	}
	start := p.i
	var v int64
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		v = v*10 + int64(p.b[p.i]-'0')
		p.i++
	}
	n := p.i - start
	if n == 0 || n > digits || (n > 1 && p.b[start] == '0') {
		return 0, false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	return v, true
}

// intOrNull reads an int field; null leaves it unchanged (zero here).
func (p *chunkParser) intOrNull(digits int) (int64, bool) {
	if p.word("null") {
		return 0, true
	}
	return p.integer(digits)
}

// skipScalar skips a string, number, true, false or null after checking its
// syntax. Objects and arrays are not skipped (the caller falls back).
func (p *chunkParser) skipScalar() bool {
	p.ws()
	if p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, ok := p.str(false)
		return ok
	case c == 'n':
		return p.word("null")
	case c == 't':
		return p.word("true")
	case c == 'f':
		return p.word("false")
	case c == '-' || ('0' <= c && c <= '9'):
		return p.skipNumber()
	}
	return false
}

// skipNumber checks the JSON number grammar -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?.
func (p *chunkParser) skipNumber() bool {
	digits := func() int {
		s := p.i
		for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
			p.i++
		}
		return p.i - s
	}
	if p.b[p.i] == '-' {
		p.i++
	}
	start := p.i
	n := digits()
	if n == 0 || (n > 1 && p.b[start] == '0') {
		return false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// emptyArrayOrNull accepts null or [] (an empty slice: no tool calls).
func (p *chunkParser) emptyArrayOrNull() bool {
	if p.word("null") {
		return true
	}
	return p.next('[') && p.next(']')
}

// chunk parses a whole payload; false means fall back.
func (p *chunkParser) chunk() bool {
	ok := p.object(topNames, func(key []byte) (uint16, bool) {
		switch string(key) {
		case "id":
			_, ok := p.strOrNull(false)
			return 1 << 0, ok
		case "object":
			_, ok := p.strOrNull(false)
			return 1 << 1, ok
		case "created":
			_, ok := p.intOrNull(18)
			return 1 << 2, ok
		case "model":
			_, ok := p.strOrNull(false)
			return 1 << 3, ok
		case "system_fingerprint":
			_, ok := p.strOrNull(false)
			return 1 << 4, ok
		case "choices":
			return 1 << 5, p.choices()
		case "usage":
			return 1 << 6, p.usage()
		case "prompt_annotations":
			return 1 << 7, p.word("null")
		case "prompt_filter_results":
			return 1 << 8, p.word("null")
		}
		return 0, true
	})
	p.ws()
	return ok && p.i == len(p.b)
}

func (p *chunkParser) choices() bool {
	if p.word("null") {
		return true
	}
	if !p.next('[') {
		return false
	}
	if p.next(']') {
		return true
	}
	for {
		if !p.choice() {
			return false
		}
		if p.next(',') {
			continue
		}
		return p.next(']')
	}
}

func (p *chunkParser) choice() bool {
	var ch choiceView
	ok := p.object(choiceNames, func(key []byte) (uint16, bool) {
		switch string(key) {
		case "index":
			_, ok := p.intOrNull(9)
			return 1 << 0, ok
		case "delta":
			return 1 << 1, p.delta(&ch)
		case "logprobs":
			return 1 << 2, p.word("null")
		case "finish_reason":
			s, ok := p.strOrNull(true)
			ch.finish = string(s)
			return 1 << 3, ok
		case "content_filter_results":
			return 1 << 4, p.word("null")
		}
		return 0, true
	})
	if ok {
		p.d.view.choices = append(p.d.view.choices, ch)
	}
	return ok
}

func (p *chunkParser) delta(ch *choiceView) bool {
	if p.word("null") {
		return true
	}
	return p.object(deltaNames, func(key []byte) (uint16, bool) {
		switch string(key) {
		case "content":
			s, ok := p.strOrNull(true)
			ch.content = s
			return 1 << 0, ok
		case "role":
			_, ok := p.strOrNull(false)
			return 1 << 1, ok
		case "refusal":
			_, ok := p.strOrNull(false)
			return 1 << 2, ok
		case "reasoning_content":
			_, ok := p.strOrNull(false)
			return 1 << 3, ok
		case "function_call":
			return 1 << 4, p.word("null")
		case "tool_calls":
			return 1 << 5, p.emptyArrayOrNull()
		}
		return 0, true
	})
}

func (p *chunkParser) usage() bool {
	if p.word("null") {
		return true
	}
	v := &p.d.view
	v.hasUsage = true
	return p.object(usageNames, func(key []byte) (uint16, bool) {
		switch string(key) {
		case "prompt_tokens":
			n, ok := p.intOrNull(9)
			v.promptTokens = int(n)
			return 1 << 0, ok
		case "completion_tokens":
			n, ok := p.intOrNull(9)
			v.completionTokens = int(n)
			return 1 << 1, ok
		case "total_tokens":
			_, ok := p.intOrNull(9)
			return 1 << 2, ok
		case "prompt_tokens_details":
			return 1 << 3, p.word("null")
		case "completion_tokens_details":
			return 1 << 4, p.word("null")
		}
		return 0, true
	})
}
