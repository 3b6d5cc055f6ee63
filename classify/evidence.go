package classify

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits that keep Classify linear and cheap on hostile or huge inputs.
const (
	maxJSONBody   = 1 << 20  // bodies larger than this are not JSON-decoded
	maxScanText   = 64 << 10 // at most this much text is matched against families
	maxTexts      = 96       // strings collected from one body
	maxFields     = 64       // machine-readable fields collected from one body
	maxWalkDepth  = 12       // JSON nesting walked
	maxRawDepth   = 2        // nested OpenRouter metadata.raw documents decoded
	maxPartLength = 4096     // one string of the body or the error text
)

// evidence is what the steps look at, gathered once from the response.
type evidence struct {
	prose   []string // prose of the body and the error text, original case
	paths   []string // where each prose string was found ("error.message", "body", "transport error")
	parts   []string // prose lower-cased, URLs removed
	partAt  []string // the path of each part
	base    string   // path prefix while a nested document (metadata.raw) is read
	text    string   // parts joined by " | " (what the text families match)
	urls    []string // URLs removed from parts, lower-cased (weak billing hints)
	fields  []field  // machine-readable values (codes, types, exception names, stop reasons)
	message string   // the provider's primary message, original case
	code    string   // the most specific code or type, for Verdict.Code
	hasRaw  bool     // OpenRouter metadata.raw was present
	isHTML  bool
	// cloudflare: the body is Cloudflare's own error document ("cloudflare_error":
	// true), written by the edge about the origin, not by the provider.
	cloudflare bool
	param      string            // the request parameter the provider named (error.param, a validation loc)
	hasBody    bool              // the body held something non-blank
	hdrs       map[string]string // header-like values found inside the body (lower-case keys)
	status     effectiveStatus

	bodyStatus      int // a status number (400..599) in a code/status field of the body
	bodyStatusDepth int
}

// field is one machine-readable value: path is where it was found
// ("error.type", "header x-amzn-errortype", "text stop reason"), value is as given.
type field struct {
	path, value string
}

// effectiveStatus is the status the decision uses (see resolveStatus).
type effectiveStatus struct {
	code int
	from string // "http", "body" or "text"
}

// Keys of a JSON error object, by what their values mean.
var (
	messageKeys = []string{"message", "msg", "error_msg", "errormessage", "error_message", "detail",
		"status_msg", "error_description", "title", "description"}
	codeKeys = map[string]bool{"code": true, "type": true, "status": true, "error_code": true, "errorcode": true,
		"error_type": true, "errortype": true, "__type": true, "reason": true, "finish_reason": true,
		"finishreason": true, "stop_reason": true, "stopreason": true, "blockreason": true, "block_reason": true}
	// statusKeys may hold an HTTP status number.
	statusKeys = map[string]bool{"code": true, "status": true, "status_code": true, "statuscode": true,
		"raw_status_code": true, "http_status": true, "httpstatus": true, "http_code": true}
	// skipKeys hold ids, links, echoes of the request or model output: never evidence.
	skipKeys = map[string]bool{"request_id": true, "requestid": true, "id": true, "user_id": true,
		"created_at": true, "created": true, "@type": true, "domain": true, "locale": true, "x-request-id": true,
		"trace_id": true, "traceid": true, "timestamp": true, "url": true, "help_url": true, "doc_url": true,
		"documentation_url": true, "links": true, "object": true, "param": true, "loc": true, "input": true,
		"flagged_input": true, "content": true, "model": true, "sequence_number": true, "upgradeurl": true,
		"provider_name": true, "ctx": true}
)

