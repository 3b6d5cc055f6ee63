package failover

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits that keep Classify linear and cheap on hostile or huge inputs.
const (
	maxJSONBody     = 1 << 20  // bodies larger than this are not JSON-decoded
	maxScanText     = 64 << 10 // at most this much text is matched against phrases
	maxWalkStrings  = 96       // strings collected from one JSON document
	maxWalkDepth    = 12       // JSON nesting walked
	maxRawDepth     = 2        // nested metadata.raw documents decoded
	maxPreviewRunes = 200      // Failure.Message length
)

// evidence is what the rules look at: one lower-cased haystack plus the few
// structured fields that matter.
type evidence struct {
	text      string // lower-cased, URLs removed; body strings + error text
	mask      uint64 // phraseTable lists found in text
	message   string // primary provider message (original case), for the preview
	code      string // provider code or type
	codes     []string
	embStatus int  // a status number found inside the body (JSON code, "HTTP 429", ...)
	hasRaw    bool // OpenRouter metadata.raw was present
	isHTML    bool
	hasBody   bool              // the body held something non-blank
	hdrs      map[string]string // header-like fields found in the body (lower-case keys)
}

// bodyInfo is the decoded body before lower-casing.
type bodyInfo struct {
	strs      []string // every informative string value
	message   string
	code      string
	codes     []string
	embStatus int
	hasRaw    bool
	isHTML    bool
	hdrs      map[string]string // header-like fields found in the body (lower-case keys)
}

var skipKeys = map[string]bool{
	"request_id": true, "requestid": true, "id": true, "user_id": true, "created_at": true,
	"created": true, "@type": true, "domain": true, "locale": true, "x-request-id": true,
	"trace_id": true, "traceid": true, "timestamp": true, "url": true, "help_url": true,
	"doc_url": true, "documentation_url": true, "links": true, "object": true,
}

// parseBody decodes a provider body: JSON (objects, arrays, OpenRouter metadata.raw),
// SSE event text, HTML pages, or plain text.
func parseBody(body string, depth int) bodyInfo {
	var bi bodyInfo
	trimmed := strings.TrimSpace(body)
	if trimmed == "" {
		return bi
	}
	if isSSE(trimmed) {
		parsed := false
		for _, line := range strings.Split(trimmed, "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "data:") {
				continue
			}
			payload := strings.TrimSpace(line[len("data:"):])
			if payload == "" || payload == "[DONE]" {
				continue
			}
			sub := parseBody(payload, depth)
			bi.merge(sub)
			parsed = true
			if len(bi.strs) >= maxWalkStrings {
				break
			}
		}
		if parsed {
			return bi
		}
	}
	if looksHTML(trimmed) {
		bi.isHTML = true
		title, text := htmlText(trimmed)
		if title != "" {
			bi.message = title
			bi.strs = append(bi.strs, title)
		}
		if text != "" {
			bi.strs = append(bi.strs, text)
			if bi.message == "" {
				bi.message = text
			}
		}
		return bi
	}
	if len(trimmed) <= maxJSONBody {
		if c := trimmed[0]; c == '{' || c == '[' {
			if v, ok := decodeJSON(trimmed); ok {
				bi.strs = make([]string, 0, 8)
				bi.fromJSON(v, depth)
				return bi
			}
		} else if i := strings.IndexAny(trimmed, "{["); i > 0 && i <= 256 {
			// "Error code: 401 - {...}", "400 {...}", "Unauthorized: {...}"
			if j := strings.LastIndexAny(trimmed, "}]"); j > i {
				if v, ok := decodeJSON(trimmed[i : j+1]); ok {
					prefix := strings.TrimSpace(trimmed[:i])
					bi.fromJSON(v, depth)
					bi.strs = append([]string{prefix}, bi.strs...)
					if bi.message == "" {
						bi.message = prefix
					}
					return bi
				}
			}
		}
	}
	text := trimmed
	if len(text) > maxScanText {
		text = text[:maxScanText]
	}
	bi.strs = append(bi.strs, text)
	bi.message = text
	return bi
}

