package link

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

const (
	stableAfter     = time.Minute     // up this long, a connection's loss starts the backoff afresh
	identifySpacing = 5 * time.Second // Discord's identify rate (max_concurrency 1)
	lowIdentifies   = 10              // a warning says the day's identify budget runs low
	// closeResumable is the close code of a reconnect: anything but 1000 and
	// 1001 keeps the session resumable.
	closeResumable = 4000
)

// session is one gateway session: it starts with an identify and spans every
// connection that resumes it. Only Run's goroutine, which reads the connections,
// touches it, but for seq, which the heartbeat reads.
type session struct {
	intents discordgo.Intent
	url     string       // the gateway URL from GET /gateway/bot
	started time.Time    // l.cfg.Now() of its identify
	id      string       // session_id from READY; "" = identify next
	resume  string       // READY's resume_gateway_url
	seq     atomic.Int64 // the last dispatch's sequence number
	invalid bool         // it ended with op 9: wait 1-5 s before identifying
}

// frame is one gateway payload.
type frame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  int64           `json:"s"`
	T  string          `json:"t"`
}

// conn is one gateway connection: its reader, on the goroutine that connected,
// hands dispatches on in order; its heartbeat runs beside it until the socket
// closes. Once it has ended, the rest of its fields tell Run how.
type conn struct {
	l      *Link
	g      *session
	ws     *websocket.Conn
	onUp   func()
	wmu    sync.Mutex
	wg     sync.WaitGroup
	done   chan struct{} // closed when the reader has ended
	acked  atomic.Bool   // the last heartbeat was acknowledged
	zombie atomic.Bool   // a heartbeat went unacknowledged
	up     bool          // READY or RESUMED came: the handshake is over
	err    error

	serverClose        int  // the close code the server sent; 0 = none
	invalid, resumable bool // op 9, and its d
	reconnect          bool // op 7
	lived              time.Duration
}

// connect runs one connection of g until it ends. The reader answers Hello with
// the Identify or the Resume and reads up to READY (or RESUMED, after the
// replayed events) under OpenTimeout, then runs up. A connection that never got
// there returns the handshake's error.
func (l *Link) connect(ctx context.Context, g *session, up func()) (*conn, error) {
	u := g.url
	if g.id != "" && g.resume != "" {
		u = g.resume
	}
	if !strings.HasSuffix(u, "/") {
		u += "/"
	}
	// A refused handshake's body needs no closing.
	d := websocket.Dialer{HandshakeTimeout: l.cfg.OpenTimeout, TLSClientConfig: l.cfg.TLS}
	c := &conn{l: l, g: g, onUp: up, done: make(chan struct{})}
	ws, _, err := d.DialContext(ctx, u+"?v="+discordgo.APIVersion+"&encoding=json", nil)
	if err != nil {
		return c, err
	}
	opened := time.Now()
	c.ws = ws
	ws.SetCloseHandler(func(int, string) error { return nil }) // no echo: we choose our close codes
	_ = ws.SetReadDeadline(opened.Add(l.cfg.OpenTimeout))
	stop := context.AfterFunc(ctx, func() { c.close(websocket.CloseNormalClosure) }) // stopping: the session may end
	c.read()
	stop()
	close(c.done)
	c.wg.Wait()
	l.connected.Store(false)
	if c.lived = time.Since(opened); !c.up {
		return c, fmt.Errorf("discord gateway: handshake: %w", c.err)
	}
	return c, nil
}