// gather decodes the body, headers and error into evidence.
func gather(r Response) *evidence {
	ev := &evidence{hasBody: strings.TrimSpace(r.Body) != ""}
	var prose []string // original case, in reading order
	ev.parseBody(r.Body, 0, &prose)
	for k, v := range r.Headers {
		// Bedrock names its error class only in a header.
		if strings.EqualFold(strings.TrimSpace(k), "x-amzn-errortype") && strings.TrimSpace(v) != "" {
			ev.addField("header x-amzn-errortype", v)
		}
	}
	if r.Err != nil {
		es := clip(r.Err.Error(), maxPartLength)
		if strings.TrimSpace(es) != "" {
			prose = append(prose, es)
			ev.paths = append(ev.paths, "transport error")
			if ev.message == "" {
				ev.message = es
			}
		}
	}
	ev.prose = prose
	ev.buildText(prose)
	ev.resolveStatus(r.Status)
	return ev
}

// parseBody reads a provider body: JSON (objects, arrays, OpenRouter
// metadata.raw), SSE event text, "prefix {json}", HTML pages, or plain text.
func (ev *evidence) parseBody(body string, depth int, prose *[]string) {
	trimmed := strings.TrimSpace(body)
	if trimmed == "" {
		return
	}
	if isSSE(trimmed) {
		parsed := false
		for line := range strings.SplitSeq(trimmed, "\n") {
			line = strings.TrimSpace(line)
			payload, ok := strings.CutPrefix(line, "data:")
			if !ok {
				continue
			}
			payload = strings.TrimSpace(payload)
			if payload == "" || payload == "[DONE]" {
				continue
			}
			ev.parseBody(payload, depth, prose)
			parsed = true
			if len(*prose) >= maxTexts {
				break
			}
		}
		if parsed {
			return
		}
	}
	if looksHTML(trimmed) {
		ev.isHTML = true
		title, text := htmlText(trimmed)
		for _, s := range []string{title, text} {
			if s != "" {
				*prose = append(*prose, s)
				ev.paths = append(ev.paths, ev.base+"html")
				if ev.message == "" {
					ev.message = s
				}
			}
		}
		return
	}
	if len(trimmed) <= maxJSONBody {
		if c := trimmed[0]; c == '{' || c == '[' {
			if v, ok := decodeJSON(trimmed); ok {
				ev.fromJSON(v, depth, prose)
				return
			}
		} else if i := strings.IndexAny(trimmed, "{["); i > 0 && i <= 256 {
			// "Error code: 401 - {...}", "400 {...}", "Codex error: {...}"
			if j := strings.LastIndexAny(trimmed, "}]"); j > i {
				if v, ok := decodeJSON(trimmed[i : j+1]); ok {
					prefix := strings.TrimSpace(trimmed[:i])
					*prose = append(*prose, prefix)
					ev.paths = append(ev.paths, ev.base+"text")
					ev.fromJSON(v, depth, prose)
					// Text after the document is prose too: a bracketed status is
					// valid JSON ("InferenceServerException: [400] Request for
					// unknown model: 'v2' is not found"), and the words that follow
					// it are the message.
					if suffix := strings.TrimSpace(trimmed[j+1:]); hasLetter(suffix) {
						*prose = append(*prose, clip(suffix, maxPartLength))
						ev.paths = append(ev.paths, ev.base+"text")
						if ev.message == "" || ev.message == prefix {
							ev.message = prefix + " " + suffix
						}
					}
					if ev.message == "" {
						ev.message = prefix
					}
					return
				}
			}
		}
	}
	text := clip(trimmed, maxScanText)
	*prose = append(*prose, text)
	ev.paths = append(ev.paths, ev.base+"body")
	if ev.message == "" {
		ev.message = text
	}
}

func decodeJSON(s string) (any, bool) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, false
	}
	return v, true
}

