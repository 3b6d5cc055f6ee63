package classify

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"syscall"
)

// decision is the answer of one step.
type decision struct {
	reason   Reason
	step     Step
	rule     string
	evidence string
	family   string // the family of meaning (see Explanation.Family)
	field    string // the field that decided (see Explanation.Field)
	idle     bool
}

// decide runs the steps and settles their disagreements (see the package doc):
//
//  1. transport: no response, the client's own error decides;
//  2. an exact field, unless the text names a failure C1 ranks higher;
//  3. a specific text family (C2: text beats status);
//  4. a hint field (a rate code, insufficient_quota);
//  5. a specific status: 401/403/407 auth, 402 billing, 404 model_not_found,
//     413 context_overflow, 429 rate_limit, 529 overloaded;
//  6. a C7 text (not a failover signal): unclassified;
//  7. generic server, network and stream wording: timeout (C6);
//  8. the status's default: 408/410/425/499/5xx timeout, other 4xx format;
//  9. a generic envelope type (api_error, invalid_request_error, ...);
//  10. no_error_details / empty_response / unclassified (C10).
func decide(r Response, ev *evidence) decision {
	c := &textCtx{text: ev.text, provider: strings.ToLower(r.Provider), status: ev.status.code, rawHTTP: r.Status, ev: ev}

	tr, empty := transportStep(r, ev)
	if tr.reason != "" {
		return tr
	}
	if ev.cloudflare && ev.status.code >= 500 && ev.status.code <= 599 {
		// Cloudflare's edge wrote this page about the origin (C6): its prose
		// ("may indicate the origin is overloaded") guesses, the status says.
		return decision{reason: ReasonTimeout, step: StepField, rule: "field/cloudflare-edge",
			evidence: "cloudflare_error=true, status " + strconv.Itoa(ev.status.code), family: "server-or-network", field: "cloudflare_error"}
	}
	exact, hint, typ := fieldStep(c)
	found := scan(c)
	spec := first(found, func(f *family) bool { return specificAdmits(f, c) })
	if empty { // the call succeeded with no text: was it filtered?
		if exact.reason == ReasonContentFilter {
			return fromField(exact)
		}
		if spec.ok() && spec.fam.reason == ReasonContentFilter {
			return fromText(spec)
		}
		return decision{reason: ReasonEmptyResponse, step: StepTransport, rule: "transport/empty-output", evidence: "no usable output"}
	}
	if exact.reason == ReasonAborted && !(r.Status == 0 || r.Status == 499) {
		exact = fieldHit{} // a server that answered was not cancelled by us
	}
	if exact.ok() {
		if spec.ok() && spec.fam.rank < rankOf(exact.reason) {
			return fromText(spec)
		}
		return fromField(exact)
	}
	if spec.ok() {
		return fromText(spec)
	}
	st := ev.status
	// A loose rate code ("quota_exceeded") beats the status, except a 402's
	// payment when the text names no window to wait for (C3): "You have no
	// quota" at 402 is a plan's allowance spent.
	if hint.ok() && !(hint.reason == ReasonRateLimit && st.code == 402 && !reWindowWords.MatchString(c.text)) {
		return fromField(hint)
	}
	if d, ok := specificStatus(st); ok {
		return d
	}
	if m := first(found, func(f *family) bool { return f.rank == rankNotASignal }); m.ok() {
		return fromText(m)
	}
	if m := first(found, func(f *family) bool { return f.rank == rankGeneric }); m.ok() {
		return fromText(m)
	}
	if d, ok := defaultStatus(st); ok {
		return d
	}
	if typ.ok() {
		return fromField(typ)
	}
	if ev.text == "" && len(ev.fields) == 0 {
		return decision{reason: ReasonEmptyResponse, step: StepDefault, rule: "default/empty", evidence: "no message and no error status"}
	}
	return decision{reason: ReasonUnclassified, step: StepDefault, rule: "default/unclassified", evidence: "no rule matched"}
}

// specificAdmits says which families may decide before the status.
func specificAdmits(f *family, c *textCtx) bool {
	switch f.rank {
	case rankNotASignal, rankGeneric:
		return false
	case rankAborted:
		// A cancel by the caller, with no server response (or nginx's 499).
		return c.rawHTTP == 0 || c.rawHTTP == 499
	case rankFormat:
		// A server error, an auth or a missing route that mentions "not supported"
		// or "failed to parse" is not the caller's format (C9).
		return formatStatus(c.status)
	}
	return true
}

