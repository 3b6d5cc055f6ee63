package link

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

const (
	// stableAfter is how long a connection must have been up for its loss to
	// start the backoff afresh.
	stableAfter = time.Minute
	// identifySpacing is Discord's identify rate (max_concurrency 1: one per 5 s).
	identifySpacing = 5 * time.Second
	// lowIdentifies is when a warning says the day's identify budget runs low.
	lowIdentifies = 10
)

// gwSession is one Discord gateway session: it starts with an identify and spans
// every connection that resumes it. Each connection is a fresh discordgo.Session
// (see gwconn.go), so the session's state lives here, fed by the handlers.
type gwSession struct {
	intents discordgo.Intent
	url     string // the gateway URL from GET /gateway/bot

	mu     sync.Mutex
	id     string // session_id from READY; "" = not (or no longer) resumable
	seq    int64  // the last dispatch's sequence number
	resume string // READY's resume_gateway_url
}

// resumePayload is the Resume to send for this session, nil when there is none.
func (g *gwSession) resumePayload(token string) []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.id == "" {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"op": 6, "d": map[string]any{"token": token, "session_id": g.id, "seq": g.seq}})
	return b
}

// resumeURL is where to resume: resume_gateway_url, else the gateway URL.
func (g *gwSession) resumeURL() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.resume != "" {
		return g.resume
	}
	return g.url
}

// forget marks the session as not resumable: the next connection identifies.
func (g *gwSession) forget() {
	g.mu.Lock()
	g.id = ""
	g.mu.Unlock()
}

func (g *gwSession) resumable() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.id != ""
}

// intents is what the next identify asks for.
func (l *Link) intents() discordgo.Intent {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mentionOnly {
		return l.cfg.Intent &^ discordgo.IntentsMessageContent
	}
	return l.cfg.Intent
}

func (l *Link) setIDs(bot, app string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bot != "" {
		l.botID = bot
	}
	if app != "" {
		l.appID = app
	}
}

// newConnection makes the discordgo session of one connection of g; disc is
// signalled when discordgo has torn the connection down.
func (l *Link) newConnection(g *gwSession) (s *discordgo.Session, disc chan struct{}) {
	s, _ = discordgo.New("Bot " + l.cfg.Token) // cannot fail: the token is not empty
	s.Client = l.rest.Client
	s.Dialer = &websocket.Dialer{
		HandshakeTimeout:  l.cfg.OpenTimeout,
		NetDialContext:    l.dialer.dial,
		NetDialTLSContext: l.dialer.dialTLS,
	}
	s.Identify.Intents = g.intents
	if l.cfg.Shard[1] > 1 {
		s.Identify.Shard = &l.cfg.Shard
	}
	s.Compress = false               // text frames only: the tap reads them
	s.ShouldReconnectOnError = false // the supervisor reconnects
	s.ShouldRetryOnRateLimit = false
	s.MaxRestRetries = 0
	s.StateEnabled = false // bounded memory: we track only what we need
	s.SyncEvents = true    // handlers run in order on the reader; they never block
	s.LogLevel = -1
	disc = make(chan struct{}, 1)
	s.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) {
		bot, app := "", ""
		if r.User != nil {
			bot = r.User.ID
		}
		if r.Application != nil {
			app = r.Application.ID
		}
		l.setIDs(bot, app)
		g.mu.Lock()
		g.id = r.SessionID
		g.mu.Unlock()
		l.log.Info("discord gateway ready", "bot_user", bot, "mention_only", g.intents&discordgo.IntentsMessageContent == 0)
	})
	s.AddHandler(func(_ *discordgo.Session, e *discordgo.Event) {
		g.mu.Lock()
		if e.Sequence > g.seq {
			g.seq = e.Sequence
		}
		g.mu.Unlock()
		if e.Type != "READY" {
			return
		}
		var r struct {
			ResumeURL string `json:"resume_gateway_url"`
		}
		if json.Unmarshal(e.RawData, &r) == nil {
			g.mu.Lock()
			g.resume = r.ResumeURL
			g.mu.Unlock()
		}
	})
	s.AddHandler(func(_ *discordgo.Session, _ *discordgo.Resumed) { l.log.Info("discord gateway resumed") })
	s.AddHandler(func(_ *discordgo.Session, _ *discordgo.Disconnect) {
		select {
		case disc <- struct{}{}:
		default:
		}
	})
	for _, h := range l.cfg.Handlers {
		s.AddHandler(h)
	}
	return s, disc
}