// fromJSON takes the message and code from the common error envelopes, then
// walks the whole document for prose and machine-readable fields.
//
// Envelopes: OpenAI {error:{message,type,code}}, Anthropic {type:error,error:{type,
// message}}, Google {error:{code,status,message}} (also inside an array),
// {error:"..."}, {message,code}, {errors:[...]}, MiniMax base_resp, FastAPI
// detail, OpenAI Responses {response:{error}}.
func (ev *evidence) fromJSON(v any, depth int, prose *[]string) {
	root := v
	if arr, ok := v.([]any); ok && len(arr) > 0 {
		root = arr[0]
	}
	if m, ok := root.(map[string]any); ok {
		inner := errorObject(m)
		msg := ""
		if inner != nil {
			msg = firstString(inner, messageKeys)
		}
		if msg == "" {
			es, _ := m["error"].(string)
			if es != "" && !codeLike(es) {
				msg = es
			} else if msg = firstString(m, messageKeys); msg == "" {
				msg = es // {"error":"insufficient_balance"} says it all
			}
		}
		if msg == "" {
			switch d := m["detail"].(type) {
			case map[string]any:
				msg = firstString(d, messageKeys)
			case []any:
				if len(d) > 0 {
					if o, ok := d[0].(map[string]any); ok {
						msg = firstString(o, messageKeys)
					}
				}
			}
		}
		if ev.message == "" {
			ev.message = msg
		}
		if inner != nil {
			ev.pickCode(inner)
			ev.pickParam(inner)
		}
		ev.pickCode(m)
		ev.pickParam(m)
	}
	ev.walk(v, "", 0, depth, prose)
}

// errorObject finds the object that describes the error inside a document.
func errorObject(m map[string]any) map[string]any {
	if o, ok := m["error"].(map[string]any); ok {
		return o
	}
	if errs, ok := m["errors"].([]any); ok && len(errs) > 0 {
		if o, ok := errs[0].(map[string]any); ok {
			return o
		}
	}
	if br, ok := m["base_resp"].(map[string]any); ok {
		return map[string]any{"code": br["status_code"], "message": br["status_msg"]}
	}
	if resp, ok := m["response"].(map[string]any); ok {
		if o, ok := resp["error"].(map[string]any); ok {
			return o
		}
	}
	return nil
}

func firstString(m map[string]any, keys []string) string {
	for _, k := range keys {
		for mk, v := range m {
			if strings.EqualFold(mk, k) {
				if s, ok := v.(string); ok && strings.TrimSpace(s) != "" {
					return s
				}
			}
		}
	}
	return ""
}

// pickCode takes the most specific code of one error object for Verdict.Code: a
// named code before a number ("rate_limit_exceeded" before "429").
func (ev *evidence) pickCode(o map[string]any) {
	if ev.code != "" {
		return
	}
	var cands []string
	for _, k := range []string{"code", "type", "status", "error_code", "errorCode", "reason"} {
		if s := scalarString(o[k]); s != "" && s != "error" && codeLike(s) {
			cands = append(cands, s)
		}
	}
	for _, c := range cands {
		if httpStatusValue(c) == 0 {
			ev.code = c
			return
		}
	}
	if len(cands) > 0 {
		ev.code = cands[0]
	}
}

// pickParam keeps the request parameter an error object names: OpenAI's
// error.param ("messages[1].content"), a validation error's loc (["body",
// "store"] becomes "store").
func (ev *evidence) pickParam(o map[string]any) {
	if ev.param != "" {
		return
	}
	if n := httpStatusValue(o["param"]); n != 0 && ev.bodyStatus == 0 {
		ev.bodyStatus = n // a relay's upstream status ({"type":"upstream_error","param":"422"}), no parameter
		return
	}
	if p, ok := o["param"].(string); ok && strings.TrimSpace(p) != "" {
		ev.param = clip(strings.TrimSpace(p), 128)
		return
	}
	d, _ := o["detail"].([]any)
	if len(d) == 0 {
		return
	}
	first, _ := d[0].(map[string]any) // a nil map reads as empty
	if loc, ok := first["loc"].([]any); ok {
		var names []string
		for _, e := range loc {
			if s, ok := e.(string); ok && s != "body" {
				names = append(names, s)
			}
		}
		ev.param = clip(strings.Join(names, "."), 128)
	}
}

