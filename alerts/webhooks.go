package alerts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/detourbot/detour/failover"
)

// Hook is one webhook (alerts.webhooks[i]).
type Hook struct {
	URL    string
	Secret []byte // the HMAC key; never logged, never sent
	Events []Type // the event types it receives; empty = every type
}

// Options configure a Dispatcher. Zero values take the defaults named.
type Options struct {
	Hooks []Hook
	// DB is the shared database the claims live in (alert_deliveries); nil =
	// in memory, for one process.
	DB    *gorm.DB
	Clock failover.Clock // nil = the wall clock; the backoff waits on it
	Log   *slog.Logger   // nil = discard
	// Client sends the requests; nil = one of the Dispatcher's own, which
	// follows no redirect (the signature is for the configured URL).
	Client      *http.Client
	QueueSize   int           // events waiting per hook (256); a full queue drops the event and counts it
	MaxAttempts int           // tries per event and hook, the first included (5)
	Backoff     time.Duration // the wait before the first retry (2s), doubling for each next one
	MaxBackoff  time.Duration // the longest wait between tries (1m)
	Timeout     time.Duration // one try's deadline, answer included (10s)
}

// Outcomes of a delivery, as detour_alert_deliveries_total counts them and
// alert_deliveries.outcome records them.
const (
	OutcomeDelivered = "delivered" // a 2xx answer
	OutcomeFailed    = "failed"    // MaxAttempts tries without a 2xx
	OutcomeDuplicate = "duplicate" // claimed before (another replica, an earlier emission)
)

// Reasons of detour_alert_dropped_total.
const (
	DropQueueFull = "queue_full"
	DropShutdown  = "shutdown"
)

// Dispatcher delivers events to the hooks that want them. Alert never blocks;
// each hook has its own queue and goroutine, so a hook that hangs delays only
// its own events. Start it once; Close stops it.
type Dispatcher struct {
	opts   Options
	clock  failover.Clock
	log    *slog.Logger
	claims claims
	client *http.Client
	hooks  []*hook
	// ownClient: the client is the Dispatcher's, its idle connections closed by Close.
	ownClient bool

	mu     sync.RWMutex // guards closed against Alert's sends
	closed bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	events     *prometheus.CounterVec
	deliveries *prometheus.CounterVec
	failures   *prometheus.CounterVec
	dropped    *prometheus.CounterVec
	queued     prometheus.GaugeFunc
}

type hook struct {
	Hook
	key  string // digest of the URL: the claims' and the logs' name for it
	host string
	q    chan Event
	full atomic.Bool // dropping for a full queue: logged once
}

// New builds a Dispatcher and, with a database, migrates its table. ctx
// bounds the migration only.
func New(ctx context.Context, opts Options) (*Dispatcher, error) {
	if opts.QueueSize <= 0 {
		opts.QueueSize = 256
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 2 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Minute
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	d := &Dispatcher{opts: opts, clock: opts.Clock, log: opts.Log, client: opts.Client}
	if d.clock == nil {
		d.clock = failover.WallClock{}
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.log = d.log.With("component", "alerts")
	if d.client == nil {
		d.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		d.ownClient = true
	}
	for i, h := range opts.Hooks {
		u, err := url.Parse(h.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("alerts: webhook %d: bad URL: want http:// or https://", i)
		}
		if len(h.Secret) == 0 {
			return nil, fmt.Errorf("alerts: webhook %d: no secret", i)
		}
		for _, t := range h.Events {
			if !t.Valid() {
				return nil, fmt.Errorf("alerts: webhook %d: unknown event %q", i, t)
			}
		}
		sum := sha256.Sum256([]byte(h.URL))
		d.hooks = append(d.hooks, &hook{Hook: h, key: hex.EncodeToString(sum[:8]), host: u.Host, q: make(chan Event, opts.QueueSize)})
	}
	if opts.DB != nil {
		c, err := newDBClaims(ctx, opts.DB, d.clock.Now())
		if err != nil {
			return nil, err
		}
		d.claims = c
	} else {
		d.claims = &memClaims{}
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.events = counterVec("detour_alert_events_total", "Alert events queued for a webhook, by type.", "type")
	d.deliveries = counterVec("detour_alert_deliveries_total",
		`Alert deliveries that ended, by type and outcome: "delivered" (a 2xx answer), "failed" (every try failed), "duplicate" (claimed by another replica or an earlier emission: not sent).`,
		"type", "outcome")
	d.failures = counterVec("detour_alert_attempt_failures_total", "Webhook tries that got no 2xx answer (an error status, a timeout, no connection), by type; each is retried until the attempts run out.", "type")
	d.dropped = counterVec("detour_alert_dropped_total", `Alert events dropped without a try: "queue_full" (the hook's queue was full), "shutdown" (still queued when the bot stopped).`, "reason")
	d.queued = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "detour_alert_queue_length", Help: "Alert events waiting in the webhooks' queues."}, func() float64 {
		n := 0
		for _, h := range d.hooks {
			n += len(h.q)
		}
		return float64(n)
	})
	for _, t := range Types {
		d.events.WithLabelValues(string(t))
		for _, o := range []string{OutcomeDelivered, OutcomeFailed, OutcomeDuplicate} {
			d.deliveries.WithLabelValues(string(t), o)
		}
		d.failures.WithLabelValues(string(t))
	}
	d.dropped.WithLabelValues(DropQueueFull)
	d.dropped.WithLabelValues(DropShutdown)
	return d, nil
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Collectors are the Dispatcher's metrics, for /metrics.
func (d *Dispatcher) Collectors() []prometheus.Collector {
	return []prometheus.Collector{d.events, d.deliveries, d.failures, d.dropped, d.queued}
}

// Start runs one goroutine per hook until Close.
func (d *Dispatcher) Start() {
	for _, h := range d.hooks {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.run(h)
		}()
	}
}

// Alert queues e for every hook that wants it, without blocking: when a
// hook's queue is full (its receiver is slow or down), e is dropped for that
// hook and counted. It is safe for concurrent use, and after Close.
func (d *Dispatcher) Alert(e Event) {
	if d == nil {
		return
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return
	}
	for _, h := range d.hooks {
		if len(h.Events) > 0 && !slices.Contains(h.Events, e.Type) {
			continue
		}
		select {
		case h.q <- e:
			d.events.WithLabelValues(string(e.Type)).Inc()
			h.full.Store(false)
		default:
			d.dropped.WithLabelValues(DropQueueFull).Inc()
			if !h.full.Swap(true) { // once until the queue takes an event again, not once per turn
				d.log.Warn("alerts dropped: the webhook's queue is full (its receiver is slow or down)", "webhook", h.host, "type", e.Type, "id", e.ID)
			}
		}
	}
}

// Close stops taking events, delivers those queued until ctx ends, then
// cuts short what still runs (the rest is counted as dropped) and waits for
// every goroutine. It is safe to call more than once.
func (d *Dispatcher) Close(ctx context.Context) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	for _, h := range d.hooks {
		close(h.q) // no send can follow: Alert holds the read lock and sees closed
	}
	d.mu.Unlock()
	done := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		d.cancel()
		<-done
	}
	d.cancel()
	if d.ownClient {
		d.client.CloseIdleConnections()
	}
}

