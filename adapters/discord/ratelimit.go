package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// apiPrefix is the path every discordgo REST call starts with.
const apiPrefix = "/api/v9"

// errRateLimited marks a call that stayed rate limited, or would have to wait
// longer than MaxRateLimitWait.
var errRateLimited = errors.New("discord: rate limited")

// transport is the HTTP client discordgo uses for every REST call. It is the one
// place that honours Discord's rate limits, because discordgo v0.29.0 sleeps
// silently and uncancellably in its own limiter and ignores a global 429 that
// carries no X-RateLimit-Reset-After (which is how Discord sends them):
//
//   - a global 429 (X-RateLimit-Global, X-RateLimit-Scope: global, or "global": true
//     in the body) starts one process-wide pause that every route waits out, with
//     one sleeper for all of them; interaction endpoints are exempt, as Discord
//     documents;
//   - a route's bucket (X-RateLimit-Remaining: 0 with X-RateLimit-Reset-After, or a
//     per-route 429's retry_after) is waited out before the route's next request,
//     so no request is sent that Discord would refuse (each refused one counts
//     toward the invalid-request limit);
//   - the X-RateLimit-* headers are removed before discordgo reads them, so its own
//     limiter never sleeps;
//   - each request gets its own timeout after the wait, so waiting out a limit
//     never eats into the request's time;
//   - discordgo's gateway lookup (GET /gateway) is answered from what the gateway
//     supervisor decided (the URL from GET /gateway/bot, or the session's
//     resume_gateway_url), without a request.
type transport struct {
	base    http.RoundTripper
	target  *url.URL // nil = discord.com itself
	timeout time.Duration
	lim     *limiter
	// gateway returns the URL to answer discordgo's gateway lookup with; "" = ask
	// Discord.
	gateway func() string
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.TrimSuffix(req.URL.Path, "/") == apiPrefix+"/gateway" && t.gateway != nil {
		if u := t.gateway(); u != "" {
			return localJSON(req, map[string]string{"url": u}), nil
		}
	}
	r := req
	if t.target != nil && strings.EqualFold(req.URL.Host, "discord.com") {
		r = req.Clone(req.Context())
		r.URL.Scheme = t.target.Scheme
		r.URL.Host = t.target.Host
		if p := strings.TrimRight(t.target.Path, "/"); p != "" {
			r.URL.Path = p + r.URL.Path
			if r.URL.RawPath != "" {
				r.URL.RawPath = p + r.URL.RawPath
			}
		}
		r.Host = t.target.Host
	}
	rt := routeOf(req.Method, req.URL.Path)
	if err := t.waitTurn(req.Context(), rt); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), t.timeout)
	resp, err := t.base.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	t.lim.observe(rt, resp)
	return resp, nil
}

// waitPolicy changes how a request waits for its turn under a rate limit.
type waitPolicy struct {
	// drop: fail at once rather than wait (the typing indicator: a late one is
	// worthless, and it must never hold a bucket another call needs).
	drop bool
	// abandon, when done, ends the wait (but never a request already sent: a
	// message post cut short might be posted anyway, unknown to us).
	abandon context.Context
}

type waitPolicyKey struct{}

// withWaitPolicy marks ctx's requests with p.
func withWaitPolicy(ctx context.Context, p waitPolicy) context.Context {
	return context.WithValue(ctx, waitPolicyKey{}, p)
}

// waitTurn waits until a request on rt may go, as its context's policy says.
func (t *transport) waitTurn(ctx context.Context, rt route) error {
	p, _ := ctx.Value(waitPolicyKey{}).(waitPolicy)
	if p.drop {
		if d := t.lim.due(rt); d > 0 {
			return fmt.Errorf("discord: %s: rate limited for %v, dropped: %w", rt.key, d, errRateLimited)
		}
	}
	if p.abandon != nil {
		wctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(p.abandon, cancel)
		defer func() { stop(); cancel() }()
		ctx = wctx
	}
	return t.lim.wait(ctx, rt)
}

// cancelOnClose ends a request's timeout once its body has been read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

