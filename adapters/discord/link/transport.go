package link

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/detourbot/detour/adapters/live"
)

// apiPrefix is the path every discordgo REST call starts with.
const apiPrefix = "/api/v9"

// ErrRateLimited marks a call that stayed rate limited, or would have to wait
// longer than Config.MaxRateLimitWait.
var ErrRateLimited = errors.New("link: rate limited")

// transport is the one place that honours Discord's rate limits
// (https://discord.com/developers/docs/topics/rate-limits). A global 429
// (X-RateLimit-Global, X-RateLimit-Scope: global or "global": true) pauses every
// route but the exempt interaction endpoints; a route's empty bucket
// (X-RateLimit-Remaining: 0 with Reset-After, or a per-route 429) is waited out
// before its next request, so none is sent that Discord would refuse (each
// refusal counts toward its invalid-request limit). discordgo never sees the headers.
type transport struct {
	l      *Link
	base   http.RoundTripper // times each request once it is sent
	target *url.URL          // nil = discord.com itself

	mu     sync.Mutex
	hashes map[string]string // route key → X-RateLimit-Bucket
}

// RoundTrip sends req when its route may go, and again after a 429: discordgo
// builds every request from a byte slice, so GetBody gives its body anew.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, rt := req.Context(), routeOf(req.Method, req.URL.Path)
	for attempt := 0; ; attempt++ {
		if err := t.waitTurn(ctx, rt); err != nil {
			return nil, err
		}
		r := t.retarget(req)
		if attempt > 0 && req.GetBody != nil {
			var err error
			if r.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
		resp, err := t.base.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		wait := t.observe(rt, resp)
		if wait == 0 {
			return resp, nil
		}
		if attempt >= t.l.cfg.MaxRateLimitRetries || ctx.Value(dropKey{}) != nil {
			return nil, fmt.Errorf("discord: %s: rate limited, retry after %v (gave up after %d retries): %w",
				rt.key, wait, attempt, ErrRateLimited)
		}
		t.l.log.Warn("discord rate limited", "route", rt.key, "retry_after", wait, "attempt", attempt+1)
	}
}

// retarget is req sent to Config.API instead of discord.com.
func (t *transport) retarget(req *http.Request) *http.Request {
	r := req.Clone(req.Context())
	if t.target != nil && strings.EqualFold(req.URL.Host, "discord.com") {
		r.URL.Scheme, r.URL.Host, r.Host = t.target.Scheme, t.target.Host, t.target.Host
		if p := strings.TrimRight(t.target.Path, "/"); p != "" {
			r.URL.Path = p + r.URL.Path
			if r.URL.RawPath != "" {
				r.URL.RawPath = p + r.URL.RawPath
			}
		}
	}
	return r
}

type dropKey struct{}

// Dropping marks ctx's requests to fail at once rather than wait for a rate
// limit (the typing indicator: a late one is worthless, and it must never hold
// a bucket another call needs).
func Dropping(ctx context.Context) context.Context { return context.WithValue(ctx, dropKey{}, true) }

// waitTurn waits until a request on rt may go. A write of a growing reply that
// is finishing (live.Abandoned) stops waiting, though never a request already
// sent: a message post cut short might be posted anyway, unknown to us.
func (t *transport) waitTurn(ctx context.Context, rt route) error {
	keys := []string{t.bucket(rt)}
	if !rt.interaction {
		keys = append([]string{"global"}, keys...)
	}
	if fin := live.Abandoned(ctx); fin != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(fin, cancel)()
	}
	p := t.l.pauses
	for _, k := range keys {
		switch d := p.Left(k); {
		case d <= 0:
		case ctx.Value(dropKey{}) != nil:
			return fmt.Errorf("discord: %s: rate limited for %v, dropped: %w", rt.key, d, ErrRateLimited)
		case k == "global":
			t.l.log.Debug("discord request waits for the global rate limit", "route", rt.key, "left", d)
		default:
			t.l.log.Info("discord rate-limit bucket empty, waiting", "route", rt.key, "wait", d)
		}
		if err := p.Wait(ctx, k, t.l.cfg.MaxRateLimitWait); err != nil {
			if errors.Is(err, live.ErrTooLong) {
				err = fmt.Errorf("%w: %w", err, ErrRateLimited)
			}
			return fmt.Errorf("discord: %s: waiting for the rate limit: %w", rt.key, err)
		}
	}
	return nil
}

// route is a request's rate-limit identity: method and path template, and the
// top-level resource Discord computes buckets per.
type route struct {
	key         string // "POST /channels/{major}/messages"
	major       string // "123"
	interaction bool   // an interaction endpoint: exempt from the global limit
}

func routeOf(method, path string) route {
	segs := strings.Split(strings.Trim(strings.TrimPrefix(path, apiPrefix), "/"), "/")
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

func (t *transport) bucket(r route) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.hashes[r.key]; h != "" {
		return "bucket:" + h + "|" + r.major
	}
	return "bucket:" + r.key + "|" + r.major
}

// rateLimitHeaders are removed before discordgo sees a response.
var rateLimitHeaders = []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
	"X-RateLimit-Reset-After", "X-RateLimit-Bucket", "X-RateLimit-Global", "X-RateLimit-Scope"}

// observe learns from one response its bucket's state, or a 429's wait, which
// it returns (0 for any other status).
func (t *transport) observe(r route, resp *http.Response) time.Duration {
	h := resp.Header
	hash, remaining := h.Get("X-RateLimit-Bucket"), h.Get("X-RateLimit-Remaining")
	resetAfter := seconds(h.Get("X-RateLimit-Reset-After"))
	global := h.Get("X-RateLimit-Global") != "" || strings.EqualFold(h.Get("X-RateLimit-Scope"), "global")
	for _, k := range rateLimitHeaders {
		h.Del(k)
	}
	if hash != "" {
		t.mu.Lock()
		if len(t.hashes) > 4096 {
			clear(t.hashes)
		}
		t.hashes[r.key] = hash
		t.mu.Unlock()
	}
	p := t.l.pauses
	if resp.StatusCode != http.StatusTooManyRequests {
		if remaining == "0" && resetAfter > 0 {
			p.Pause(t.bucket(r), resetAfter)
		}
		return 0
	}
	var b struct {
		RetryAfter json.Number `json:"retry_after"`
		Global     bool        `json:"global"`
	}
	wait := seconds(h.Get("Retry-After"))
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if json.Unmarshal(body, &b) == nil {
		global = global || b.Global
		wait = cmp.Or(seconds(b.RetryAfter.String()), wait)
	}
	if wait <= 0 {
		wait = time.Second // a 429 that names no wait still means "not now"
	}
	key := t.bucket(r)
	if global {
		if key = "global"; p.Left(key) <= 0 {
			t.l.log.Warn("discord global rate limit: pausing every route", "retry_after", wait, "route", r.key)
		}
	}
	p.Pause(key, wait)
	return wait
}

// seconds parses Discord's seconds ("1.5"); 0 for nothing usable.
func seconds(s string) time.Duration {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || math.IsNaN(f) || math.IsInf(f, 0) || f > 1e6 {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}