func (bi *bodyInfo) merge(o bodyInfo) {
	bi.strs = append(bi.strs, o.strs...)
	if bi.message == "" {
		bi.message = o.message
	}
	if bi.code == "" {
		bi.code = o.code
	}
	bi.codes = append(bi.codes, o.codes...)
	if bi.embStatus == 0 {
		bi.embStatus = o.embStatus
	}
	bi.hasRaw = bi.hasRaw || o.hasRaw
	for k, v := range o.hdrs {
		if bi.hdrs == nil {
			bi.hdrs = map[string]string{}
		}
		if _, seen := bi.hdrs[k]; !seen {
			bi.hdrs[k] = v
		}
	}
}

func isSSE(s string) bool {
	return strings.HasPrefix(s, "data:") || strings.HasPrefix(s, "event:") ||
		strings.Contains(s, "\ndata:")
}

func looksHTML(s string) bool {
	if s[0] != '<' {
		return false
	}
	head := s
	if len(head) > 512 {
		head = head[:512]
	}
	head = strings.ToLower(head)
	return strings.Contains(head, "<html") || strings.Contains(head, "<!doctype") ||
		strings.Contains(head, "<head") || strings.Contains(head, "<body") ||
		strings.Contains(head, "<title")
}

// decodeJSON decodes s into the tree encoding/json builds (objects, []any,
// string, float64, bool, nil), except that objects are *jsonObject (members
// sorted by key) instead of map[string]any. A lean single-pass decoder handles
// the documents providers send; anything it is unsure about (odd escapes,
// invalid UTF-8, deep nesting, out-of-range numbers, invalid JSON) goes to
// encoding/json, so the content is always exactly encoding/json's.
func decodeJSON(s string) (any, bool) {
	if v, ok := leanDecode(s); ok {
		return v, true
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, false
	}
	return fromStdJSON(v), true
}

// jsonObject is a decoded JSON object: members sorted by key, keys unique (a
// repeated key keeps its last value, as in encoding/json). Cheaper to build and
// to walk in key order than a map for the few keys error bodies have.
type jsonObject struct {
	members []jsonMember
	inline  [4]jsonMember // backing for small objects: one allocation each
}

type jsonMember struct {
	key string
	val any
}

// get returns the value of key k, or nil.
func (o *jsonObject) get(k string) any {
	ms := o.members
	if len(ms) > 8 {
		i := sort.Search(len(ms), func(i int) bool { return ms[i].key >= k })
		if i < len(ms) && ms[i].key == k {
			return ms[i].val
		}
		return nil
	}
	for i := range ms {
		if ms[i].key == k {
			return ms[i].val
		}
	}
	return nil
}

// normalize sorts the members by key and keeps the last of repeated keys.
func (o *jsonObject) normalize() {
	ms := o.members
	sorted := true
	for i := 1; i < len(ms); i++ {
		if ms[i-1].key >= ms[i].key {
			sorted = false
			break
		}
	}
	if sorted {
		return
	}
	slices.SortStableFunc(ms, func(a, b jsonMember) int { return strings.Compare(a.key, b.key) })
	out := ms[:0]
	for i := range ms {
		if i+1 < len(ms) && ms[i+1].key == ms[i].key {
			continue // a later member has the same key
		}
		out = append(out, ms[i])
	}
	clear(ms[len(out):])
	o.members = out
}

// fromStdJSON turns encoding/json's maps into *jsonObject.
func fromStdJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		o := &jsonObject{}
		o.members = o.inline[:0]
		for k, e := range x {
			o.members = append(o.members, jsonMember{k, fromStdJSON(e)})
		}
		o.normalize()
		return o
	case []any:
		for i := range x {
			x[i] = fromStdJSON(x[i])
		}
	}
	return v
}

// leanDecode is the fast path of decodeJSON; ok is false when it declines.
func leanDecode(s string) (any, bool) {
	d := jsonDec{s: s}
	d.ws()
	v, ok := d.value(0)
	if !ok {
		return nil, false
	}
	d.ws()
	if d.i != len(s) {
		return nil, false
	}
	return v, true
}