func localJSON(req *http.Request, v any) *http.Response {
	b, _ := json.Marshal(v)
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/json"}},
		Body:    io.NopCloser(bytes.NewReader(b)),
		Request: req, ContentLength: int64(len(b)),
	}
}

// route is a request's rate-limit identity: its method and path template, and the
// top-level resource (channel, guild, webhook) Discord computes buckets per.
type route struct {
	key         string // "POST /channels/{major}/messages"
	major       string // "123"
	interaction bool   // an interaction endpoint: exempt from the global limit
}

func routeOf(method, path string) route {
	p := strings.Trim(strings.TrimPrefix(path, apiPrefix), "/")
	segs := strings.Split(p, "/")
	r := route{}
	switch segs[0] {
	case "channels", "guilds":
		if len(segs) > 1 {
			r.major, segs[1] = segs[1], "{major}"
		}
	case "webhooks":
		if len(segs) > 2 {
			r.major, segs[1], segs[2] = segs[1]+"/"+segs[2], "{major}", "{token}"
			r.interaction = true // this bot only posts through interaction webhooks
		}
	case "interactions":
		r.interaction = true
		if len(segs) > 2 {
			r.major, segs[1], segs[2] = segs[1], "{major}", "{token}"
		}
	}
	for i, s := range segs {
		if s != "" && strings.Trim(s, "0123456789") == "" {
			segs[i] = "{id}"
		}
	}
	r.key = method + " /" + strings.Join(segs, "/")
	return r
}

// limiter holds the global pause and the empty buckets. Time comes from now, waits
// from sleep, both injectable so tests never wait.
type limiter struct {
	now     func() time.Time
	sleep   func(context.Context, time.Duration) error
	maxWait time.Duration
	log     *slog.Logger

	mu     sync.Mutex
	pause  *pause
	hashes map[string]string    // route key -> X-RateLimit-Bucket
	resets map[string]time.Time // bucket -> when it has requests again (empty buckets only)
}

// pause is one global rate-limit pause: one waiter sleeps, the others wait for it.
type pause struct {
	until    time.Time
	sleeping bool
	wake     chan struct{} // closed when the sleeper stops; replaced for the next one
}

func newLimiter(now func() time.Time, sleep func(context.Context, time.Duration) error, maxWait time.Duration, log *slog.Logger) *limiter {
	return &limiter{now: now, sleep: sleep, maxWait: maxWait, log: log,
		hashes: map[string]string{}, resets: map[string]time.Time{}}
}

func (l *limiter) bucket(r route) string {
	if h := l.hashes[r.key]; h != "" {
		return h + "|" + r.major
	}
	return r.key + "|" + r.major
}

// due is how long a request on r would wait now (0: it may go).
func (l *limiter) due(r route) time.Duration {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var d time.Duration
	if l.pause != nil && !r.interaction {
		d = l.pause.until.Sub(now)
	}
	if until, ok := l.resets[l.bucket(r)]; ok {
		d = max(d, until.Sub(now))
	}
	return max(d, 0)
}

// wait returns when a request on r may go: after the global pause (unless r is an
// interaction endpoint) and after r's bucket refills.
func (l *limiter) wait(ctx context.Context, r route) error {
	if !r.interaction {
		if err := l.waitGlobal(ctx); err != nil {
			return err
		}
	}
	l.mu.Lock()
	b := l.bucket(r)
	until, ok := l.resets[b]
	l.mu.Unlock()
	if !ok {
		return nil
	}
	d := until.Sub(l.now())
	if d <= 0 {
		return nil
	}
	if d > l.maxWait {
		return fmt.Errorf("discord: %s: rate-limit bucket empty for %v: %w", r.key, d, errRateLimited)
	}
	l.log.Info("discord rate-limit bucket empty, waiting", "route", r.key, "wait", d)
	if err := l.sleep(ctx, d); err != nil {
		return fmt.Errorf("discord: %s: waiting for the rate-limit bucket: %w", r.key, err)
	}
	return nil
}