func formatStatus(status int) bool {
	switch {
	case status < 400:
		return true
	case status == 400, status == 405, status == 406, status == 409, status == 411, status == 415, status == 422:
		return true
	}
	return false
}

func fromText(m match) decision {
	return decision{reason: m.fam.reason, step: StepText, rule: m.fam.name + "/" + m.rule.name, evidence: m.evidence,
		family: m.fam.name, field: "message"}
}

func fromField(h fieldHit) decision {
	return decision{reason: h.reason, step: StepField, rule: h.rule, evidence: h.evidence, family: h.family, field: h.field}
}

// transportStep decides when the client's error says it all. empty reports an
// ErrEmptyOutput, which the caller settles with the body (a content filter).
func transportStep(r Response, ev *evidence) (d decision, empty bool) {
	err := r.Err
	if err == nil {
		return d, false
	}
	t := func(reason Reason, rule, evidence string) decision {
		return decision{reason: reason, step: StepTransport, rule: "transport/" + rule, evidence: evidence,
			family: "transport", field: "error"}
	}
	switch {
	case errors.Is(err, ErrIdleTimeout):
		d = t(ReasonTimeout, "idle-timeout", "no stream chunk within the idle timeout")
		d.idle = true
		return d, false
	case errors.Is(err, ErrAttemptTimeout), errors.Is(err, context.DeadlineExceeded):
		return t(ReasonTimeout, "attempt-timeout", "the attempt's deadline passed"), false
	case errors.Is(err, context.Canceled):
		return t(ReasonAborted, "cancelled", "the caller cancelled"), false
	case errors.Is(err, ErrEmptyOutput):
		return d, true
	}
	if r.Status == 0 && !ev.hasBody && localFault(err) {
		return t(ReasonLocal, "local-resource", "out of file descriptors or memory on detour's side"), false // A4
	}
	if r.Status == 0 && !ev.hasBody || r.Stream {
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
			return t(ReasonTimeout, "eof", "the connection ended early"), false
		}
		var te interface{ Timeout() bool }
		if errors.As(err, &te) && te.Timeout() {
			return t(ReasonTimeout, "net-timeout", "network timeout"), false
		}
	}
	return d, false
}

// localFault reports an error of our own process, not of the provider: out of
// file descriptors (EMFILE, ENFILE) or memory (ENOMEM), as an errno or in its
// text (A4).
func localFault(err error) bool {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM) {
		return true
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "too many open files") || strings.Contains(s, "cannot allocate memory")
}

// resolveStatus settles which status the decision sees. An HTTP 4xx is the
// server's own verdict: a status number inside the body never turns it into
// another (a body "code":429 on an HTTP 400 or 401 stays a 400 or 401). A
// gateway's 5xx, or a stream's 200, that carries a status in its body reports the
// upstream's failure, so the body's status wins there. With no HTTP error status,
// a status stated in the text counts ("Error code: 401 - ...", "HTTP 402 Payment
// Required").
func (ev *evidence) resolveStatus(http int) {
	switch {
	case http >= 400 && http <= 499:
		ev.status = effectiveStatus{http, "http"}
	case ev.bodyStatus != 0:
		ev.status = effectiveStatus{ev.bodyStatus, "body"}
	case http >= 500:
		ev.status = effectiveStatus{http, "http"}
	default:
		if n := textStatus(ev.parts); n != 0 {
			ev.status = effectiveStatus{n, "text"}
		} else if http != 0 {
			ev.status = effectiveStatus{http, "http"}
		}
	}
	// A gateway's 5xx quoting its upstream's 4xx ("DeepSeek API error: 400 Bad Request") reports that verdict.
	if http >= 500 && ev.status.code >= 500 {
		if n := textStatus(ev.parts); n >= 400 && n <= 499 {
			ev.status = effectiveStatus{n, "text"}
		}
	}
}

