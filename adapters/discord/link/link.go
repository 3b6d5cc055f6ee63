// Package link is the bot's connection to Discord, behind one type, Link.
// discordgo v0.29.0 makes the REST calls and decodes their answers; the gateway
// is read here, with gorilla/websocket and discordgo's types: once every rule
// discordgo's gateway client breaks was repaired around it, only its dial and
// read loop were left. Each part, the discordgo behaviour it replaces, and the
// tests that fail with that behaviour:
//
//   - REST rate limits (transport.go). discordgo sleeps on the X-RateLimit-*
//     headers uncancellably on the wall clock, misses a global 429 without
//     Reset-After (how Discord sends them), and with ShouldRetryOnRateLimit
//     retries every 429 without end. Here the transport waits, with the
//     caller's context and on the injected clock, for a route's empty bucket
//     and for one global pause (interaction endpoints exempt), retries a 429 at
//     most MaxRateLimitRetries times and fails a wait past MaxRateLimitWait at
//     once. Pinned by TestSend_EmptyBucketWaitIsOurs,
//     TestSend_RateLimitWaitHonoursContext, TestSend_RateLimitBounded,
//     TestE2E_GlobalRateLimitPausesEveryRouteOnce and TestTransport_GlobalPause.
//   - 5xx retries. discordgo retries a 502 up to MaxRestRetries (3), posting
//     again a message that landed; here none is. TestSend_BadGatewayIsNotRepeated.
//   - The gateway URL (gateway.go). discordgo's Open asks GET /gateway, which
//     carries no identify budget, and ignores resume_gateway_url. Here each
//     identify reads GET /gateway/bot and waits while session_start_limit is
//     used up (past it Discord resets the token); a resume dials
//     resume_gateway_url. TestE2E_RepeatedSessionLossBacksOffWithinIdentifyBudget,
//     TestE2E_HeartbeatMissResumesWithoutLosingQueuedEvents.
//   - Zombie connections. discordgo waits five missed ACKs, then closes with
//     1000, ending the session; here a heartbeat due while the last has no ACK
//     closes with 4000 at once and the session resumes. TestGateway_TLSZombieResumes,
//     TestE2E_HeartbeatMissResumesWithoutLosingQueuedEvents (close codes [4000]).
//   - Close codes. discordgo closes with 1000 even to reconnect (op 7, a failed
//     heartbeat), invalidating the session; here a reconnect closes with 4000,
//     only stopping with 1000. TestReconnect_ResumesAndDeliversOnce.
//   - Invalid Session (op 9). discordgo identifies again at once, whatever d
//     says and without Discord's 1-5 s wait; here Run resumes when d is true,
//     else identifies after 1-5 s. TestGateway_InvalidSessionResumableOrNot.
//   - Resume. discordgo keeps the session id unexported and resumes only within
//     one Session; here the session outlives its connections and each reconnect
//     resumes it (op 6), so Discord replays what was missed.
//     TestReconnect_ResumesAndDeliversOnce.
//   - The handshake deadline. discordgo's Open reads Hello and READY with no
//     deadline, so a silent gateway hangs it; here OpenTimeout bounds it.
//     TestRun_HandshakeDeadline.
//   - Reconnecting. discordgo's loop (ShouldReconnectOnError) backs off up to 10
//     minutes and gives up on nothing; here Run backs off 1 s to 2 min with
//     jitter, spaces identifies 5 s, stops on a refused token or shard (4004,
//     4010-4013), and on a refused MESSAGE_CONTENT intent (4014) goes on in
//     mention-only mode. TestGateway_DisallowedIntentFallsBackToMentionOnly,
//     TestGateway_ShardAndRefusedIntents.
package link

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/adapters/live"
	"github.com/detourbot/detour/redact"
)

// Config configures a Link. Every field but Token has a default.
type Config struct {
	Token  string   // the bot token without "Bot "; secret, never logged
	API    *url.URL // nil = https://discord.com
	TLS    *tls.Config
	Shard  [2]int // id and count, sent when count > 1
	Intent discordgo.Intent
	// MentionOnly identifies without MESSAGE_CONTENT (as after a 4014).
	MentionOnly bool
	Log         *slog.Logger
	Timing
	// Dispatch receives every gateway event (its type, "MESSAGE_CREATE", and
	// its data), in order on the connection's reader; it must not block.
	Dispatch func(event string, data json.RawMessage)
	// Identified runs once, beside the reader, after the first connection that
	// identified; Run returns once it has.
	Identified func(ctx context.Context)
}

