package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/redact"
)

// maxErrorBody bounds how much of a non-2xx body is kept.
const maxErrorBody = 64 << 10

// capture holds what the transport saw of one call's response.
type capture struct {
	mu     sync.Mutex
	status int
	header http.Header
	body   []byte
}

func (h *capture) set(status int, header http.Header, body []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status, h.header, h.body = status, header, body
}

func (h *capture) statusCode() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.status
}

// headers returns the captured headers that matter for classification (C11),
// flattened with lower-case keys.
func (h *capture) headers() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.header) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range h.header {
		lk := strings.ToLower(k)
		if len(v) == 0 {
			continue
		}
		if lk == "retry-after" || lk == "retry-after-ms" || strings.HasPrefix(lk, "x-ratelimit-") ||
			lk == "content-type" || strings.HasPrefix(lk, "anthropic-ratelimit-") {
			out[lk] = v[0]
		}
	}
	return out
}

func (h *capture) bodyText() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.body)
}

type captureKey struct{}

func withCapture(ctx context.Context, h *capture) context.Context {
	return context.WithValue(ctx, captureKey{}, h)
}

// captureTransport records status, headers and (for non-2xx) the raw body of
// each response into the capture found in the request context, because
// go-openai drops headers on errors and turns non-JSON bodies into opaque
// errors. It makes exactly one round trip: no retries.
type captureTransport struct{ base http.RoundTripper }