// fatalError is a refusal retrying cannot fix.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// Run keeps one gateway session connected until ctx ends (it then returns nil);
// it returns an error when Discord refuses the token, the shard or the intents
// for good.
func (l *Link) Run(ctx context.Context) error {
	var (
		g            *gwSession
		losses       int       // consecutive losses since a stable connection
		invalidated  bool      // the last session ended with op 9: wait 1-5 s before identifying
		lastIdentify time.Time // l.cfg.Now() of the last identify
		registered   bool
		old          []*discordgo.Session // connections that ended (their teardown may still run)
	)
	defer func() {
		for _, s := range old { // wait for discordgo's teardown of each (its close sleeps a second)
			_ = s.Close()
		}
	}()
	for {
		if ctx.Err() != nil {
			return nil
		}
		identify := g == nil || !g.resumable()

		wait := l.backoff(losses)
		if identify {
			if invalidated {
				wait = max(wait, time.Second+time.Duration(l.cfg.Rand()*float64(4*time.Second)))
			}
			if !lastIdentify.IsZero() {
				wait = max(wait, identifySpacing-l.cfg.Now().Sub(lastIdentify))
			}
		}
		if wait > 0 {
			l.log.Info("discord gateway: waiting before reconnecting", "wait", wait, "identify", identify, "losses", losses)
			if l.cfg.Sleep(ctx, wait) != nil {
				return nil
			}
		}

		var resume []byte
		if identify {
			url, err := l.identifyBudget(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if fatalREST(err) {
					return fmt.Errorf("discord: Discord refused the bot token: %w", err)
				}
				losses++
				l.log.Warn("discord gateway: GET /gateway/bot failed", "err", err)
				continue
			}
			g = &gwSession{intents: l.intents(), url: url}
			l.setGatewayAnswer(url)
			lastIdentify, invalidated = l.cfg.Now(), false
		} else {
			l.setGatewayAnswer(g.resumeURL())
			resume = g.resumePayload("Bot " + l.cfg.Token)
		}

		s, disc := l.newConnection(g)
		conn, err := l.open(ctx, s, resume)
		if err != nil {
			old = append(old, s)
			if ctx.Err() != nil {
				return nil
			}
			losses++
			var o outcome
			if conn != nil {
				o = conn.outcome()
			}
			l.log.Warn("discord gateway connect failed", "err", err, "resume", !identify, "close_code", o.serverClose)
			if next, ferr := l.afterLoss(o, g); ferr != nil {
				return ferr
			} else if next {
				invalidated = o.invalid
				g.forget()
			}
			continue
		}
		if !registered && identify && l.cfg.Identified != nil {
			registered = true
			l.cfg.Identified(ctx)
		}

		// Connected: wait until discordgo has torn this connection down (or the
		// bot stops).
		l.connected.Store(true)
		for conn.deadErr() == nil {
			select {
			case <-ctx.Done():
				l.connected.Store(false)
				conn.stopping()
				if err := s.Close(); err != nil {
					l.log.Warn("discord close", "err", err)
				}
				return nil
			case <-disc:
			}
		}
		l.connected.Store(false)
		old = append(old, s)
		if len(old) > 8 { // long gone: their teardown has finished
			old = old[len(old)-8:]
		}
		o := conn.outcome()
		if o.lived >= stableAfter {
			losses = 0
		}
		losses++
		l.log.Warn("discord gateway disconnected; reconnecting", "close_code", o.serverClose, "zombie", o.zombie,
			"invalid_session", o.invalid, "resumable", o.resumable, "reconnect_requested", o.reconnect, "lived", o.lived.Round(time.Millisecond))
		next, ferr := l.afterLoss(o, g)
		if ferr != nil {
			return ferr
		}
		if next {
			invalidated = o.invalid
			g.forget()
		}
	}
}

