// Package opsserver is detour's operations endpoint (M5), served when
// server.listen is set: /healthz (the process is up), /readyz (the database
// answers and every enabled channel is connected) and /metrics (Prometheus text
// format, on a registry of its own: turns, model calls, fallbacks, guard
// refusals, local failures, profile and model availability read at scrape time,
// and the Go runtime and process collectors). The endpoint serves a bounded
// number of connections with read, write and idle timeouts, so a flood of idle
// connections cannot take the descriptors the bot needs (A4).
package opsserver

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/sessions"
)

// Availability is what is usable now, read from the engine's durable state
// at scrape time: profile id → usable, model ref → usable.
type Availability struct {
	Profiles map[string]bool
	Models   map[string]bool
}

// AvailabilityFunc reads the availability; it must honour ctx.
type AvailabilityFunc func(ctx context.Context) (Availability, error)

// stateTimeout bounds the read of the engine's state during a scrape.
const stateTimeout = 3 * time.Second

// turnBuckets spans a cached answer to a turn that walked a slow chain
// (seconds); the run timeout caps turns at 30 minutes.
var turnBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600}

// Other is the label value of a model or provider the configuration does not
// name (M6).
const Other = "other"

// Names are the configured names the model and provider labels may carry (M6):
// anything else is counted as Other, so a name people choose (a model matching
// an allow pattern such as openai/*) cannot add label values without bound. The
// zero Names restricts nothing (tests).
type Names struct {
	Models    []string // provider/model refs: the chains, agents and models: entries
	Providers []string
}

// labels maps names to label values.
type labels struct {
	open      bool // no restriction
	models    map[string]bool
	providers map[string]bool
}

func newLabels(n Names) labels {
	l := labels{open: len(n.Models) == 0 && len(n.Providers) == 0, models: map[string]bool{}, providers: map[string]bool{}}
	for _, m := range n.Models {
		l.models[m] = true
	}
	for _, p := range n.Providers {
		l.providers[p] = true
	}
	return l
}

// provider is the label of a provider.
func (l labels) provider(p string) string {
	if l.open || l.providers[p] {
		return p
	}
	return Other
}

// model is the label of a model of provider p ("gpt-4o"), as its provider's.
func (l labels) model(p, m string) string {
	if l.open || l.models[p+"/"+m] {
		return m
	}
	return Other
}

// ref is the label of a "provider/model" ref.
func (l labels) ref(r string) string {
	if l.open || l.models[r] {
		return r
	}
	return Other
}

// Metrics is detour's metrics on a registry of their own (no global state, so
// several systems in one test process do not collide). It implements
// sessions.Observer and is safe for concurrent use.
type Metrics struct {
	reg    *prometheus.Registry
	labels labels

	llmCalls     *prometheus.CounterVec
	llmProbes    *prometheus.CounterVec
	llmDuration  *prometheus.HistogramVec
	llmTokens    *prometheus.CounterVec
	llmCost      *prometheus.CounterVec
	skips        *prometheus.CounterVec
	fallbacks    *prometheus.CounterVec
	turns        *prometheus.CounterVec
	turnDuration *prometheus.HistogramVec
	turnOverhead prometheus.Histogram
	guard        *prometheus.CounterVec
	local        prometheus.Counter
	opsRefused   prometheus.Counter

	refusedLog atomic.Int64 // unix seconds of the last refused-connection log line
}

var _ sessions.Observer = (*Metrics)(nil)