// walk collects prose and fields in a stable order (keys sorted).
func (ev *evidence) walk(v any, path string, level, depth int, prose *[]string) {
	if level > maxWalkDepth || len(*prose) >= maxTexts {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			ev.walkMember(k, x[k], path, level, depth, prose)
		}
	case []any:
		for _, e := range x {
			ev.walk(e, path, level+1, depth, prose)
			if len(*prose) >= maxTexts {
				return
			}
		}
	case string:
		if s := strings.TrimSpace(x); s != "" && !codeLike(s) {
			*prose = append(*prose, clip(s, maxPartLength))
			ev.paths = append(ev.paths, ev.base+path)
		}
	}
}

func (ev *evidence) walkMember(k string, v any, path string, level, depth int, prose *[]string) {
	lk := strings.ToLower(k)
	p := lk
	if path != "" {
		p = path + "." + lk
	}
	if skipKeys[lk] {
		return
	}
	switch {
	case lk == "raw":
		// OpenRouter wraps the upstream provider's body in metadata.raw.
		if s, ok := v.(string); ok && strings.TrimSpace(s) != "" {
			ev.hasRaw = true
			if depth < maxRawDepth {
				outer, base := ev.message, ev.base
				ev.message, ev.base = "", ev.base+p+":"
				ev.parseBody(s, depth+1, prose)
				ev.base = base
				switch {
				case outer != "" && ev.message != "":
					ev.message = outer + ": " + ev.message
				case outer != "":
					ev.message = outer
				}
			}
		}
		return
	case lk == "headers":
		// OpenRouter copies the upstream rate-limit headers into metadata.headers.
		if o, ok := v.(map[string]any); ok {
			for hk, hv := range o {
				if s := scalarString(hv); s != "" {
					ev.addHdr(strings.ToLower(hk), s)
				}
			}
			return
		}
	case lk == "quotametric" || lk == "quotaid" || lk == "quotavalue":
		// Google's QuotaFailure violations ({"quotaMetric": ".../free_tier_requests",
		// "quotaId": "...PerMinute...", "quotaValue": "15"}) say which window ran
		// out: read as "quota metric ..." and "limit: 15", so a per-minute window
		// under OpenAI's billing sentence stays a rate limit, and a limit of 0 (no
		// free tier at all) stays billing, as when the message spells them out.
		if s := scalarString(v); s != "" {
			if lk == "quotavalue" {
				*prose = append(*prose, "limit: "+clip(s, 40))
			} else {
				*prose = append(*prose, "quota metric "+clip(s, maxPartLength))
			}
			ev.paths = append(ev.paths, ev.base+p)
			return
		}
	case strings.Contains(lk, "retry") || strings.Contains(lk, "reset") || strings.Contains(lk, "ratelimit"):
		// {"retryDelay":"34s"}, {"retry_after":30}: header-like values; the key
		// is kept with the value so the text reads "retrydelay 34s".
		if s := scalarString(v); s != "" {
			ev.addHdr(lk, s)
			*prose = append(*prose, lk+" "+s)
			ev.paths = append(ev.paths, ev.base+p)
			return
		}
	}
	switch x := v.(type) {
	case string:
		s := strings.TrimSpace(x)
		if (isMessageKey(lk) || lk == "error") && depth < maxRawDepth && ev.nestedDocument(s, p, depth, prose) {
			return
		}
		switch {
		case s == "":
		case (codeKeys[lk] || lk == "error") && codeLike(s):
			if !(lk == "type" && s == "error") {
				ev.addField(p, s)
			}
		case isMessageKey(lk) || codeKeys[lk] || lk == "error" || isProse(s):
			*prose = append(*prose, clip(s, maxPartLength))
			ev.paths = append(ev.paths, ev.base+p)
		}
	case float64:
		if codeKeys[lk] || statusKeys[lk] {
			ev.addField(p, formatNumber(x))
		}
	case bool:
		if lk == "cloudflare_error" && x {
			ev.cloudflare = true
		}
	case map[string]any, []any:
		ev.walk(v, p, level+1, depth, prose)
	}
	if statusKeys[lk] {
		if n := httpStatusValue(v); n != 0 && (ev.bodyStatus == 0 || level < ev.bodyStatusDepth) {
			ev.bodyStatus, ev.bodyStatusDepth = n, level
		}
	}
}

