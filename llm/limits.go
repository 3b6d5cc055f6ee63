package llm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/redact"
)

// Default caps on what a provider may send (T1); config limits.* overrides them.
const (
	DefaultMaxResponseBytes = 8 << 20 // limits.max_response_bytes
	DefaultMaxAnswerBytes   = 1 << 20 // limits.max_answer_bytes
)

// maxHeaderBytes bounds a response's headers (Go's default is 10 MB).
const maxHeaderBytes = 1 << 20

// ErrRefused is matched (errors.Is) by every *RefusedError.
var ErrRefused = errors.New("llm: provider response refused")

// RefusedWords start every refusal people read (A2).
const RefusedWords = "response refused by detour"

// RefusedError is a provider response the client would not take: larger than a
// cap (T1), compressed although it asked for no compression (T1), or a redirect
// (T2). It is the provider's fault, not a format error (A2): the attempt fails
// with reason refused_response (class transient), so the profile cools down
// like after a server error and the next profile and candidate are tried.
type RefusedError struct {
	Rule   string // what was broken: a config key such as "limits.max_response_bytes", "content-encoding" or "redirect"
	Status int    // the HTTP status of a refused redirect, else 0
	Why    string // what was refused, in plain words and without secrets: "redirect to https://host/… (HTTP 307, never followed)"
}

func (e *RefusedError) Error() string        { return RefusedWords + ": " + e.Why }
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

func bodyTooLarge(limit int64) *RefusedError {
	return &RefusedError{Rule: "limits.max_response_bytes",
		Why: fmt.Sprintf("body larger than limits.max_response_bytes (%d bytes)", limit)}
}

func lineTooLong(limit int64) *RefusedError {
	return &RefusedError{Rule: "stream line",
		Why: fmt.Sprintf("stream line longer than %d bytes (twice limits.max_answer_bytes plus 64 KiB)", limit)}
}

func answerTooLarge(limit int) *RefusedError {
	return &RefusedError{Rule: "limits.max_answer_bytes",
		Why: fmt.Sprintf("answer longer than limits.max_answer_bytes (%d bytes)", limit)}
}

// streamLineCap bounds one SSE line: room for a whole answer in one chunk, even
// with JSON escaping of part of it, and never more than the body may hold.
func streamLineCap(maxResponse int64, maxAnswer int) int64 {
	return min(maxResponse, 2*int64(maxAnswer)+64<<10)
}

// refuseRedirect is the http.Client's CheckRedirect: a provider's redirect is
// a failed attempt (T2). The redirected request is never sent, so neither the
// key nor the prompt leaves for the new location. The location is named by its
// scheme and host only, resolved against the provider's URL: its path and query
// may carry a secret (a signed URL, a key in the query), and people read this
// text (A2).
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	status := 0
	if req.Response != nil {
		status = req.Response.StatusCode
	}
	return &RefusedError{Rule: "redirect", Status: status,
		Why: fmt.Sprintf("redirect to %s (HTTP %d, never followed)", redirectTarget(req.URL), status)}
}

// redirectTarget names where a redirect pointed without anything that may be
// secret: "https://host/…", with user info, path and query left out (T8).
func redirectTarget(u *url.URL) string {
	if u == nil || u.Host == "" {
		return "an unknown location"
	}
	s := u.Scheme + "://" + truncate(u.Host, 100)
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		s += "/…"
	}
	return redact.Secrets(s)
}

// boundTransport keeps every response within the client's caps (T1). It asks for
// no compression and refuses a Content-Encoding anyway (so there is no inflated
// size to bound), and wraps the body so that reading past max bytes, or past
// maxLine bytes without a newline in a stream, fails with a *RefusedError.
type boundTransport struct {
	base    http.RoundTripper
	max     int64 // whole body
	maxLine int64 // one line of an event stream
}