// read handles the server's payloads until the socket fails or closes.
func (c *conn) read() {
	for {
		_, b, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				c.serverClose = ce.Code
			}
			c.err = err
			return
		}
		var f frame
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		switch f.Op {
		case 0:
			c.dispatch(f)
		case 1: // Discord asks for a heartbeat now
			_ = c.beat()
		case 7:
			c.reconnect = true
			c.close(closeResumable)
		case 9:
			c.invalid, c.resumable = true, string(f.D) == "true"
			_ = c.ws.Close()
		case 10:
			var h struct {
				Interval int64 `json:"heartbeat_interval"`
			}
			if json.Unmarshal(f.D, &h) != nil || h.Interval <= 0 {
				c.err = errors.New("discord gateway: Hello without a heartbeat interval")
			} else {
				c.acked.Store(true)
				c.wg.Go(func() { c.heartbeat(time.Duration(h.Interval) * time.Millisecond) })
				c.err = c.write(c.l.hello(c.g))
			}
			if c.err != nil {
				_ = c.ws.Close()
				return
			}
		case 11:
			c.acked.Store(true)
		}
	}
}

// dispatch notes what the session needs from an event and hands it on.
func (c *conn) dispatch(f frame) {
	if f.S > c.g.seq.Load() {
		c.g.seq.Store(f.S)
	}
	switch f.T {
	case "READY":
		var r struct {
			SessionID   string              `json:"session_id"`
			ResumeURL   string              `json:"resume_gateway_url"`
			User        struct{ ID string } `json:"user"`
			Application struct{ ID string } `json:"application"`
		}
		if json.Unmarshal(f.D, &r) == nil {
			c.g.id, c.g.resume = r.SessionID, r.ResumeURL
			c.l.ids.Store(&[2]string{cmp.Or(r.User.ID, c.l.BotID()), cmp.Or(r.Application.ID, c.l.AppID())})
		}
		c.l.log.Info("discord gateway ready", "bot_user", r.User.ID, "mention_only", c.g.intents&discordgo.IntentsMessageContent == 0)
	case "RESUMED":
		c.l.log.Info("discord gateway resumed")
	}
	if (f.T == "READY" || f.T == "RESUMED") && !c.up {
		c.up = true
		_ = c.ws.SetReadDeadline(time.Time{})
		c.l.connected.Store(true)
		c.onUp()
	}
	if c.l.cfg.Dispatch != nil {
		c.l.cfg.Dispatch(f.T, f.D)
	}
}

// heartbeat beats every interval, the first after a random part of it, as
// Discord asks. A beat due while the last one has no ACK marks a zombie
// connection: it is closed with 4000 at once, so the session resumes.
func (c *conn) heartbeat(every time.Duration) {
	t := time.NewTimer(time.Duration(c.l.cfg.Rand() * float64(every)))
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		if !c.acked.Swap(false) {
			c.zombie.Store(true)
			c.close(closeResumable)
			return
		}
		if c.beat() != nil {
			return
		}
		t.Reset(every)
	}
}

// beat sends a heartbeat with the last sequence number (null before any).
func (c *conn) beat() error {
	var seq any
	if s := c.g.seq.Load(); s > 0 {
		seq = s
	}
	return c.write(map[string]any{"op": 1, "d": seq})
}

func (c *conn) write(v any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteJSON(v)
}

// close sends a close frame with code and cuts the connection.
func (c *conn) close(code int) {
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
	_ = c.ws.Close()
}

// hello is the Identify of a new session, or the Resume of g (op 6 with its id
// and last sequence), so Discord replays what was missed.
func (l *Link) hello(g *session) any {
	token := "Bot " + l.cfg.Token
	if g.id != "" {
		return map[string]any{"op": 6, "d": map[string]any{"token": token, "session_id": g.id, "seq": g.seq.Load()}}
	}
	id := map[string]any{"token": token, "intents": g.intents,
		"properties": map[string]string{"os": runtime.GOOS, "browser": "detour", "device": "detour"}}
	if l.cfg.Shard[1] > 1 {
		id["shard"] = l.cfg.Shard
	}
	return map[string]any{"op": 2, "d": id}
}