// jsonDec is a small recursive-descent JSON decoder over a string. Strings
// without escapes are substrings of the input (no copy).
type jsonDec struct {
	s string
	i int
}

const leanMaxDepth = 256 // deeper documents go to encoding/json

func (d *jsonDec) ws() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *jsonDec) value(depth int) (any, bool) {
	if d.i >= len(d.s) || depth > leanMaxDepth {
		return nil, false
	}
	switch c := d.s[d.i]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		s, ok := d.str()
		if !ok {
			return nil, false
		}
		return s, true
	case c == 't':
		return true, d.lit("true")
	case c == 'f':
		return false, d.lit("false")
	case c == 'n':
		return nil, d.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	}
	return nil, false
}

func (d *jsonDec) lit(w string) bool {
	if strings.HasPrefix(d.s[d.i:], w) {
		d.i += len(w)
		return true
	}
	return false
}

func (d *jsonDec) object(depth int) (any, bool) {
	d.i++ // '{'
	m := &jsonObject{}
	m.members = m.inline[:0]
	d.ws()
	if d.i < len(d.s) && d.s[d.i] == '}' {
		d.i++
		return m, true
	}
	for {
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			return nil, false
		}
		k, ok := d.str()
		if !ok {
			return nil, false
		}
		d.ws()
		if d.i >= len(d.s) || d.s[d.i] != ':' {
			return nil, false
		}
		d.i++
		d.ws()
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		m.members = append(m.members, jsonMember{k, v})
		d.ws()
		if d.i >= len(d.s) {
			return nil, false
		}
		switch d.s[d.i] {
		case ',':
			d.i++
			d.ws()
		case '}':
			d.i++
			m.normalize()
			return m, true
		default:
			return nil, false
		}
	}
}

func (d *jsonDec) array(depth int) (any, bool) {
	d.i++ // '['
	a := make([]any, 0)
	d.ws()
	if d.i < len(d.s) && d.s[d.i] == ']' {
		d.i++
		return a, true
	}
	for {
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		d.ws()
		if d.i >= len(d.s) {
			return nil, false
		}
		switch d.s[d.i] {
		case ',':
			d.i++
			d.ws()
		case ']':
			d.i++
			return a, true
		default:
			return nil, false
		}
	}
}

// str reads a string literal at d.i (on the opening quote).
func (d *jsonDec) str() (string, bool) {
	start := d.i + 1
	ascii := true
	for j := start; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			d.i = j + 1
			out := d.s[start:j]
			if !ascii && !utf8.ValidString(out) {
				return "", false // encoding/json replaces invalid bytes; let it
			}
			return out, true
		case c == '\\':
			return d.strEscaped(start)
		case c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
	}
	return "", false
}

// strEscaped decodes a string with escapes; surrogates and invalid UTF-8 are
// declined (encoding/json has its own replacement rules for them).
func (d *jsonDec) strEscaped(start int) (string, bool) {
	var b strings.Builder
	b.Grow(len(d.s) - start)
	s := d.s
	for j := start; j < len(s); {
		c := s[j]
		switch {
		case c == '"':
			d.i = j + 1
			out := b.String()
			if !utf8.ValidString(out) {
				return "", false
			}
			return out, true
		case c < 0x20:
			return "", false
		case c != '\\':
			k := j + 1
			for k < len(s) && s[k] != '"' && s[k] != '\\' && s[k] >= 0x20 {
				k++
			}
			b.WriteString(s[j:k])
			j = k
			continue
		}
		if j+1 >= len(s) {
			return "", false
		}
		switch e := s[j+1]; e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			if j+6 > len(s) {
				return "", false
			}
			r, err := strconv.ParseUint(s[j+2:j+6], 16, 32)
			if err != nil || r >= 0xd800 && r < 0xe000 || s[j+2] == '+' {
				return "", false
			}
			b.WriteRune(rune(r))
			j += 6
			continue
		default:
			return "", false
		}
		j += 2
	}
	return "", false
}

