package alerts

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/failover/failovertest"
)

// A receiver gets the event signed over "timestamp.body" with the hook's
// secret, with the documented headers; a wrong secret fails the check.
func TestDispatcher_SignedDelivery(t *testing.T) {
	clock := failovertest.NewClock(t0)
	r := newReceiver(t, "s3cret-for-the-test", clock.Now)
	d := newTestDispatcher(t, r, clock, Options{})
	e := sample(0)
	d.Alert(e)
	d.Close(context.Background()) // delivers what is queued
	reqs := r.got()
	if len(reqs) != 1 {
		t.Fatalf("want 1 request, got %d", len(reqs))
	}
	g := reqs[0]
	if g.sigErr != nil {
		t.Fatalf("signature: %v", g.sigErr)
	}
	if g.id != e.ID || g.typ != string(FallbackStarted) || g.attempt != "1" || g.body["id"] != e.ID {
		t.Fatalf("headers or body do not name the event: %+v", g)
	}
	body, _ := e.Body()
	sig := Sign([]byte("s3cret-for-the-test"), t0, body)
	if err := Verify([]byte("another secret"), sig, body, t0, time.Minute); err != ErrBadSignature {
		t.Fatalf("a wrong secret must fail: %v", err)
	}
	if err := Verify([]byte("s3cret-for-the-test"), sig, append(body, ' '), t0, time.Minute); err != ErrBadSignature {
		t.Fatalf("a changed body must fail: %v", err)
	}
	if err := Verify([]byte("s3cret-for-the-test"), sig, body, t0.Add(10*time.Minute), 5*time.Minute); err != ErrStale {
		t.Fatalf("an old timestamp must fail: %v", err)
	}
	if got := value(d.deliveries.WithLabelValues(string(FallbackStarted), OutcomeDelivered)); got != 1 {
		t.Fatalf("delivered counter = %v", got)
	}
}

// A receiver that answers 500 gets MaxAttempts tries, the same id each
// time, with exponential waits capped at MaxBackoff on the injected clock;
// then the delivery counts as failed.
func TestDispatcher_BoundedRetriesAgainst500(t *testing.T) {
	clock := failovertest.NewClock(t0)
	r := newReceiver(t, "k", clock.Now)
	r.status = func(int) int { return http.StatusInternalServerError }
	d := newTestDispatcher(t, r, clock, Options{MaxAttempts: 4, Backoff: 2 * time.Second, MaxBackoff: 5 * time.Second})
	e := sample(1)
	d.Alert(e)
	d.Close(context.Background())
	reqs := r.got()
	if len(reqs) != 4 {
		t.Fatalf("want 4 tries, got %d", len(reqs))
	}
	for i, g := range reqs {
		if g.id != e.ID || g.attempt != strconv.Itoa(i+1) || g.sigErr != nil {
			t.Fatalf("try %d: %+v", i+1, g)
		}
	}
	if got, want := clock.Sleeps(), []time.Duration{2 * time.Second, 4 * time.Second, 5 * time.Second}; !slices.Equal(got, want) {
		t.Fatalf("backoff waits %v, want %v", got, want)
	}
	if f := value(d.failures.WithLabelValues(string(FallbackStarted))); f != 4 {
		t.Fatalf("failed tries counted %v, want 4", f)
	}
	if f := value(d.deliveries.WithLabelValues(string(FallbackStarted), OutcomeFailed)); f != 1 {
		t.Fatalf("failed deliveries counted %v, want 1", f)
	}
}

// Retries end at the first 2xx, and the same event alerted again (a second
// emission, as after a retry of the turn's write) is not sent again.
func TestDispatcher_OneDeliveryPerIDAcrossRetries(t *testing.T) {
	clock := failovertest.NewClock(t0)
	r := newReceiver(t, "k", clock.Now)
	r.status = func(n int) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	}
	d := newTestDispatcher(t, r, clock, Options{MaxAttempts: 5})
	e := sample(2)
	d.Alert(e)
	d.Alert(e)
	d.Close(context.Background())
	ok := 0
	for _, g := range r.got() {
		if g.id != e.ID {
			t.Fatalf("another id: %+v", g)
		}
	}
	if n := len(r.got()); n != 3 {
		t.Fatalf("want 3 tries (503, 503, 204), got %d", n)
	}
	ok = int(value(d.deliveries.WithLabelValues(string(FallbackStarted), OutcomeDelivered)))
	dup := value(d.deliveries.WithLabelValues(string(FallbackStarted), OutcomeDuplicate))
	if ok != 1 || dup != 1 {
		t.Fatalf("delivered %d, duplicate %v; want 1 and 1", ok, dup)
	}
}

// A hook gets only the types it subscribes to.
func TestDispatcher_EventsFilter(t *testing.T) {
	clock := failovertest.NewClock(t0)
	r := newReceiver(t, "k", clock.Now)
	d, err := New(context.Background(), Options{Clock: clock, Hooks: []Hook{{URL: r.srv.URL, Secret: []byte("k"), Events: []Type{AllDown, Recovered}}}})
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	d.Alert(sample(3))
	d.Alert(NewRecovered(t0.Add(time.Minute), t0))
	d.Close(context.Background())
	if reqs := r.got(); len(reqs) != 1 || reqs[0].typ != string(Recovered) {
		t.Fatalf("want only the recovered event, got %+v", reqs)
	}
}

// A receiver that hangs never blocks Alert: the hook's queue fills, further
// events are dropped and counted; Close with an ended context cuts the hung
// request short, counts what was left, and stops every goroutine (TestMain's
// leak check).
func TestDispatcher_HangingReceiverNeverBlocks(t *testing.T) {
	clock := failovertest.NewClock(t0)
	r := newReceiver(t, "k", clock.Now)
	r.hold = make(chan struct{}) // never released
	d := newTestDispatcher(t, r, clock, Options{QueueSize: 2, MaxAttempts: 1, Timeout: time.Hour})
	d.Alert(sample(0))
	<-r.in // the worker holds the first event, in the receiver
	for i := 1; i < 10; i++ {
		d.Alert(sample(i)) // returns at once: 2 queued, 7 dropped
	}
	if n := value(d.dropped.WithLabelValues(DropQueueFull)); n != 7 {
		t.Fatalf("dropped for a full queue: %v, want 7", n)
	}
	if n := value(d.queued); n != 2 {
		t.Fatalf("queue length %v, want 2", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d.Close(ctx)
	if n := value(d.dropped.WithLabelValues(DropShutdown)); n != 3 {
		t.Fatalf("dropped at shutdown: %v, want 3 (the hung one and the 2 queued)", n)
	}
	d.Alert(sample(11)) // after Close: ignored, no panic
}

// New refuses what cannot work; the messages never quote the URL (it may
// hold a token).
func TestNew_RefusesBadHooks(t *testing.T) {
	for _, h := range []Hook{
		{URL: "ftp://x.example/secret-token", Secret: []byte("k")},
		{URL: "https://x.example/secret-token"},
		{URL: "https://x.example/secret-token", Secret: []byte("k"), Events: []Type{"fallback"}},
	} {
		_, err := New(context.Background(), Options{Hooks: []Hook{h}})
		if err == nil {
			t.Fatalf("%+v: want an error", h)
		}
		if s := err.Error(); strings.Contains(s, "secret-token") {
			t.Fatalf("the error quotes the URL: %s", s)
		}
	}
}
