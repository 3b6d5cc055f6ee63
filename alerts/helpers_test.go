package alerts

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/detourbot/detour/failover/failovertest"
)

var t0 = time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)

// got is one request a receiver took.
type got struct {
	id, typ, attempt string
	body             map[string]any
	sigErr           error
	status           int // what the receiver answered
}

// receiver is a webhook endpoint on 127.0.0.1 that checks each request as a
// real receiver would (signature, headers, JSON) and answers status(n) to
// the n-th request (1-based); hold, when set, is waited on first.
type receiver struct {
	t      testing.TB
	secret []byte
	now    func() time.Time
	srv    *httptest.Server
	status func(n int) int
	hold   chan struct{} // closed to release held requests; nil = none held
	in     chan struct{} // gets a value when a request arrives (buffered)

	mu   sync.Mutex
	reqs []got
}

func newReceiver(t testing.TB, secret string, now func() time.Time) *receiver {
	r := &receiver{t: t, secret: []byte(secret), now: now, status: func(int) int { return http.StatusOK }, in: make(chan struct{}, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve)) // listens on 127.0.0.1
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	g := got{id: req.Header.Get(IDHeader), typ: req.Header.Get(TypeHeader), attempt: req.Header.Get(AttemptHeader)}
	g.sigErr = Verify(r.secret, req.Header.Get(SignatureHeader), body, r.now(), 5*time.Minute)
	if err := json.Unmarshal(body, &g.body); err != nil {
		r.t.Errorf("body is not JSON: %v: %s", err, body)
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/json" || req.Method != http.MethodPost {
		r.t.Errorf("want a POST of application/json, got %s %s", req.Method, ct)
	}
	r.mu.Lock()
	g.status = r.status(len(r.reqs) + 1)
	r.reqs = append(r.reqs, g)
	r.mu.Unlock()
	r.in <- struct{}{}
	if r.hold != nil {
		select {
		case <-r.hold:
		case <-req.Context().Done():
			return
		}
	}
	w.WriteHeader(g.status)
}

func (r *receiver) got() []got {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]got(nil), r.reqs...)
}

// newTestDispatcher builds and starts a Dispatcher with one hook to r, on a
// virtual clock (its backoff waits are recorded, not waited).
func newTestDispatcher(t testing.TB, r *receiver, clock *failovertest.Clock, opts Options) *Dispatcher {
	t.Helper()
	opts.Hooks = append(opts.Hooks, Hook{URL: r.srv.URL + "/hook", Secret: r.secret})
	opts.Clock = clock
	d, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	t.Cleanup(func() { d.Close(context.Background()) })
	return d
}

// sample is an event for delivery tests.
func sample(n int) Event {
	return NewFallbackStarted(t0, Fallback{Session: "slack:T1:C1", Turn: "turn" + string(rune('a'+n)), Requested: "openai/gpt-4o", Fallback: "anthropic/claude", Reason: "rate_limit", Status: 429})
}

// value reads a counter's or a gauge's value.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}