// number reads a JSON number; values out of float64 range are declined.
func (d *jsonDec) number() (any, bool) {
	s, i := d.s, d.i
	start := i
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return nil, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			return nil, false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			return nil, false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	f, err := strconv.ParseFloat(s[start:i], 64)
	if err != nil {
		return nil, false
	}
	d.i = i
	return f, true
}

// fromJSON fills bi from a decoded document.
func (bi *bodyInfo) fromJSON(v any, depth int) {
	root := v
	if arr, ok := v.([]any); ok && len(arr) > 0 {
		root = arr[0]
	}
	if m, ok := root.(*jsonObject); ok {
		bi.structured(m, depth)
	}
	bi.walk(v, "", 0, depth)
}

// structured picks the message, code and embedded status from the common error
// envelopes: OpenAI {error:{message,type,code}}, Anthropic {type:error,error:{type,
// message}}, Google {error:{code,status,message}}, {error:"..."}, {message,code},
// MiniMax base_resp, FastAPI detail.
func (bi *bodyInfo) structured(m *jsonObject, depth int) {
	inner, _ := m.get("error").(*jsonObject)
	if inner == nil {
		if errs, ok := m.get("errors").([]any); ok && len(errs) > 0 {
			inner, _ = errs[0].(*jsonObject)
		}
	}
	if inner == nil {
		if br, ok := m.get("base_resp").(*jsonObject); ok {
			inner = &jsonObject{members: []jsonMember{{"code", br.get("status_code")}, {"message", br.get("status_msg")}}}
		}
	}
	msgKeys := []string{"message", "msg", "error_msg", "errorMessage", "error_message", "detail", "status_msg", "error_description", "title"}
	if inner != nil {
		bi.message = firstString(inner, msgKeys...)
		if meta, ok := inner.get("metadata").(*jsonObject); ok {
			if raw, ok := meta.get("raw").(string); ok && strings.TrimSpace(raw) != "" {
				bi.hasRaw = true
				if depth < maxRawDepth {
					sub := parseBody(raw, depth+1)
					bi.strs = append(bi.strs, sub.strs...)
					bi.codes = append(bi.codes, sub.codes...)
					if sub.message != "" {
						if bi.message != "" {
							bi.message += ": " + sub.message
						} else {
							bi.message = sub.message
						}
					}
				}
			}
		}
		bi.pickCode(inner)
	}
	if bi.message == "" {
		if s, ok := m.get("error").(string); ok {
			bi.message = s
		} else {
			bi.message = firstString(m, msgKeys...)
		}
		if bi.message == "" {
			if d, ok := m.get("detail").(*jsonObject); ok {
				bi.message = firstString(d, msgKeys...)
			}
		}
	}
	if bi.code == "" {
		bi.pickCode(m)
	}
	if bi.embStatus == 0 {
		for _, k := range []string{"status", "status_code", "raw_status_code", "code"} {
			if n := httpStatusValue(m.get(k)); n != 0 {
				bi.embStatus = n
				break
			}
		}
	}
}

// pickCode takes the most specific code of one error object.
func (bi *bodyInfo) pickCode(o *jsonObject) {
	var cands []string
	for _, k := range []string{"code", "type", "status", "error_code", "errorCode", "reason"} {
		if s := scalarString(o.get(k)); s != "" && s != "error" {
			cands = append(cands, s)
		}
	}
	for _, k := range []string{"code", "status", "status_code"} {
		if n := httpStatusValue(o.get(k)); n != 0 && bi.embStatus == 0 {
			bi.embStatus = n
		}
	}
	bi.codes = append(bi.codes, cands...)
	if bi.code != "" {
		return
	}
	// Prefer a non-HTTP-number code (rate_limit_exceeded, 1113) over "429".
	for _, c := range cands {
		if len(c) == 3 && c[0] >= '1' && c[0] <= '5' && isDigit(c[1]) && isDigit(c[2]) {
			continue
		}
		bi.code = c
		return
	}
	if len(cands) > 0 {
		bi.code = cands[0]
	}
}