func (l *limiter) waitGlobal(ctx context.Context) error {
	for {
		l.mu.Lock()
		p := l.pause
		if p == nil {
			l.mu.Unlock()
			return nil
		}
		d := p.until.Sub(l.now())
		if d <= 0 { // over: end it and let the others go
			l.pause = nil
			close(p.wake)
			l.mu.Unlock()
			return nil
		}
		if d > l.maxWait {
			l.mu.Unlock()
			return fmt.Errorf("discord: global rate limit for %v: %w", d, errRateLimited)
		}
		if p.sleeping {
			wake := p.wake
			l.mu.Unlock()
			l.log.Debug("discord request waits for the global rate limit", "left", d)
			select {
			case <-wake:
				continue
			case <-ctx.Done():
				return fmt.Errorf("discord: waiting out the global rate limit: %w", ctx.Err())
			}
		}
		p.sleeping = true
		l.mu.Unlock()
		err := l.sleep(ctx, d)
		l.mu.Lock()
		p.sleeping = false
		if err != nil { // cancelled: another waiter takes over the sleeping
			close(p.wake)
			p.wake = make(chan struct{})
			l.mu.Unlock()
			return fmt.Errorf("discord: waiting out the global rate limit: %w", err)
		}
		l.mu.Unlock()
		// Look again: the pause is over (ended above, waking the others) or it
		// was extended meanwhile (sleep the rest).
	}
}

// rateLimitHeaders are removed before discordgo sees a response.
var rateLimitHeaders = []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
	"X-RateLimit-Reset-After", "X-RateLimit-Bucket", "X-RateLimit-Global", "X-RateLimit-Scope"}

// observe learns from one response: its bucket's state, or the 429's wait.
func (l *limiter) observe(r route, resp *http.Response) {
	h := resp.Header
	hash := h.Get("X-RateLimit-Bucket")
	remaining := h.Get("X-RateLimit-Remaining")
	resetAfter := parseSeconds(h.Get("X-RateLimit-Reset-After"))
	scope := strings.ToLower(h.Get("X-RateLimit-Scope"))
	global := h.Get("X-RateLimit-Global") != "" || scope == "global"

	var retryAfter time.Duration
	if resp.StatusCode == http.StatusTooManyRequests {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		var b struct {
			RetryAfter float64 `json:"retry_after"`
			Global     bool    `json:"global"`
		}
		if json.Unmarshal(body, &b) == nil {
			global = global || b.Global
			retryAfter = secondsDuration(b.RetryAfter)
		}
		if retryAfter <= 0 {
			retryAfter = parseSeconds(h.Get("Retry-After"))
		}
		if retryAfter <= 0 {
			retryAfter = time.Second // a 429 that names no wait still means "not now"
		}
	}
	for _, k := range rateLimitHeaders {
		h.Del(k)
	}

	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if hash != "" {
		l.hashes[r.key] = hash
	}
	b := l.bucket(r)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests && global:
		until := now.Add(retryAfter)
		if l.pause == nil {
			l.pause = &pause{until: until, wake: make(chan struct{})}
			l.log.Warn("discord global rate limit: pausing every route", "retry_after", retryAfter, "route", r.key)
		} else if until.After(l.pause.until) {
			l.pause.until = until
		}
	case resp.StatusCode == http.StatusTooManyRequests:
		if until := now.Add(retryAfter); until.After(l.resets[b]) {
			l.resets[b] = until
		}
	case remaining == "0" && resetAfter > 0:
		l.resets[b] = now.Add(resetAfter)
	default:
		delete(l.resets, b)
	}
	if len(l.resets) > 4096 { // forget refilled buckets of channels long gone
		for k, t := range l.resets {
			if !t.After(now) {
				delete(l.resets, k)
			}
		}
	}
}

func parseSeconds(s string) time.Duration {
	if s == "" {
		return 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return secondsDuration(f)
}

func secondsDuration(f float64) time.Duration {
	if f <= 0 || math.IsNaN(f) || math.IsInf(f, 0) || f > 1e6 {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}