// Timing is how a Link waits; a zero field takes its default.
type Timing struct {
	// HTTPTimeout bounds each REST request once it is sent (default 10s);
	// waiting out a rate limit before it does not count.
	HTTPTimeout time.Duration
	// OpenTimeout bounds one gateway handshake: dial, Hello, Identify/Resume and
	// READY/RESUMED (default 20s).
	OpenTimeout time.Duration
	// Sleep waits d or until ctx ends, Now tells the time (defaults: a timer,
	// time.Now): rate-limit waits, the reconnect backoff and the identify budget
	// use them. Tests inject a virtual clock: give both, from the same clock.
	Sleep func(ctx context.Context, d time.Duration) error
	Now   func() time.Time
	// Rand returns a number in [0, 1) for the jitter of waits (default math/rand).
	Rand func() float64
	// MaxRateLimitRetries is how many times one call is retried after a 429
	// (default 3); MaxRateLimitWait is the longest rate-limit wait honoured, a
	// longer one fails the call at once (default 60s).
	MaxRateLimitRetries int
	MaxRateLimitWait    time.Duration
	// ReconnectBackoff is the first wait when the gateway connection keeps
	// failing, doubled (with jitter) up to MaxReconnectBackoff (defaults 1s and
	// 2m); a single drop of a connection that was up resumes at once.
	ReconnectBackoff, MaxReconnectBackoff time.Duration
}

// WithDefaults returns t with its zero fields set to their defaults.
func (t Timing) WithDefaults() Timing {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&t.HTTPTimeout, 10 * time.Second}, {&t.OpenTimeout, 20 * time.Second}, {&t.MaxRateLimitWait, time.Minute},
		{&t.ReconnectBackoff, time.Second}, {&t.MaxReconnectBackoff, 2 * time.Minute}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if t.Sleep == nil {
		t.Sleep = adapters.Sleep
	}
	if t.Now == nil {
		t.Now = time.Now
	}
	if t.Rand == nil {
		t.Rand = rand.Float64
	}
	if t.MaxRateLimitRetries <= 0 {
		t.MaxRateLimitRetries = 3
	}
	return t
}

// Link is the bot's connection to Discord.
type Link struct {
	cfg    Config
	log    *slog.Logger
	rest   *discordgo.Session // REST only, never opened
	http   *http.Transport
	pauses *live.Pauses

	ids         atomic.Pointer[[2]string] // the bot's user and application id from the last READY
	mentionOnly atomic.Bool
	connected   atomic.Bool
}

// New builds a Link; nothing connects until Run.
func New(cfg Config) *Link {
	cfg.Timing = cfg.Timing.WithDefaults()
	cfg.Log = cmp.Or(cfg.Log, slog.Default())
	rest, _ := discordgo.New("Bot " + cfg.Token) // its error is always nil
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = cfg.TLS
	l := &Link{cfg: cfg, log: cfg.Log, rest: rest, http: base, pauses: live.NewPauses(cfg.Now, cfg.Sleep)}
	l.mentionOnly.Store(cfg.MentionOnly)
	l.ids.Store(&[2]string{})
	// No http.Client timeout: it would count rate-limit waits.
	rest.Client = &http.Client{Transport: &transport{l: l, base: adapters.Timed(base, cfg.HTTPTimeout), target: cfg.API,
		hashes: map[string]string{}}}
	rest.ShouldRetryOnRateLimit = false // the transport waits and retries
	rest.MaxRestRetries = 0             // a 502 on message create may have posted: never repeat
	rest.StateEnabled = false
	rest.LogLevel = -1 // discordgo's logger is process-global; we log ourselves
	return l
}

// REST is the session every REST call goes through.
func (l *Link) REST() *discordgo.Session { return l.rest }

// Connected reports whether a gateway connection is up now.
func (l *Link) Connected() bool { return l.connected.Load() }

// BotID and AppID are the bot's user and application id from the last READY
// ("" before one).
func (l *Link) BotID() string { return l.ids.Load()[0] }

// AppID: see BotID.
func (l *Link) AppID() string { return l.ids.Load()[1] }

// Close lets go of idle HTTP connections.
func (l *Link) Close() { l.http.CloseIdleConnections() }

// Err names a failed REST call (nil stays nil) and hides secret, an
// interaction token, from its text: discordgo's errors carry the URL, which
// holds the token, while the error stays unwrappable.
func Err(what, secret string, err error) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf("discord: %s: %w", what, err)
	if secret == "" {
		return err
	}
	return &scrubbed{err: err, secret: secret}
}

type scrubbed struct {
	err    error
	secret string
}

func (e *scrubbed) Error() string { return redact.Known(e.err.Error(), e.secret) }
func (e *scrubbed) Unwrap() error { return e.err }

// Status is a REST error's HTTP status, 0 for none.
func Status(err error) int {
	if re, ok := errors.AsType[*discordgo.RESTError](err); ok && re.Response != nil {
		return re.Response.StatusCode
	}
	return 0
}

// Code is Discord's JSON error code of a REST error, 0 for none.
func Code(err error) int {
	if re, ok := errors.AsType[*discordgo.RESTError](err); ok && re.Message != nil {
		return re.Message.Code
	}
	return 0
}