func specificStatus(st effectiveStatus) (decision, bool) {
	var r Reason
	switch st.code {
	case 401, 403, 407:
		r = ReasonAuth
	case 402:
		r = ReasonBilling
	case 404:
		r = ReasonModelNotFound
	case 413:
		r = ReasonContextOverflow
	case 429:
		r = ReasonRateLimit
	case 529:
		r = ReasonOverloaded
	default:
		return decision{}, false
	}
	return statusDecision(r, st), true
}

func defaultStatus(st effectiveStatus) (decision, bool) {
	switch s := st.code; {
	case s == 408, s == 410, s == 425, s == 499, s >= 500 && s <= 599:
		return statusDecision(ReasonTimeout, st), true
	case s >= 400 && s <= 499:
		return statusDecision(ReasonFormat, st), true
	}
	return decision{}, false
}

func statusDecision(r Reason, st effectiveStatus) decision {
	ev := "HTTP " + strconv.Itoa(st.code)
	if st.from != "http" {
		ev = "status " + strconv.Itoa(st.code) + " in the " + st.from
	}
	return decision{reason: r, step: StepStatus, rule: "status/" + strconv.Itoa(st.code), evidence: ev,
		family: "status", field: st.from + " status"}
}

// Statuses stated in text. A leading number counts only when its reason phrase,
// "status code" or a body follows it ("429 Too Many Requests", "400 {...}"), so
// "402 items found in the database" states nothing; a number after a status word
// counts ("HTTP 402", "Error code: 401", "OpenAI API error (429)", "status code 400").
var (
	reLeadStatus  = lazy(`^\W{0,3}(?:error:?\s*)?([45]\d\d)\b[\s:,-]*(.{0,48})`)
	reNamedStatus = lazy(`\b(?:http(?:/[\d.]+)?|status(?:[ _]code)?|error[ _]code|api error|(?:got|returned|received) an?|request failed)\s*[:=(]?\s*([45]\d\d)\b`)
)

var statusPhrases = map[int][]string{
	400: {"bad request"}, 401: {"unauthorized", "authorization required"}, 402: {"payment required"},
	403: {"forbidden"}, 404: {"not found"}, 405: {"method not allowed"}, 406: {"not acceptable"},
	407: {"proxy authentication required"}, 408: {"request timeout", "request time-out"}, 409: {"conflict"},
	410: {"gone"}, 411: {"length required"}, 413: {"payload too large", "request entity too large", "content too large"},
	415: {"unsupported media type"}, 422: {"unprocessable entity", "unprocessable content"}, 424: {"failed dependency"},
	425: {"too early"}, 429: {"too many requests"}, 499: {"client closed request"}, 500: {"internal server error"},
	501: {"not implemented"}, 502: {"bad gateway"}, 503: {"service unavailable", "service temporarily unavailable"},
	504: {"gateway timeout", "gateway time-out"}, 520: {"web server is returning an unknown error", "unknown error"},
	521: {"web server is down"}, 522: {"connection timed out"}, 523: {"origin is unreachable"},
	524: {"a timeout occurred"}, 525: {"ssl handshake failed"}, 526: {"invalid ssl certificate"}, 529: {"site is overloaded", "overloaded"},
}

func textStatus(parts []string) int {
	for _, p := range parts {
		if m := reLeadStatus.FindStringSubmatch(p); m != nil {
			n, _ := strconv.Atoi(m[1])
			after := m[2]
			if after == "" || strings.HasPrefix(after, "status code") || strings.HasPrefix(after, "(no body)") ||
				strings.HasPrefix(after, "{") || strings.HasPrefix(after, "[") || strings.HasPrefix(after, "<") {
				return n
			}
			for _, ph := range statusPhrases[n] {
				if strings.HasPrefix(after, ph) {
					return n
				}
			}
		}
		if m := reNamedStatus.FindStringSubmatchIndex(p); m != nil {
			if reCondition.MatchString(p[max(0, m[0]-24):m[0]]) {
				continue // "if the HTTP 429 code is returned": a case described, not this one
			}
			n, _ := strconv.Atoi(p[m[2]:m[3]])
			return n
		}
	}
	return 0
}

// reCondition: a condition just before a status ("if the HTTP 429 code is
// returned", "when status code 503 ..."), not a sentence that merely has "when"
// earlier ("Error when calling the API: status code 429").
var reCondition = lazy(`\b(if|when|whenever|unless|whether)\s+(the |an? |your |any )?$`)