func isMessageKey(k string) bool { return slices.Contains(messageKeys, k) }

// nestedDocument reads a message that is itself a JSON error document: clients
// and relays wrap the provider's body as a string (Continue's
// {"error":{"message":"{\n  \"error\": {\"code\": 403, ...}}","code":403}},
// gemini-cli's ApiError). Read as one string, its fields are lost and a pattern's
// gap runs across all its values; read as a document, its codes and reasons
// count and its strings are parts of their own. It reports whether s was one.
func (ev *evidence) nestedDocument(s, path string, depth int, prose *[]string) bool {
	if len(s) < 2 || len(s) > maxJSONBody || s[0] != '{' && s[0] != '[' {
		return false
	}
	v, ok := decodeJSON(s)
	if !ok {
		return false
	}
	if _, isObj := v.(map[string]any); !isObj {
		if arr, isArr := v.([]any); !isArr || len(arr) == 0 {
			return false
		}
	}
	outer, base := ev.message, ev.base
	ev.message, ev.base = "", ev.base+path+":"
	ev.fromJSON(v, depth+1, prose)
	inner := ev.message
	ev.base = base
	switch {
	case strings.TrimSpace(outer) == s && inner != "":
		ev.message = inner // the wrapper's message was this document: say what it says
	case outer != "":
		ev.message = outer
	default:
		ev.message = inner
	}
	return true
}

func (ev *evidence) addField(path, value string) {
	if len(ev.fields) < maxFields {
		ev.fields = append(ev.fields, field{path, clip(value, 256)})
	}
}

func (ev *evidence) addHdr(k, v string) {
	if ev.hdrs == nil {
		ev.hdrs = map[string]string{}
	}
	if _, seen := ev.hdrs[k]; !seen && len(ev.hdrs) < 16 {
		ev.hdrs[k] = strings.TrimSpace(v)
	}
}

// codeLike reports whether s reads as a machine token ("insufficient_quota",
// "RESOURCE_EXHAUSTED", "Throttling.RateQuota", "com.amazon#ValidationException",
// "429") rather than prose.
func codeLike(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '.' || c == '-' || c == ':' || c == '#' || c == '/') {
			return false
		}
	}
	return true
}