// counterVec is a counter of name with help, by labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// NewMetrics registers detour's metrics, the Go runtime and process
// collectors, and (when avail is set) the availability gauges read at scrape
// time. Model and provider labels take only names (M6). log receives a failed
// availability read.
func NewMetrics(avail AvailabilityFunc, names Names, log *slog.Logger) *Metrics {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{reg: prometheus.NewRegistry(), labels: newLabels(names)}
	m.llmCalls = counterVec("detour_llm_calls_total",
		`Paid model calls by provider, model, outcome ("ok" or the failure: rate_limit, billing, server_error, timeout, ...) and the HTTP status of a failure ("500", "429", "4xx", "none"; "" for ok).`,
		"provider", "model", "outcome", "status")
	m.llmProbes = counterVec("detour_llm_probes_total",
		`Checks of a provider that is down or cooling down: the smallest request (a one-word prompt, one output token, no conversation), by provider, model, outcome ("ok" or the failure) and the HTTP status of a failure. Not counted in detour_llm_calls_total (E1, E6).`,
		"provider", "model", "outcome", "status")
	m.llmDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "detour_llm_call_duration_seconds",
		Help:    "Duration of paid model calls, failed or not, by provider.",
		Buckets: turnBuckets,
	}, []string{"provider"})
	// U5: labels are the configured provider and model names only; never a
	// user, a channel or anything a person typed.
	m.llmTokens = counterVec("detour_llm_tokens_total",
		`Tokens of paid model calls by provider, model, direction ("input", "output") and source ("reported" by the provider, or "estimated" when it sent no usage).`,
		"provider", "model", "direction", "source")
	m.llmCost = counterVec("detour_llm_cost_usd_total",
		"Estimated cost in USD of paid model calls, from the configured prices (models.<ref>.usd_per_mtok_*), by provider and model.",
		"provider", "model")
	m.skips = counterVec("detour_candidate_skips_total",
		"Chain candidates skipped without a call (cooling down, disabled, context window too small), by provider, model and reason.",
		"provider", "model", "reason")
	m.fallbacks = counterVec("detour_fallbacks_total",
		"Steps of a run from one model to the next (provider/model), by the reason it left the first (server_error for a 5xx, never timeout).",
		"from", "to", "reason")
	m.turns = counterVec("detour_turns_total",
		`Finished turns by channel and outcome: "ok", "fallback" (answered by a later candidate), or why no answer came ("exhausted", a failure reason, "paid_call_guard", "storage_error", ...).`,
		"channel", "outcome")
	m.turnDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "detour_turn_duration_seconds",
		Help:    "Duration of a turn, from its start to its answer or error, by channel.",
		Buckets: turnBuckets,
	}, []string{"channel"})
	m.turnOverhead = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "detour_turn_overhead_seconds",
		Help:    "The bot's own share of a turn: its duration less the time spent in model calls (database, routing, posting).",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
	})
	m.guard = counterVec("detour_guard_rejections_total",
		`Turns refused a paid call by a limit: "paid_calls_per_minute" (limits.max_paid_attempts_per_minute) or "turn_budget" (agents.defaults.budget).`,
		"guard")
	m.local = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "detour_local_failures_total",
		Help: "Attempts that failed on detour's own side (out of file descriptors or memory, its own cancellation, a local proxy refusing): no provider, profile or model is blamed (A4).",
	})
	m.opsRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "detour_ops_connections_refused_total",
		Help: "Connections to this endpoint closed at once because it already served its limit of connections (A4).",
	})
	m.reg.MustRegister(m.llmCalls, m.llmProbes, m.llmDuration, m.llmTokens, m.llmCost, m.skips, m.fallbacks, m.turns, m.turnDuration, m.turnOverhead, m.guard, m.local, m.opsRefused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, g := range []string{sessions.GuardPerMinute, sessions.GuardTurnBudget} {
		m.guard.WithLabelValues(g) // present at 0 before the first refusal, so alerts see the series
	}
	if avail != nil {
		m.reg.MustRegister(&availabilityCollector{read: avail, log: log})
	}
	return m
}