// Run keeps one gateway session connected until ctx ends (it then returns nil);
// it returns an error when Discord refuses the token, the shard or the intents
// for good.
func (l *Link) Run(ctx context.Context) error {
	var (
		g      *session
		losses int            // consecutive losses since a stable connection
		wg     sync.WaitGroup // Identified, beside the reader
	)
	defer wg.Wait()
	up := sync.OnceFunc(func() {
		if l.cfg.Identified != nil {
			wg.Go(func() { l.cfg.Identified(ctx) })
		}
	})
	for ctx.Err() == nil {
		identify := g == nil || g.id == ""
		wait := l.backoff(losses)
		if identify && g != nil {
			if g.invalid {
				wait = max(wait, time.Second+time.Duration(l.cfg.Rand()*float64(4*time.Second)))
			}
			wait = max(wait, identifySpacing-l.cfg.Now().Sub(g.started))
		}
		if wait > 0 {
			l.log.Info("discord gateway: waiting before reconnecting", "wait", wait, "identify", identify, "losses", losses)
			if l.cfg.Sleep(ctx, wait) != nil {
				return nil
			}
		}
		if identify {
			url, err := l.identifyBudget(ctx)
			switch {
			case ctx.Err() != nil:
				return nil
			case Status(err) == http.StatusUnauthorized: // a refused token: retrying cannot fix it
				return fmt.Errorf("discord: Discord refused the bot token: %w", err)
			case err != nil:
				losses++
				l.log.Warn("discord gateway: GET /gateway/bot failed", "err", err)
				continue
			}
			g = &session{intents: l.cfg.Intent, url: url, started: l.cfg.Now()}
			if l.mentionOnly.Load() {
				g.intents &^= discordgo.IntentsMessageContent
			}
		}
		o, err := l.connect(ctx, g, up)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			l.log.Warn("discord gateway connect failed", "err", err, "resume", !identify, "close_code", o.serverClose)
		} else {
			if o.lived >= stableAfter {
				losses = 0
			}
			l.log.Warn("discord gateway disconnected; reconnecting", "close_code", o.serverClose, "zombie", o.zombie.Load(),
				"invalid_session", o.invalid, "resumable", o.resumable, "reconnect_requested", o.reconnect, "lived", o.lived.Round(time.Millisecond))
		}
		losses++
		if err := l.afterLoss(o, g); err != nil {
			return err
		}
	}
	return nil
}

// afterLoss decides from how a connection ended whether the next connection must
// identify (a new session: g.id is cleared) rather than resume; it returns an
// error for refusals retrying cannot fix.
func (l *Link) afterLoss(o *conn, g *session) error {
	identify := g.id == ""
	switch o.serverClose {
	case 4004:
		return errors.New("discord: the gateway refused the bot token (close 4004): check DISCORD_BOT_TOKEN")
	case 4010, 4011:
		return fmt.Errorf("discord: the gateway refused the shard (close %d): check channels.discord.shard_id and shard_count", o.serverClose)
	case 4012, 4013:
		return fmt.Errorf("discord: the gateway refused the connection (close %d)", o.serverClose)
	case 4014:
		if g.intents&discordgo.IntentsMessageContent == 0 {
			return errors.New("discord: the gateway refused the intents (close 4014)")
		}
		l.mentionOnly.Store(true)
		l.log.Error("discord refused the MESSAGE_CONTENT intent (close 4014): running in mention-only mode, where the bot reads " +
			"messages that mention it, DMs and slash commands only. To read every message in threads it takes part in, enable " +
			"\"Message Content Intent\" under Bot > Privileged Gateway Intents in the Discord Developer Portal and restart; to " +
			"silence this, set channels.discord.message_content: false")
		identify = true
	case 4007, 4009, 1000, 1001:
		identify = true // invalid sequence, session timed out, or ended by the server
	default:
		if o.invalid {
			identify = !o.resumable
		}
	}
	if identify {
		g.id, g.invalid = "", o.invalid
	}
	return nil
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
		gb, err := l.rest.GatewayBot(discordgo.WithContext(ctx))
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