// run delivers h's events in order until its queue is closed and empty.
func (d *Dispatcher) run(h *hook) {
	for e := range h.q {
		if d.ctx.Err() != nil {
			d.dropped.WithLabelValues(DropShutdown).Inc()
			continue
		}
		d.deliver(d.ctx, h, e)
	}
}

// deliver claims e for h, then tries it until a 2xx answer, MaxAttempts, or ctx's end.
func (d *Dispatcher) deliver(ctx context.Context, h *hook, e Event) {
	log := d.log.With("webhook", h.host, "type", e.Type, "id", e.ID)
	body, err := e.Body()
	if err != nil {
		log.Error("alert not sent", "err", err)
		return
	}
	won, err := d.claims.claim(ctx, e, h.key, d.clock.Now())
	if err != nil {
		// Sent all the same: an alert that may arrive twice (receivers drop
		// an id they have seen) beats one lost while the database is unwell.
		log.Warn("alert claim failed; sending unclaimed", "err", err)
		won = true
	}
	if !won {
		d.deliveries.WithLabelValues(string(e.Type), OutcomeDuplicate).Inc()
		return
	}
	wait := d.opts.Backoff
	for attempt := 1; ; attempt++ {
		status, err := d.post(ctx, h, e, body, attempt)
		if err == nil {
			d.finish(h, e, OutcomeDelivered, attempt, status)
			return
		}
		d.failures.WithLabelValues(string(e.Type)).Inc()
		if ctx.Err() != nil {
			d.dropped.WithLabelValues(DropShutdown).Inc()
			return
		}
		if attempt >= d.opts.MaxAttempts {
			log.Warn("alert not delivered", "attempts", attempt, "err", err)
			d.finish(h, e, OutcomeFailed, attempt, status)
			return
		}
		log.Info("alert try failed; trying again", "attempt", attempt, "wait", wait, "err", err)
		if d.clock.Sleep(ctx, wait) != nil {
			d.dropped.WithLabelValues(DropShutdown).Inc()
			return
		}
		wait = min(2*wait, d.opts.MaxBackoff)
	}
}

// finish counts and records the end of a delivery.
func (d *Dispatcher) finish(h *hook, e Event, outcome string, attempts, status int) {
	d.deliveries.WithLabelValues(string(e.Type), outcome).Inc()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), d.opts.Timeout)
	defer cancel()
	if err := d.claims.done(ctx, e, h.key, outcome, attempts, status, d.clock.Now()); err != nil {
		d.log.Warn("alert delivery not recorded", "id", e.ID, "err", err)
	}
}

// errStatus is a try answered with a status other than 2xx.
type errStatus int

func (e errStatus) Error() string { return "HTTP " + strconv.Itoa(int(e)) }

// post makes one try: the signed body, within Timeout. It returns the
// answer's status (0 = none) and an error unless it is 2xx.
func (d *Dispatcher) post(ctx context.Context, h *hook, e Event, body []byte, attempt int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("bad request") // the URL was checked by New; never quote it (it may hold a token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(IDHeader, e.ID)
	req.Header.Set(TypeHeader, string(e.Type))
	req.Header.Set(AttemptHeader, strconv.Itoa(attempt))
	req.Header.Set(SignatureHeader, Sign(h.Secret, d.clock.Now(), body))
	resp, err := d.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, errStatus(resp.StatusCode)
	}
	return resp.StatusCode, nil
}