// Registry is the registry /metrics serves.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Attempt counts one paid call, or one skipped candidate.
func (m *Metrics) Attempt(a failover.AttemptRecord) {
	c := a.Candidate
	provider, model := m.labels.provider(c.Provider), m.labels.model(c.Provider, c.Model)
	if a.Skipped != "" {
		m.skips.WithLabelValues(provider, model, string(a.Skipped)).Inc()
		return
	}
	if a.Failure != nil && a.Failure.Reason == classify.ReasonLocal {
		m.local.Inc() // A4: not a provider's call outcome
		return
	}
	outcome, status := "ok", ""
	if f := a.Failure; f != nil {
		outcome, status = failureOutcome(f.Reason, f.Status), StatusLabel(f.Status)
	}
	if a.Kind == failover.AttemptProbe {
		m.llmProbes.WithLabelValues(provider, model, outcome, status).Inc() // E6: what an outage costs, apart from turns
		return
	}
	m.llmCalls.WithLabelValues(provider, model, outcome, status).Inc()
	m.llmDuration.WithLabelValues(provider).Observe(a.Duration.Seconds())
	source := "reported"
	if a.UsageEstimated {
		source = "estimated"
	}
	if a.InputTokens > 0 {
		m.llmTokens.WithLabelValues(provider, model, "input", source).Add(float64(a.InputTokens))
	}
	if a.OutputTokens > 0 {
		m.llmTokens.WithLabelValues(provider, model, "output", source).Add(float64(a.OutputTokens))
	}
	if a.CostUSD > 0 {
		m.llmCost.WithLabelValues(provider, model).Add(a.CostUSD)
	}
}

// Fallback counts one step from one model to the next.
func (m *Metrics) Fallback(from, to string, reason classify.Reason, status int) {
	m.fallbacks.WithLabelValues(m.labels.ref(from), m.labels.ref(to), failureOutcome(reason, status)).Inc()
}

// refusedConn returns what the endpoint's connection limit calls for each
// connection it closes: a count, and a log line at most once a minute.
func (m *Metrics) refusedConn(log *slog.Logger) func() {
	return func() {
		m.opsRefused.Inc()
		now := time.Now().Unix()
		if last := m.refusedLog.Load(); now-last >= 60 && m.refusedLog.CompareAndSwap(last, now) {
			log.Warn("operations endpoint: connection limit reached; closing new connections (A4)")
		}
	}
}

// GuardRejected counts one turn refused by a limit.
func (m *Metrics) GuardRejected(guard string) { m.guard.WithLabelValues(guard).Inc() }

// TurnDone counts one finished turn and its duration.
func (m *Metrics) TurnDone(t sessions.TurnReport) {
	m.turns.WithLabelValues(t.Channel, t.Outcome).Inc()
	m.turnDuration.WithLabelValues(t.Channel).Observe(t.Duration.Seconds())
	if own := t.Duration - t.LLMTime; own >= 0 {
		m.turnOverhead.Observe(own.Seconds())
	}
}

// availabilityCollector reads the engine's state at each scrape, so the gauges
// are as fresh as the database (and agree across replicas).
type availabilityCollector struct {
	read AvailabilityFunc
	log  *slog.Logger
}

var (
	profileDesc = prometheus.NewDesc("detour_profile_available",
		"1 when the auth profile can serve at least one configured model now (no cooldown, disable or expiry blocking it), else 0.",
		[]string{"profile"}, nil)
	modelDesc = prometheus.NewDesc("detour_model_available",
		"1 when the configured model has a usable profile now and is not marked down itself, else 0.",
		[]string{"model"}, nil)
)

func (c *availabilityCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- profileDesc
	ch <- modelDesc
}

func (c *availabilityCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	a, err := c.read(ctx)
	if err != nil {
		// The other metrics still serve; the gauges are absent, not wrong.
		c.log.Warn("metrics: reading profile availability", "err", err)
		ch <- prometheus.NewInvalidMetric(profileDesc, err)
		return
	}
	for id, ok := range a.Profiles {
		ch <- prometheus.MustNewConstMetric(profileDesc, prometheus.GaugeValue, gauge(ok), id)
	}
	for ref, ok := range a.Models {
		ch <- prometheus.MustNewConstMetric(modelDesc, prometheus.GaugeValue, gauge(ok), ref)
	}
}

func gauge(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}