// afterLoss decides from how a connection ended whether the next connection must
// identify (a new session) rather than resume; it returns an error for refusals
// retrying cannot fix.
func (l *Link) afterLoss(o outcome, g *gwSession) (identify bool, err error) {
	switch o.serverClose {
	case 4004:
		return false, &fatalError{errors.New("discord: the gateway refused the bot token (close 4004): check DISCORD_BOT_TOKEN")}
	case 4010, 4011:
		return false, &fatalError{fmt.Errorf("discord: the gateway refused the shard (close %d): check channels.discord.shard_id and shard_count", o.serverClose)}
	case 4012, 4013:
		return false, &fatalError{fmt.Errorf("discord: the gateway refused the connection (close %d)", o.serverClose)}
	case 4014:
		if g.intents&discordgo.IntentsMessageContent != 0 {
			l.mu.Lock()
			l.mentionOnly = true
			l.mu.Unlock()
			l.log.Error("discord refused the MESSAGE_CONTENT intent (close 4014): running in mention-only mode, where the bot reads " +
				"messages that mention it, DMs and slash commands only. To read every message in threads it takes part in, enable " +
				"\"Message Content Intent\" under Bot > Privileged Gateway Intents in the Discord Developer Portal and restart; to " +
				"silence this, set channels.discord.message_content: false")
			return true, nil
		}
		return false, &fatalError{errors.New("discord: the gateway refused the intents (close 4014)")}
	case 4007, 4009, 1000, 1001:
		return true, nil // invalid sequence, session timed out, or ended by the server
	}
	if o.invalid {
		return !o.resumable, nil
	}
	return !g.resumable(), nil
}

// backoff is the wait before the next connection after losses consecutive
// losses: none for the first, then ReconnectBackoff doubling up to
// MaxReconnectBackoff, each with jitter (half to all of it).
func (l *Link) backoff(losses int) time.Duration {
	if losses <= 1 {
		return 0
	}
	d := l.cfg.ReconnectBackoff
	for i := 2; i < losses && d < l.cfg.MaxReconnectBackoff; i++ {
		d *= 2
	}
	d = min(d, l.cfg.MaxReconnectBackoff)
	return d/2 + time.Duration(l.cfg.Rand()*float64(d/2))
}

// identifyBudget reads session_start_limit from GET /gateway/bot and waits while
// it is used up (an identify past it gets the bot token reset by Discord). It
// returns the gateway URL to connect to.
func (l *Link) identifyBudget(ctx context.Context) (string, error) {
	for {
		var gb *discordgo.GatewayBotResponse
		err := l.Call(ctx, "get gateway", "", func(opts ...discordgo.RequestOption) error {
			var err error
			gb, err = l.rest.GatewayBot(opts...)
			return err
		})
		if err != nil {
			return "", err
		}
		sl := gb.SessionStartLimit
		if sl.Total == 0 || sl.Remaining > 0 { // Total 0: the server sent no budget
			if sl.Total > 0 && sl.Remaining <= lowIdentifies {
				l.log.Warn("discord identify budget runs low", "remaining", sl.Remaining, "total", sl.Total,
					"reset_after", time.Duration(sl.ResetAfter)*time.Millisecond)
			}
			if gb.URL == "" {
				return "", errors.New("discord: GET /gateway/bot returned no URL")
			}
			return gb.URL, nil
		}
		wait := max(time.Duration(sl.ResetAfter)*time.Millisecond, time.Second)
		l.log.Error("discord identify budget used up: waiting for Discord's reset before connecting "+
			"(one more identify would make Discord reset the bot token)", "reset_after", wait, "total", sl.Total)
		if err := l.cfg.Sleep(ctx, wait); err != nil {
			return "", err
		}
	}
}

// open runs one gateway handshake under OpenTimeout and ctx: discordgo's Open has
// no read deadline of its own, so the dialled connection carries one until Open
// returns. resume, when set, is sent in place of discordgo's Identify. It returns
// the connection dialled, if any.
func (l *Link) open(ctx context.Context, s *discordgo.Session, resume []byte) (*gwConn, error) {
	l.dialer.arm(resume)
	stop := context.AfterFunc(ctx, l.dialer.expire)
	err := s.Open()
	stop()
	conn := l.dialer.disarm(err == nil)
	if err == nil && conn == nil {
		return nil, errors.New("discord: gateway connected without a dial")
	}
	return conn, err
}

// fatalREST reports REST errors that retrying cannot fix: a refused token.
func fatalREST(err error) bool {
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized {
		return true
	}
	return errors.Is(err, discordgo.ErrUnauthorized)
}
