package failover

import (
	"encoding/json"
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

func decodeJSON(s string) (any, bool) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, false
	}
	return v, true
}

// fromJSON fills bi from a decoded document.
func (bi *bodyInfo) fromJSON(v any, depth int) {
	root := v
	if arr, ok := v.([]any); ok && len(arr) > 0 {
		root = arr[0]
	}
	if m, ok := root.(map[string]any); ok {
		bi.structured(m, depth)
	}
	bi.walk(v, "", 0, depth)
}

// structured picks the message, code and embedded status from the common error
// envelopes: OpenAI {error:{message,type,code}}, Anthropic {type:error,error:{type,
// message}}, Google {error:{code,status,message}}, {error:"..."}, {message,code},
// MiniMax base_resp, FastAPI detail.
func (bi *bodyInfo) structured(m map[string]any, depth int) {
	inner, _ := m["error"].(map[string]any)
	if inner == nil {
		if errs, ok := m["errors"].([]any); ok && len(errs) > 0 {
			inner, _ = errs[0].(map[string]any)
		}
	}
	if inner == nil {
		if br, ok := m["base_resp"].(map[string]any); ok {
			inner = map[string]any{"message": br["status_msg"], "code": br["status_code"]}
		}
	}
	msgKeys := []string{"message", "msg", "error_msg", "errorMessage", "error_message", "detail", "status_msg", "error_description", "title"}
	if inner != nil {
		bi.message = firstString(inner, msgKeys...)
		if meta, ok := inner["metadata"].(map[string]any); ok {
			if raw, ok := meta["raw"].(string); ok && strings.TrimSpace(raw) != "" {
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
		if s, ok := m["error"].(string); ok {
			bi.message = s
		} else {
			bi.message = firstString(m, msgKeys...)
		}
		if bi.message == "" {
			if d, ok := m["detail"].(map[string]any); ok {
				bi.message = firstString(d, msgKeys...)
			}
		}
	}
	if bi.code == "" {
		bi.pickCode(m)
	}
	if bi.embStatus == 0 {
		for _, k := range []string{"status", "status_code", "raw_status_code", "code"} {
			if n := httpStatusValue(m[k]); n != 0 {
				bi.embStatus = n
				break
			}
		}
	}
}

// pickCode takes the most specific code of one error object.
func (bi *bodyInfo) pickCode(o map[string]any) {
	var cands []string
	for _, k := range []string{"code", "type", "status", "error_code", "errorCode", "reason"} {
		if s := scalarString(o[k]); s != "" && s != "error" {
			cands = append(cands, s)
		}
	}
	for _, k := range []string{"code", "status", "status_code"} {
		if n := httpStatusValue(o[k]); n != 0 && bi.embStatus == 0 {
			bi.embStatus = n
		}
	}
	bi.codes = append(bi.codes, cands...)
	if bi.code != "" {
		return
	}
	// Prefer a non-HTTP-number code (rate_limit_exceeded, 1113) over "429".
	for _, c := range cands {
		if _, err := strconv.Atoi(c); err == nil && len(c) == 3 && c[0] >= '1' && c[0] <= '5' {
			continue
		}
		bi.code = c
		return
	}
	if len(cands) > 0 {
		bi.code = cands[0]
	}
}

func firstString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
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
		s = formatNumber(x)
	case string:
		s = x
	default:
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
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
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			lk := strings.ToLower(k)
			if skipKeys[lk] {
				continue
			}
			if lk == "raw" {
				continue // decoded by structured
			}
			if lk == "blockreason" || lk == "block_reason" {
				if s := scalarString(x[k]); s != "" {
					bi.strs = append(bi.strs, "blockreason "+s)
				}
				continue
			}
			if lk == "finishreason" || lk == "finish_reason" {
				switch strings.ToUpper(scalarString(x[k])) {
				case "SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY", "RECITATION":
					bi.strs = append(bi.strs, "blockreason "+scalarString(x[k]))
					continue
				}
			}
			if strings.Contains(lk, "retry") || strings.Contains(lk, "reset") || strings.Contains(lk, "ratelimit") {
				// {"retryDelay":"34s"}, {"retry_after":30}, OpenRouter metadata.headers
				// {"X-RateLimit-Reset":"1741305600000"}: keep the key as context.
				if s := scalarString(x[k]); s != "" {
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
			bi.walk(x[k], lk, level+1, depth)
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
		c := s[i]
		if c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
			c == ' ' && (i == 0 || i == len(s)-1 || s[i+1] == ' ') || c == 0xc2 || c == 0xe2 || c == 0xe3 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// stripURLs removes http(s) URLs so documentation links ("/rate-limits",
// "/settings/billing") do not match phrases.
func stripURLs(s string) string {
	if !strings.Contains(s, "http") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for {
		i := strings.Index(s, "http")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		rest := s[i:]
		n := 0
		if strings.HasPrefix(rest, "https://") {
			n = len("https://")
		} else if strings.HasPrefix(rest, "http://") {
			n = len("http://")
		}
		if n == 0 {
			b.WriteString(s[:i+4])
			s = s[i+4:]
			continue
		}
		b.WriteString(s[:i])
		j := n
		for j < len(rest) {
			c := rest[j]
			if c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '"' || c == '\'' || c == ')' || c == ']' || c == '>' || c == '<' || c == '`' {
				break
			}
			j++
		}
		// keep a trailing sentence dot
		if j > n && rest[j-1] == '.' {
			j--
		}
		b.WriteString(" ")
		s = rest[j:]
	}
}

// Redaction of anything that looks like a secret in previews. A hand-written
// scanner: linear, and about a hundred times cheaper than regexps here.

var secretPrefixes = []string{"sk-", "sk_", "pk-", "pk_", "rk-", "rk_", "ak-", "gsk_", "xai-", "csk-", "nvapi-",
	"hf_", "ghp_", "gho_", "ghs_", "github_pat_", "glpat-", "xoxb-", "xoxp-", "xoxa-", "xoxr-", "aiza", "ya29.", "r8_"}

var secretParams = []string{"key=", "api_key=", "apikey=", "api-key=", "token=", "access_token=", "secret=",
	"password=", "passwd=", "sig=", "signature=", "auth=", "client_secret=", "x-goog-api-key="}

var secretHeaders = []string{"x-api-key", "api-key", "authorization", "x-goog-api-key", "proxy-authorization"}

func isTokChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*'
}

// redact hides secrets in s: provider key prefixes (sk-, AIza, gsk_, ...), the
// value after bearer/basic, key=/token= query parameters, auth header values, and
// any long token that mixes letters and digits (32+ characters).
func redact(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	prev := ""
	for i := 0; i < len(s); {
		if !isTokChar(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && isTokChar(s[j]) {
			j++
		}
		tok := s[i:j]
		b.WriteString(redactToken(tok, s[:i], prev))
		prev = tok
		i = j
	}
	return b.String()
}

func hasPrefixFold(s, p string) bool {
	return len(s) >= len(p) && strings.EqualFold(s[:len(p)], p)
}

func hasSuffixFold(s, p string) bool {
	return len(s) >= len(p) && strings.EqualFold(s[len(s)-len(p):], p)
}

func redactToken(tok, before, prev string) string {
	if len(tok) >= 9 {
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
			if before[n-1] == ' ' && len(tok) >= 8 && (strings.EqualFold(prev, "bearer") || strings.EqualFold(prev, "basic")) {
				return "[redacted]"
			}
			if t := strings.TrimRight(before, " "); strings.HasSuffix(t, ":") &&
				!strings.EqualFold(tok, "bearer") && !strings.EqualFold(tok, "basic") {
				for _, h := range secretHeaders {
					if strings.EqualFold(prev, h) {
						return "[redacted]"
					}
				}
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
	if len(s) > maxPreviewRunes && utf8.RuneCountInString(s) > maxPreviewRunes {
		n, cut := 0, len(s)
		for i := range s {
			if n == maxPreviewRunes-1 {
				cut = i
				break
			}
			n++
		}
		s = strings.TrimSpace(s[:cut]) + "…"
	}
	return s
}

func formatNumber(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}