func (t *boundTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	// An explicit Accept-Encoding also stops Go's transport from adding gzip and
	// inflating on its own, whatever transport the caller gave us.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if ce := resp.Header.Get("Content-Encoding"); resp.Uncompressed || (ce != "" && !strings.EqualFold(ce, "identity")) {
		_ = resp.Body.Close()
		if ce == "" {
			ce = "gzip"
		}
		return nil, &RefusedError{Rule: "content-encoding",
			Why: fmt.Sprintf("compressed body (Content-Encoding %q, HTTP %d), which was not asked for", truncate(ce, 40), resp.StatusCode)}
	}
	b := &boundedBody{rc: resp.Body, max: t.max}
	if req.Header.Get("Accept") == "text/event-stream" {
		b.maxLine = t.maxLine
	}
	resp.Body = b
	return resp, nil
}

// boundedBody reads at most max bytes, and lines of at most maxLine bytes (0 =
// no line cap); past either it returns a *RefusedError, and keeps returning it.
type boundedBody struct {
	rc      io.ReadCloser
	max     int64
	maxLine int64
	n       int64 // bytes read
	line    int64 // bytes since the last newline
	err     error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	// Read at most one byte past the cap: enough to know it was passed.
	if rest := b.max - b.n + 1; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := b.rc.Read(p)
	var refused error
	if over := b.n + int64(n) - b.max; over > 0 {
		n, refused = n-int(over), bodyTooLarge(b.max)
	}
	if b.maxLine > 0 {
		if cut, ok := b.scanLines(p[:n]); !ok {
			n, refused = cut, lineTooLong(b.maxLine)
		}
	}
	b.n += int64(n)
	if refused != nil {
		b.err = refused
		return n, refused
	}
	return n, err
}

// scanLines advances the current line length over p; when a line passes
// maxLine it reports how many bytes of p are within the cap.
func (b *boundedBody) scanLines(p []byte) (int, bool) {
	off := 0
	for {
		i := bytes.IndexByte(p[off:], '\n')
		if i < 0 {
			if b.line+int64(len(p)-off) > b.maxLine {
				return off + int(b.maxLine-b.line), false
			}
			b.line += int64(len(p) - off)
			return len(p), true
		}
		if b.line+int64(i) > b.maxLine {
			return off + int(b.maxLine-b.line), false
		}
		b.line = 0
		off += i + 1
	}
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// keepVerdict overrides the classifier where the client already knows the
// verdict: a refused response is refused_response naming what was refused (A2,
// T1, T2), a stop reason that is a failure is what classify.Finish says (R14),
// and one of our own faults is local (A4).
func keepVerdict(f *failover.Failure, err error) {
	var re *RefusedError
	var se *stopError
	switch {
	case errors.As(err, &re):
		f.Reason, f.Class, f.Message, f.Code = classify.ReasonRefusedResponse, classify.ReasonClass(classify.ReasonRefusedResponse), re.Why, ""
		f.RetryAfter, f.RecoveryAt, f.Idle = 0, time.Time{}, false
		if re.Status != 0 {
			f.Status = re.Status
		}
	case errors.As(err, &se):
		f.Reason, f.Class, f.Message, f.Code = se.reason, classify.ReasonClass(se.reason), se.Error(), ""
	case localTransport(err):
		f.Reason, f.Class = classify.ReasonLocal, classify.ReasonClass(classify.ReasonLocal)
	}
}

// stopError is an answer whose stop reason is a failure (R14): a filter, an
// error stop, or one detour does not know.
type stopError struct {
	stop   string
	reason classify.Reason
}

func (e *stopError) Error() string {
	if e.reason == classify.ReasonUnclassified {
		return "unknown stop reason: " + truncate(e.stop, 100)
	}
	return "stop reason: " + e.stop
}

// localTransport reports a transport failure on our side of the network: the
// dial to a configured proxy failed (Go's "proxyconnect" operation), so the
// provider was never reached (A4). A provider that refuses connections (a local
// model server that is down) is not this: that is the provider's failure (C6).
func localTransport(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "proxyconnect"
}
