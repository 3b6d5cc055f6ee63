package failover

import (
	"context"
	"errors"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// Classify turns one failed response into a Failure (SPEC C1-C12). It is pure and
// never panics; now is used only to resolve recovery times (C11).
//
// Order (first match wins; text beats status, C2): our own timeouts and caller
// cancellation, content_filter, auth_permanent, billing, the Alibaba "quota has
// been exhausted" rule, periodic usage windows, context_overflow, overloaded,
// rate_limit, auth, model_not_found, format, timeout-like, then the status code,
// then empty_response / no_error_details / unclassified (C10).
//
// RetryAfter and RecoveryAt describe one recovery signal, the first found of:
// Retry-After / retry-after-ms headers, a wait stated in the body ("try again in
// 18.6s"), a moment stated in the body ("reset at 08-25 01:37:00 UTC"), and, for
// rate limits only, the x-ratelimit-reset-* headers. A wait sets RecoveryAt to
// now+wait; a moment sets RetryAfter to the time left (zero when already passed).
// Nothing is capped here: the engine caps cooldowns.
func Classify(r Response, now time.Time) (f Failure) {
	defer func() {
		if p := recover(); p != nil { // belt and braces: C12 says never panic
			f = Failure{Reason: ReasonUnclassified, Class: ClassUnknown, Status: r.Status, Provider: r.Provider}
		}
	}()
	return classify(r, now)
}

// ReasonClass maps a reason to its class (SPEC section 1).
func ReasonClass(r Reason) Class {
	switch r {
	case ReasonRateLimit, ReasonOverloaded, ReasonTimeout:
		return ClassTransient
	case ReasonBilling, ReasonAuth, ReasonAuthPermanent, ReasonModelNotFound, ReasonFormat,
		ReasonContextOverflow, ReasonContentFilter, ReasonAborted:
		return ClassDeterministic
	}
	return ClassUnknown
}

func classify(r Response, now time.Time) Failure {
	ev := gather(r)
	reason, idle := decide(r, &ev)
	f := Failure{
		Reason:   reason,
		Class:    ReasonClass(reason),
		Status:   r.Status,
		Code:     ev.code,
		Message:  Preview(ev.message),
		Idle:     idle,
		Provider: r.Provider,
	}
	f.RetryAfter, f.RecoveryAt = recovery(r, &ev, reason, now)
	return f
}

// gather decodes the body, headers and error into evidence.
func gather(r Response) evidence {
	bi := parseBody(r.Body, 0)
	ev := evidence{
		message:   bi.message,
		code:      bi.code,
		codes:     bi.codes,
		embStatus: bi.embStatus,
		hasRaw:    bi.hasRaw,
		isHTML:    bi.isHTML,
		hasBody:   strings.TrimSpace(r.Body) != "",
		hdrs:      bi.hdrs,
	}
	parts := bi.strs
	// Bedrock names its error class only in a header.
	for k, v := range r.Headers {
		if strings.EqualFold(k, "x-amzn-errortype") && v != "" {
			typ, _, _ := strings.Cut(v, ":")
			parts = append(parts, typ)
			if ev.code == "" {
				ev.code = typ
			}
		}
	}
	if r.Err != nil {
		es := r.Err.Error()
		if len(es) > 4096 {
			es = es[:4096]
		}
		parts = append(parts, es)
		if ev.message == "" {
			ev.message = es
		}
	}
	total := 0
	for _, p := range parts {
		total += len(p) + 3
	}
	buf := make([]byte, 0, total)
	for i, p := range parts {
		if i > 0 {
			buf = append(buf, " | "...)
		}
		buf = appendLower(buf, p)
		if len(buf) > maxScanText {
			break
		}
	}
	buf = stripURLsInPlace(buf)
	// buf is never written again, so it can back the string without a copy (as
	// strings.Builder does).
	ev.text = unsafe.String(unsafe.SliceData(buf), len(buf))
	ev.mask = phrases.mask(ev.text)
	if ev.embStatus == 0 && (r.Status < 400) && ev.text != "" &&
		(ev.text[0] >= '0' && ev.text[0] <= '9' || hit(ev.mask, catStatusWords)) {
		if m := reTextStatus.FindStringSubmatch(ev.text); m != nil {
			n := m[1]
			if n == "" {
				n = m[2]
			}
			ev.embStatus, _ = strconv.Atoi(n)
		}
	}
	return ev
}

// appendLower appends strings.ToLower(p) to buf. Lower-casing each part equals
// lower-casing the joined text: the mapping is per rune and the separators are
// ASCII. ASCII parts are lowered in place, without a temporary string.
func appendLower(buf []byte, p string) []byte {
	start := len(buf)
	buf = append(buf, p...)
	tail := buf[start:]
	for i, c := range tail {
		if c >= 0x80 {
			return append(buf[:start], strings.ToLower(p)...)
		}
		if c-'A' < 26 {
			tail[i] = c + ('a' - 'A')
		}
	}
	return buf
}

// reTextStatus finds a status stated in prose: "429 Too Many Requests",
// "Error code: 401 - ...", "HTTP 503", "status code 400".
var reTextStatus = regexp.MustCompile(`^\s*(?:error:?\s*)?(?:http\s*)?(?:status(?:\s*code)?:?\s*)?([45]\d\d)\b|(?:\bhttp/?[\d.]*|status code|\bstatus|error code)[\s:=]*([45]\d\d)\b`)

// decide returns the reason, and whether the failure was an idle stream.
func decide(r Response, ev *evidence) (Reason, bool) {
	if r.Err != nil {
		switch {
		case errors.Is(r.Err, ErrIdleTimeout):
			return ReasonTimeout, true
		case errors.Is(r.Err, ErrAttemptTimeout), errors.Is(r.Err, context.DeadlineExceeded):
			return ReasonTimeout, false
		case errors.Is(r.Err, context.Canceled):
			return ReasonAborted, false
		case errors.Is(r.Err, ErrEmptyOutput):
			if isContentFilter(ev.text, ev.mask) {
				return ReasonContentFilter, false
			}
			return ReasonEmptyResponse, false
		}
	}
	if r.Err != nil && r.Status == 0 && !ev.hasBody && isTransportErr(r.Err) {
		return ReasonTimeout, false // connection refused/reset, DNS, EOF mid-stream
	}
	status := r.Status
	if status < 400 && ev.embStatus != 0 {
		status = ev.embStatus
	}
	t := ev.text
	if strings.TrimSpace(t) == "" {
		if status < 400 {
			return ReasonEmptyResponse, false
		}
		return statusReason(status, ev), false
	}
	if strings.Contains(t, "no error details in response") {
		return ReasonNoErrorDetails, false
	}
	prov := strings.ToLower(r.Provider)
	if reason, ok := textReason(t, ev.mask, status, r.Status, prov, ev); ok {
		return reason, false
	}
	if r.Err != nil && isTransportErr(r.Err) {
		return ReasonTimeout, false
	}
	if status >= 400 {
		return statusReason(status, ev), false
	}
	return ReasonUnclassified, false
}

// textReason runs the phrase rules in order.
func textReason(t string, m uint64, status, rawStatus int, prov string, ev *evidence) (Reason, bool) {
	isOpenRouter := strings.Contains(prov, "openrouter")

	// 1. aborted: a caller/SDK cancellation without a server response. A server's
	// 408 "Request was aborted" is a timeout (handled by the status).
	if (rawStatus == 0 || rawStatus == 499) && isAborted(t, m) {
		return ReasonAborted, true
	}
	// 2. content_filter
	if isContentFilter(t, m) {
		return ReasonContentFilter, true
	}
	// 3. auth_permanent
	if isAuthPermanent(t, m) {
		return ReasonAuthPermanent, true
	}
	// 4. billing (C1: before every transient rule; C2: whatever the status)
	if isOpenRouter && hit(m, catORKeyLimit) {
		return ReasonBilling, true
	}
	// 5. Alibaba token plan: "quota has been exhausted ... will reset at" (C1)
	if hit(m, catQuotaExhausted) {
		return ReasonBilling, true
	}
	if isBilling(t, m) {
		return ReasonBilling, true
	}
	// 6. periodic usage windows and self-set spend caps (C3)
	if isUsageWindow(t, m) {
		return ReasonRateLimit, true
	}
	// 7. context_overflow (C8), incl. 413 and "Limit X, Requested Y" with Y > X
	if status == 413 || isContextOverflow(t, m) {
		return ReasonContextOverflow, true
	}
	// 8. overloaded (C5), also when sent as 429
	if status == 529 || isOverloaded(t, m) {
		return ReasonOverloaded, true
	}
	// 9. rate_limit (C4)
	if status == 429 || isRateLimit(t, m) {
		return ReasonRateLimit, true
	}
	// model-specific access denials read like auth; they are about the model.
	if isModelAccess(t, m) {
		return ReasonModelNotFound, true
	}
	// 10. auth
	if isAuth(t, m) {
		return ReasonAuth, true
	}
	// 11. model_not_found
	if isModelNotFound(t, m) {
		return ReasonModelNotFound, true
	}
	// 12. format (C9); a server error's text about parsing is not the caller's format
	if formatStatus(status) && isFormat(t, m) {
		return ReasonFormat, true
	}
	// 13. timeout-like (C6)
	if isOpenRouter && strings.Contains(t, "provider returned error") && !ev.hasRaw {
		return ReasonTimeout, true
	}
	if isTimeoutText(t, m, ev) {
		return ReasonTimeout, true
	}
	return "", false
}

// formatStatus: statuses where format wording means a bad request; a 401/403/404
// or a server error that mentions "not supported" or "failed to parse" is not the
// caller's format (C9).
func formatStatus(status int) bool {
	switch {
	case status < 400:
		return true
	case status == 400, status == 405, status == 406, status == 409, status == 411, status == 415, status == 422:
		return true
	}
	return false
}

// statusReason is the fallback when no text rule fired.
func statusReason(status int, ev *evidence) Reason {
	switch {
	case status == 401, status == 403, status == 407:
		return ReasonAuth
	case status == 402:
		return ReasonBilling
	case status == 404:
		return ReasonModelNotFound
	case status == 408, status == 410, status == 425, status == 499:
		return ReasonTimeout
	case status == 413:
		return ReasonContextOverflow
	case status == 429:
		return ReasonRateLimit
	case status == 529:
		return ReasonOverloaded
	case status == 500, status == 501:
		// A 500 with a specific, unrecognised message (e.g. a local runtime out of
		// memory) is not a failover signal by itself (C7); an empty or HTML 500 is.
		if !ev.hasBody || ev.isHTML {
			return ReasonTimeout
		}
		return ReasonUnclassified
	case status >= 502 && status <= 599:
		return ReasonTimeout
	case status >= 400 && status < 500:
		return ReasonFormat
	}
	return ReasonUnclassified
}

// isTransportErr recognises network failures by type (C6).
func isTransportErr(err error) bool {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	for _, e := range []error{syscall.ECONNRESET, syscall.ECONNREFUSED, syscall.ECONNABORTED,
		syscall.EPIPE, syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ENETDOWN,
		syscall.EHOSTDOWN, syscall.ENETRESET} {
		if errors.Is(err, e) {
			return true
		}
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return false
}

// recovery picks one recovery signal (C11); see Classify.
func recovery(r Response, ev *evidence, reason Reason, now time.Time) (time.Duration, time.Time) {
	lh := lowerHeaders(r.Headers)
	if d, at, ok := retryAfterHeader(lh, now); ok {
		return d, at
	}
	if hit(ev.mask, catRecoveryWords) {
		if d, at, ok := findRecovery(ev.text, now); ok {
			if at.IsZero() {
				return d, now.Add(d)
			}
			return waitUntil(at, now), at
		}
	}
	if d, at, ok := retryAfterHeader(ev.hdrs, now); ok {
		return d, at
	}
	// x-ratelimit-reset-* describe the rate-limit buckets; they say nothing about
	// a content filter or a bad key sent with them.
	if reason == ReasonRateLimit {
		if d, at, ok := resetHeaders(lh, now); ok {
			return d, at
		}
		if d, at, ok := resetHeaders(ev.hdrs, now); ok {
			return d, at
		}
	}
	return 0, time.Time{}
}