func (t *captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	h, _ := req.Context().Value(captureKey{}).(*capture)
	if h == nil {
		return resp, nil
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		h.set(resp.StatusCode, resp.Header.Clone(), nil)
		return resp, nil
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	h.set(resp.StatusCode, resp.Header.Clone(), body)
	if rerr != nil {
		return nil, rerr
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// call is one request of a Client: when it started, the capture of what the
// provider sent (status, headers, an error body), and the idle watchdog that
// cancels its context with classify.ErrIdleTimeout when the model showed no
// sign of work for IdleTimeout (R5, R8, E4).
type call struct {
	c      *Client
	model  string
	caller context.Context // the caller's ctx
	ctx    context.Context // derived from caller, cut by the watchdog; the request runs on it
	h      *capture
	idle   *time.Timer
	cancel context.CancelCauseFunc
	start  time.Time

	// The streamed answer so far: its usage, text, stop reason as sent, and
	// whether it called a tool; onDelta is shown each piece of text once the
	// answer has visible text (visible).
	out     failover.Output
	text    strings.Builder
	stop    string
	tools   bool
	visible bool // the text holds more than whitespace (E4)
	onDelta func(string)
}

// begin starts a request of model: its capture and its watchdog. The caller
// ends it with done.
func (c *Client) begin(ctx context.Context, model string) *call {
	k := &call{c: c, model: model, caller: ctx, h: &capture{}, start: c.now()}
	k.ctx, k.cancel = context.WithCancelCause(withCapture(ctx, k.h))
	k.idle = time.AfterFunc(c.cfg.IdleTimeout, func() { k.cancel(classify.ErrIdleTimeout) })
	return k
}

// kick tells the watchdog that the model is at work: the response headers
// came, or a piece of real activity (visible answer text, reasoning text, a
// tool call, a stop reason). Keep-alives never kick (E4): SSE comments, ping
// events, chunks with no text or only whitespace say that the connection is
// open, not that the model is answering, so a provider that sends nothing
// else is idle after IdleTimeout rather than after the caller's deadline.
func (k *call) kick() { k.idle.Reset(k.c.cfg.IdleTimeout) }

// visible reports whether s holds answer text people can read: whitespace
// alone is no answer (E4, R13).
func visible(s string) bool { return strings.TrimSpace(s) != "" }

// done stops the watchdog and releases the request's context.
func (k *call) done() {
	k.idle.Stop()
	k.cancel(context.Canceled)
}

// fail turns an error of the request (go-openai's, the transport's, a read's)
// into a *failover.Failure; stream says whether the stream had started.
func (k *call) fail(err error, stream bool) error {
	return k.failResponse(k.normalise(err, stream))
}

// failStream is the failure of a stream that ended (C6, R13, R14): what the
// capture holds of the 200, with err for Classify.
func (k *call) failStream(err error) error {
	return k.failResponse(classify.Response{Status: k.h.statusCode(), Headers: k.h.headers(), Stream: true, Err: err})
}

// normalise builds the Response that Classify sees (C12).
func (k *call) normalise(err error, stream bool) classify.Response {
	caller, wctx, h := k.caller, k.ctx, k.h
	r := classify.Response{Status: h.statusCode(), Headers: h.headers(), Stream: stream}

	// Deadlines and cancellations first: a read error after our own cancel is a
	// symptom, the cause is what matters.
	if wctx.Err() != nil || caller.Err() != nil {
		switch cause := context.Cause(wctx); {
		case errors.Is(cause, classify.ErrIdleTimeout) && caller.Err() == nil:
			r.Err = classify.ErrIdleTimeout
		case caller.Err() != nil && (errors.Is(context.Cause(caller), classify.ErrAttemptTimeout) ||
			errors.Is(caller.Err(), context.DeadlineExceeded)):
			r.Err = fmt.Errorf("%w: %w", classify.ErrAttemptTimeout, context.DeadlineExceeded)
		case caller.Err() != nil:
			r.Err = context.Canceled
		default:
			r.Err = err
		}
		if !stream {
			r.Status = 0
		}
		return r
	}

	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode == 0:
		// SSE error event mid-stream: rebuild the event JSON as the body.
		b, _ := json.Marshal(openai.ErrorResponse{Error: apiErr})
		r.Body = string(b)
		r.Stream = true
	case errors.As(err, &apiErr), errors.As(err, &reqErr):
		// HTTP error: the transport captured status, headers and the raw body.
		r.Body = h.bodyText()
		if r.Status == 0 {
			if apiErr != nil {
				r.Status = apiErr.HTTPStatusCode
			} else {
				r.Status = reqErr.HTTPStatusCode
			}
		}
		if r.Body == "" && reqErr != nil {
			r.Body = string(reqErr.Body)
		}
	default:
		// Transport errors (refused, reset, DNS), truncated reads, client-side
		// validation errors. (ErrTooManyEmptyStreamMessages never comes:
		// openaiConfig lifts go-openai's limit, E4.)
		r.Err = err
		if h.statusCode() >= 400 {
			r.Body = h.bodyText()
		}
		if !stream && h.statusCode() < 400 {
			r.Status = 0
		}
	}
	return r
}

// failResponse builds the Failure of r: classified (C1-C13), with who failed,
// the client's own verdicts (keepVerdict) and the key redacted (P4). It is
// the one place a Failure is made of what a provider sent, for every protocol.
func (k *call) failResponse(r classify.Response) error {
	c, caller, model := k.c, k.caller, k.model
	r.Provider = c.cfg.Provider
	r.Body = c.scrub(r.Body)
	for k, v := range r.Headers {
		r.Headers[k] = c.scrub(v)
	}
	if r.Err != nil {
		r.Err = &scrubbedError{msg: c.scrub(r.Err.Error()), err: r.Err}
	}
	res := c.classify(r, c.now())
	f := failover.FailureFrom(res)
	keepVerdict(&f, r.Err)
	f.Provider, f.Model, f.Profile = c.cfg.Provider, model, c.cfg.ProfileID
	if errors.Is(r.Err, classify.ErrIdleTimeout) {
		f.Idle = true
	}
	if errors.Is(r.Err, context.Canceled) {
		// The caller went away: never a provider failure. A cancellation the
		// caller did not make is one of ours (A4): local, never the provider's.
		f.Reason = classify.ReasonAborted
		if caller.Err() == nil {
			f.Reason = classify.ReasonLocal
		}
		f.Class = classify.ReasonClass(f.Reason)
	}
	// classify returns the provider's words as they came; this client knows the
	// key, so it hides it (and anything shaped like a secret) before anyone
	// logs, shows or stores the message (P4).
	f.Message = redact.Preview(c.scrub(f.Message), previewRunes)
	f.Code = c.scrub(f.Code)
	rule := res.Why.Rule
	if f.Reason != res.Reason {
		rule = "llm/" + string(f.Reason) // the client's own verdict (keepVerdict)
	}
	// The reason as the metrics count it (a 500 is a server_error); the rule
	// keeps the classifier's own verdict.
	c.log.Info("llm call failed", "model", model, "reason", classify.Outcome(f.Reason, f.Status), "status", f.Status,
		"rule", rule, "idle", f.Idle, "stream", r.Stream, "dur", c.now().Sub(k.start), "detail", f.Message)
	return &f
}

// Unconfigured is the failure of a call for which the configuration has no
// client: no key of provider's profile (an auth failure, so the run rotates
// or falls back, R2, and the profile cools down, D1).
func Unconfigured(provider, model, profile string) error {
	return &failover.Failure{Reason: classify.ReasonAuth, Class: classify.ClassDeterministic,
		Message: "no client configured for this provider/profile", Provider: provider, Model: model, Profile: profile}
}

// previewRunes bounds the provider message kept in a Failure.
const previewRunes = 200

// scrub hides this client's key and anything shaped like a secret (P4).
func (c *Client) scrub(s string) string {
	if s == "" {
		return s
	}
	return redact.Known(s, c.key)
}

// scrubbedError keeps errors.Is/As on the original error but shows a redacted text.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