// isProse: a string under an unknown key counts as text when it reads like a
// sentence (spaces, or a script without spaces such as Chinese).
func isProse(s string) bool {
	return strings.ContainsRune(s, ' ') || !isASCII(s)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x)
	case float64:
		return formatNumber(x)
	}
	return ""
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// httpStatusValue returns v (a number or a decimal string) as an HTTP error
// status (400..599), or 0.
func httpStatusValue(v any) int {
	switch x := v.(type) {
	case float64:
		if x >= 400 && x <= 599 && x == math.Trunc(x) {
			return int(x)
		}
	case string:
		s := strings.TrimSpace(x)
		if len(s) != 3 || s[0] < '4' || s[0] > '5' || !isDigit(s[1]) || !isDigit(s[2]) {
			return 0
		}
		n, _ := strconv.Atoi(s)
		return n
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isSSE(s string) bool {
	return strings.HasPrefix(s, "data:") || strings.HasPrefix(s, "event:") || strings.Contains(s, "\ndata:")
}

func looksHTML(s string) bool {
	if s[0] != '<' {
		return false
	}
	head := strings.ToLower(clip(s, 512))
	for _, tag := range []string{"<html", "<!doctype", "<head", "<body", "<title"} {
		if strings.Contains(head, tag) {
			return true
		}
	}
	return false
}

var (
	reTitle  = lazy(`(?is)<title[^>]*>(.*?)</title`)
	reScript = lazy(`(?is)<(script|style)[^>]*>.*?</(script|style)>`)
	reTag    = lazy(`<[^>]*>`)
)

// htmlText returns an HTML page's <title> and its visible text.
func htmlText(s string) (title, text string) {
	s = clip(s, maxScanText)
	if m := reTitle.FindStringSubmatch(s); m != nil {
		title = collapseSpace(m[1])
	}
	body := reScript.get().ReplaceAllString(s, " ")
	body = reTag.get().ReplaceAllString(body, " ")
	return title, collapseSpace(body)
}

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

var reURL = lazy("https?://[^\\s\"'<>)\\]`]+")

// buildText lower-cases the prose, moves URLs aside (a documentation link such as
// ".../rate-limits" or ".../settings/billing" is not what the message says) and
// joins the parts.
func (ev *evidence) buildText(prose []string) {
	total := 0
	for i, p := range prose {
		if total > maxScanText {
			break
		}
		low := strings.ToLower(p)
		if strings.Contains(low, "http") {
			low = reURL.get().ReplaceAllStringFunc(low, func(u string) string {
				if len(ev.urls) < 8 {
					ev.urls = append(ev.urls, strings.TrimRight(u, "."))
				}
				if strings.HasSuffix(u, ".") {
					return " ."
				}
				return " "
			})
		}
		// A blank line ends a paragraph (a sentence, for the patterns); curly
		// quotes are read as straight ones ("isn’t supported").
		if strings.Contains(low, "\n") {
			low = paragraphs.get().ReplaceAllString(low, " . ")
		}
		low = collapseSpace(low)
		if strings.Contains(low, "\u2018") || strings.Contains(low, "\u2019") || strings.Contains(low, "\u201c") || strings.Contains(low, "\u201d") {
			low = quotes.Replace(low)
		}
		if low == "" || slices.Contains(ev.parts, low) {
			continue // a part said twice (Google lists a quota metric per violation) adds nothing
		}
		ev.parts = append(ev.parts, low)
		if i < len(ev.paths) {
			ev.partAt = append(ev.partAt, ev.paths[i])
		} else {
			ev.partAt = append(ev.partAt, "text")
		}
		total += len(low) + 3
	}
	ev.text = clip(sentenceEnds.Replace(strings.Join(ev.parts, " | ")), maxScanText)
	ev.text = strings.TrimRight(ev.text, ".!。 ")
}

var (
	paragraphs = lazy(`\n[ \t\r]*\n`)
	quotes     = strings.NewReplacer("\u2019", "'", "\u2018", "'", "\u201c", `"`, "\u201d", `"`)
)

// sentenceEnds turns the ends of sentences into part separators, so a gap in a
// family's pattern (which never crosses "|") stays inside one sentence, while a
// dot inside a token ("gpt-3.5", "18.6s") or an abbreviation ("e.g. ") is kept.
var sentenceEnds = strings.NewReplacer("e.g. ", "e.g., ", "i.e. ", "i.e., ", ". ", " | ", "! ", " | ", "? ", " | ", "。", " | ", "！", " | ", "？", " | ", "\n", " | ")

// clip cuts s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// boundMessage makes Verdict.Message: one line, valid UTF-8, at most MaxMessageRunes.
func boundMessage(s string) string {
	if s == "" {
		return ""
	}
	s = strings.ToValidUTF8(clip(s, 8*MaxMessageRunes), "")
	s = collapseSpace(s)
	if utf8.RuneCountInString(s) > MaxMessageRunes {
		r := []rune(s)
		s = strings.TrimSpace(string(r[:MaxMessageRunes-1])) + "…"
	}
	return s
}

// boundEvidence keeps an explanation's evidence short and printable.
func boundEvidence(s string) string {
	s = collapseSpace(strings.ToValidUTF8(clip(s, 400), ""))
	if utf8.RuneCountInString(s) > 120 {
		s = string([]rune(s)[:119]) + "…"
	}
	return s
}

// fieldOf names where a text match was found: the path of the first part that
// holds it ("error.message", "error.metadata.raw:error.message", "body").
func (ev *evidence) fieldOf(match string) string {
	if match == "" {
		return ""
	}
	for i, p := range ev.parts {
		if strings.Contains(p, match) {
			return ev.partAt[i]
		}
	}
	return ""
}

// hasLetter reports whether s holds a letter (of any script).
func hasLetter(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) {
			return true
		}
	}
	return false
}