func firstString(m *jsonObject, keys ...string) string {
	for _, k := range keys {
		if s, ok := m.get(k).(string); ok && strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x)
	case float64:
		return formatNumber(x)
	case bool:
		return ""
	}
	return ""
}

// httpStatusValue returns v as an HTTP error status (400..599), or 0.
func httpStatusValue(v any) int {
	var s string
	switch x := v.(type) {
	case float64:
		if x >= 400 && x <= 599 && x == math.Trunc(x) {
			return int(x)
		}
		return 0
	case string:
		s = strings.TrimSpace(x)
	default:
		return 0
	}
	// Only a decimal number (as strconv.Atoi reads it) can be a status; checking
	// first spares Atoi's error allocation on words.
	digits := s
	if digits != "" && digits[0] == '+' {
		digits = digits[1:]
	}
	if digits == "" {
		return 0
	}
	for i := 0; i < len(digits); i++ {
		if !isDigit(digits[i]) {
			return 0
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 400 || n > 599 {
		return 0
	}
	return n
}

// walk collects informative string values, in a stable order.
func (bi *bodyInfo) walk(v any, key string, level, depth int) {
	if level > maxWalkDepth || len(bi.strs) >= maxWalkStrings {
		return
	}
	switch x := v.(type) {
	case *jsonObject:
		for i := range x.members { // in key order
			k, xk := x.members[i].key, x.members[i].val
			lk := strings.ToLower(k)
			if skipKeys[lk] {
				continue
			}
			if lk == "raw" {
				continue // decoded by structured
			}
			if lk == "blockreason" || lk == "block_reason" {
				if s := scalarString(xk); s != "" {
					bi.strs = append(bi.strs, "blockreason "+s)
				}
				continue
			}
			if lk == "finishreason" || lk == "finish_reason" {
				switch strings.ToUpper(scalarString(xk)) {
				case "SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY", "RECITATION":
					bi.strs = append(bi.strs, "blockreason "+scalarString(xk))
					continue
				}
			}
			if strings.Contains(lk, "retry") || strings.Contains(lk, "reset") || strings.Contains(lk, "ratelimit") {
				// {"retryDelay":"34s"}, {"retry_after":30}, OpenRouter metadata.headers
				// {"X-RateLimit-Reset":"1741305600000"}: keep the key as context.
				if s := scalarString(xk); s != "" {
					bi.strs = append(bi.strs, lk+" "+s)
					if bi.hdrs == nil {
						bi.hdrs = map[string]string{}
					}
					if _, seen := bi.hdrs[lk]; !seen && len(bi.hdrs) < 16 {
						bi.hdrs[lk] = s
					}
					continue
				}
			}
			bi.walk(xk, lk, level+1, depth)
		}
	case []any:
		for _, e := range x {
			bi.walk(e, key, level+1, depth)
			if len(bi.strs) >= maxWalkStrings {
				return
			}
		}
	case string:
		if s := strings.TrimSpace(x); s != "" {
			if len(s) > 4096 {
				s = s[:4096]
			}
			bi.strs = append(bi.strs, s)
		}
	case float64:
		switch key {
		case "code", "status", "status_code", "error_code", "errorcode":
			bi.strs = append(bi.strs, formatNumber(x))
		}
	}
}

// htmlText returns an HTML page's <title> and its visible text (bounded).
func htmlText(s string) (title, text string) {
	if len(s) > maxScanText {
		s = s[:maxScanText]
	}
	low := strings.ToLower(s)
	if i := strings.Index(low, "<title"); i >= 0 {
		if j := strings.IndexByte(low[i:], '>'); j >= 0 {
			start := i + j + 1
			if k := strings.Index(low[start:], "</title"); k >= 0 {
				title = collapseSpace(s[start : start+k])
			}
		}
	}
	var b strings.Builder
	inTag := false
	skipUntil := ""
	for i := 0; i < len(s); i++ {
		if skipUntil != "" {
			if strings.HasPrefix(low[i:], skipUntil) {
				i += len(skipUntil) - 1
				skipUntil = ""
			}
			continue
		}
		c := s[i]
		if c == '<' {
			if strings.HasPrefix(low[i:], "<script") {
				skipUntil = "</script>"
				continue
			}
			if strings.HasPrefix(low[i:], "<style") {
				skipUntil = "</style>"
				continue
			}
			inTag = true
			b.WriteByte(' ')
			continue
		}
		if c == '>' && inTag {
			inTag = false
			continue
		}
		if !inTag {
			b.WriteByte(c)
		}
	}
	text = collapseSpace(b.String())
	return title, text
}

// collapseSpace turns every run of white space into one space and trims the ends.
func collapseSpace(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		switch spaceClass[s[i]] {
		case 0:
			continue
		case 1: // ' '
			if i != 0 && i != len(s)-1 && s[i+1] != ' ' {
				continue
			}
		}
		clean = false // other white space, or bytes that may start Unicode spaces
		break
	}
	if clean {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// spaceClass: 1 for ' ', 2 for bytes that make collapseSpace do real work.
var spaceClass = [256]uint8{' ': 1, '\t': 2, '\n': 2, '\r': 2, '\v': 2, '\f': 2, 0xc2: 2, 0xe2: 2, 0xe3: 2}

// stripURLsInPlace removes http(s) URLs so documentation links ("/rate-limits",
// "/settings/billing") do not match phrases. It overwrites s: each URL becomes
// one space (a trailing sentence dot is kept), so the output never outgrows the
// input.
func stripURLsInPlace(s []byte) []byte {
	r := bytes.Index(s, httpBytes)
	if r < 0 {
		return s
	}
	w := r // s[:w] is output; s[r:] is input not yet read
	for {
		rest := s[r:]
		n := 0
		if bytes.HasPrefix(rest, httpsSchemeBytes) {
			n = len("https://")
		} else if bytes.HasPrefix(rest, httpSchemeBytes) {
			n = len("http://")
		}
		if n == 0 {
			w += copy(s[w:], rest[:4])
			r += 4
		} else {
			j := n
			for j < len(rest) {
				c := rest[j]
				if c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '"' || c == '\'' || c == ')' || c == ']' || c == '>' || c == '<' || c == '`' {
					break
				}
				j++
			}
			if j > n && rest[j-1] == '.' { // keep a trailing sentence dot
				j--
			}
			s[w] = ' '
			w++
			r += j
		}
		i := bytes.Index(s[r:], httpBytes)
		if i < 0 {
			w += copy(s[w:], s[r:])
			return s[:w]
		}
		w += copy(s[w:], s[r:r+i])
		r += i
	}
}

var (
	httpBytes        = []byte("http")
	httpSchemeBytes  = []byte("http://")
	httpsSchemeBytes = []byte("https://")
)

// Redaction of anything that looks like a secret in previews. A hand-written
// scanner: linear, and about a hundred times cheaper than regexps here.

var secretPrefixes = []string{"sk-", "sk_", "pk-", "pk_", "rk-", "rk_", "ak-", "gsk_", "xai-", "csk-", "nvapi-",
	"hf_", "ghp_", "gho_", "ghs_", "github_pat_", "glpat-", "xoxb-", "xoxp-", "xoxa-", "xoxr-", "aiza", "ya29.", "r8_"}

var secretParams = []string{"key=", "api_key=", "apikey=", "api-key=", "token=", "access_token=", "secret=",
	"password=", "passwd=", "sig=", "signature=", "auth=", "client_secret=", "x-goog-api-key="}

var secretHeaders = []string{"x-api-key", "api-key", "authorization", "x-goog-api-key", "proxy-authorization"}

func isTokChar(c byte) bool { return tokChar[c] }

var tokChar = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*'
	}
	return t
}()

// secretFirst marks the first bytes (either case) of secretPrefixes.
var secretFirst = func() (t [256]bool) {
	for _, p := range secretPrefixes {
		t[p[0]] = true
		t[p[0]-'a'+'A'] = true
	}
	return t
}()

// redact hides secrets in s: provider key prefixes (sk-, AIza, gsk_, ...), the
// value after bearer/basic, key=/token= query parameters, auth header values, and
// any long token that mixes letters and digits (32+ characters).
func redact(s string) string {
	var b strings.Builder
	done := 0 // s[:done] is already in b (b is used only once a token changes)
	prev := ""
	for i := 0; i < len(s); {
		if !isTokChar(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isTokChar(s[j]) {
			j++
		}
		tok := s[i:j]
		if r := redactToken(tok, s[:i], prev); len(r) != len(tok) || r != tok {
			if b.Cap() == 0 {
				b.Grow(len(s))
			}
			b.WriteString(s[done:i])
			b.WriteString(r)
			done = j
		}
		prev = tok
		i = j
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

func hasPrefixFold(s, p string) bool {
	return len(s) >= len(p) && strings.EqualFold(s[:len(p)], p)
}

func hasSuffixFold(s, p string) bool {
	return len(s) >= len(p) && strings.EqualFold(s[len(s)-len(p):], p)
}

func isSecretHeader(tok string) bool {
	if len(tok) < 7 || len(tok) > 19 { // lengths of secretHeaders
		return false
	}
	for _, h := range secretHeaders {
		if strings.EqualFold(tok, h) {
			return true
		}
	}
	return false
}

// endsWithColon: s ends with ':' followed by nothing but spaces.
func endsWithColon(s string) bool {
	i := len(s) - 1
	for i >= 0 && s[i] == ' ' {
		i--
	}
	return i >= 0 && s[i] == ':'
}

func redactToken(tok, before, prev string) string {
	if len(tok) >= 9 && secretFirst[tok[0]] {
		for _, p := range secretPrefixes {
			if len(tok) >= len(p)+6 && hasPrefixFold(tok, p) {
				return tok[:len(p)] + "[redacted]"
			}
		}
	}
	if n := len(before); n > 0 {
		switch before[n-1] {
		case '=':
			for _, p := range secretParams {
				if hasSuffixFold(before, p) {
					return "[redacted]"
				}
			}
		case ' ', ':':
			if before[n-1] == ' ' && len(tok) >= 8 && (len(prev) == 6 || len(prev) == 5) &&
				(strings.EqualFold(prev, "bearer") || strings.EqualFold(prev, "basic")) {
				return "[redacted]"
			}
			if isSecretHeader(prev) && endsWithColon(before) &&
				!strings.EqualFold(tok, "bearer") && !strings.EqualFold(tok, "basic") {
				return "[redacted]"
			}
		}
	}
	if len(tok) >= 32 {
		digit, letter := false, false
		for k := 0; k < len(tok); k++ {
			c := tok[k]
			if c >= '0' && c <= '9' {
				digit = true
			} else if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
				letter = true
			}
		}
		if digit && letter {
			return "[redacted]"
		}
	}
	return tok
}

// Preview makes a short, single-line, redacted preview of a provider message
// (at most 200 runes). Exported so the LLM client and reports use the same rule.
func Preview(s string) string {
	if s == "" {
		return ""
	}
	// Bound the work before redaction; redact before truncation so a secret
	// cut at the edge is never shown in part.
	if len(s) > 2048 {
		s = s[:2048]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "")
	}
	s = collapseSpace(s)
	s = redact(s)
	if len(s) > maxPreviewRunes {
		// Cut before rune maxPreviewRunes-1 when there are more than maxPreviewRunes runes.
		n, cut := 0, -1
		for i := range s {
			if n == maxPreviewRunes-1 {
				cut = i
			}
			n++
			if n > maxPreviewRunes {
				s = strings.TrimSpace(s[:cut]) + "…"
				break
			}
		}
	}
	return s
}

func formatNumber(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}
