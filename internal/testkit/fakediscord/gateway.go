package fakediscord

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

type event struct {
	seq  int64
	data []byte
}

type gwConn struct {
	ws     *websocket.Conn
	path   string
	wmu    sync.Mutex
	zombie bool // under Server.mu: no ACKs, no dispatches
}

func (c *gwConn) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.writeRaw(b)
}

func (c *gwConn) writeRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(2 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

func (c *gwConn) closeWith(code int, text string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
}

type gwFrame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s,omitempty"`
	T  string          `json:"t,omitempty"`
}

func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("v") != "9" || r.URL.Query().Get("encoding") != "json" {
		http.Error(w, "want v=9&encoding=json", http.StatusBadRequest)
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws, path: r.URL.Path}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ws.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		if s.conn == c {
			s.conn = nil
		}
		s.mu.Unlock()
		_ = ws.Close()
	}()
	s.serveConn(c)
}

// readFrame reads one client frame; a close frame ends the connection and is
// recorded, and a 1000 or 1001 close invalidates the session.
func (s *Server) readFrame(c *gwConn) (gwFrame, error) {
	var f gwFrame
	err := c.ws.ReadJSON(&f)
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		s.mu.Lock()
		s.closes = append(s.closes, ce.Code)
		if ce.Code == websocket.CloseNormalClosure || ce.Code == websocket.CloseGoingAway {
			s.sessionID = ""
		}
		if s.conn == c {
			s.conn = nil
		}
		s.mu.Unlock()
	}
	return f, err
}

func (s *Server) serveConn(c *gwConn) {
	ms := s.HeartbeatInterval.Milliseconds()
	if ms <= 0 {
		ms = DefaultHeartbeatInterval.Milliseconds()
	}
	if err := c.write(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": ms}}); err != nil {
		return
	}
	_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for !s.handshake(c) {
	}
	_ = c.ws.SetReadDeadline(time.Time{})
	for {
		f, err := s.readFrame(c)
		if err != nil {
			return
		}
		switch f.Op {
		case 1:
			s.mu.Lock()
			z := c.zombie
			s.mu.Unlock()
			if !z && c.write(map[string]any{"op": 11}) != nil {
				return
			}
		case 2, 6:
			c.closeWith(4005, "Already authenticated.")
			return
		}
	}
}

// handshake reads the Identify or Resume; it reports true when the session is up
// (or the connection is over), false when the client should try again on this
// connection (after an op 9).
func (s *Server) handshake(c *gwConn) bool {
	f, err := s.readFrame(c)
	if err != nil {
		_ = c.ws.Close()
		return true
	}
	switch f.Op {
	case 1: // a heartbeat before identifying: answer it
		_ = c.write(map[string]any{"op": 11})
		return false
	case 2:
		return s.identify(c, f)
	case 6:
		return s.resume(c, f)
	default:
		c.closeWith(4003, "Not authenticated.")
		_ = c.ws.Close()
		return true
	}
}

func (s *Server) identify(c *gwConn, f gwFrame) bool {
	var id struct {
		Token   string  `json:"token"`
		Intents int     `json:"intents"`
		Shard   *[2]int `json:"shard"`
	}
	if json.Unmarshal(f.D, &id) != nil {
		c.closeWith(4002, "Error while decoding payload.")
		_ = c.ws.Close()
		return true
	}
	s.mu.Lock()
	now := s.Now()
	s.identifies = append(s.identifies, id.Intents)
	s.lastShard = id.Shard
	s.rollBudgetLocked(now)
	if s.budgetStart.IsZero() {
		s.budgetStart = now
	}
	over := s.budgetUsed >= s.SessionStartTotal
	if !over {
		s.budgetUsed++ // every identify Discord receives counts, refused or not
	}
	closeCode, reason := 0, ""
	switch {
	case !s.tokenOK(id.Token) || s.tokenReset:
		closeCode, reason = 4004, "Authentication failed."
	case over:
		s.overIdentify++
		s.tokenReset = true // Discord resets the token of a bot past its identify budget
		closeCode, reason = 4004, "Authentication failed."
	case id.Intents&s.RefuseIntents != 0:
		closeCode, reason = 4014, "Disallowed intent(s)."
	case id.Shard != nil && (id.Shard[1] < 1 || id.Shard[0] < 0 || id.Shard[0] >= id.Shard[1]):
		closeCode, reason = 4010, "Invalid shard."
	}
	if closeCode != 0 {
		s.mu.Unlock()
		c.closeWith(closeCode, reason)
		_ = c.ws.Close()
		return true
	}
	s.sessions++
	s.sessionID = fmt.Sprintf("fake-session-%d", s.sessions)
	s.events, s.seq = nil, 0
	ready := map[string]any{
		"v": 9, "session_id": s.sessionID, "user": s.botUser(),
		"resume_gateway_url": s.wsBase() + "/gw-resume",
		"application":        map[string]any{"id": s.AppID, "flags": 0},
		"guilds":             []any{}, "private_channels": []any{},
	}
	err := s.dispatchLocked(c, "READY", ready)
	kill := s.InvalidateAfterReady > 0
	if kill {
		s.InvalidateAfterReady--
		s.sessionID = ""
	} else if err == nil {
		s.conn = c
	}
	s.mu.Unlock()
	if err != nil {
		_ = c.ws.Close()
		return true
	}
	if kill {
		_ = c.write(map[string]any{"op": 9, "d": false})
	}
	return true
}

func (s *Server) resume(c *gwConn, f gwFrame) bool {
	var rs struct {
		Token     string `json:"token"`
		SessionID string `json:"session_id"`
		Seq       int64  `json:"seq"`
	}
	s.mu.Lock()
	s.resumePaths = append(s.resumePaths, c.path)
	ok := json.Unmarshal(f.D, &rs) == nil && s.tokenOK(rs.Token) && !s.tokenReset && rs.SessionID != "" && rs.SessionID == s.sessionID
	if !ok {
		s.mu.Unlock()
		if c.write(map[string]any{"op": 9, "d": false}) != nil {
			_ = c.ws.Close()
			return true
		}
		return false // the client may identify on this connection
	}
	s.resumes++
	var err error
	for _, e := range s.events {
		if e.seq > rs.Seq && err == nil {
			err = c.writeRaw(e.data)
		}
	}
	if err == nil {
		err = s.dispatchLocked(c, "RESUMED", map[string]any{})
	}
	if err == nil {
		s.conn = c
	}
	s.mu.Unlock()
	if err != nil {
		_ = c.ws.Close()
	}
	return true
}

func (s *Server) tokenOK(tok string) bool {
	return s.Token == "" || tok == "Bot "+s.Token
}

// dispatchLocked numbers, logs and writes one dispatch to c (or only logs it when c
// is nil or a zombie, for replay on resume). s.mu must be held.
func (s *Server) dispatchLocked(c *gwConn, t string, d any) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	s.seq++
	frame, err := json.Marshal(gwFrame{Op: 0, D: data, S: &s.seq, T: t})
	if err != nil {
		return err
	}
	s.events = append(s.events, event{seq: s.seq, data: frame})
	if c == nil || c.zombie {
		return nil
	}
	return c.writeRaw(frame)
}

// Dispatch sends one gateway event to the connected client; while no client is
// connected (or the connection is a zombie) the event is kept and replayed on
// resume, as Discord does.
func (s *Server) Dispatch(t string, d any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conn
	if err := s.dispatchLocked(c, t, d); err != nil && s.conn == c {
		s.conn = nil
	}
}

var errNoConn = errors.New("fakediscord: no gateway connection")

// ForceReconnect makes the connected client reconnect: op 7, or a dropped socket.
func (s *Server) ForceReconnect(mode ReconnectMode) error {
	s.mu.Lock()
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	if c == nil {
		return errNoConn
	}
	if mode == ReconnectOp7 {
		return c.write(map[string]any{"op": 7, "d": nil})
	}
	return c.ws.UnderlyingConn().Close()
}

// StopAcking turns the current connection into a zombie: heartbeats are no longer
// acknowledged and dispatches are held for a resume, as when the network path
// dies silently.
func (s *Server) StopAcking() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return errNoConn
	}
	s.conn.zombie = true
	s.conn = nil // dispatches wait for the resume
	return nil
}

// SendInvalidSession sends op 9 on the current connection; not resumable also
// ends the session.
func (s *Server) SendInvalidSession(resumable bool) error {
	s.mu.Lock()
	c := s.conn
	s.conn = nil
	if !resumable {
		s.sessionID = ""
	}
	s.mu.Unlock()
	if c == nil {
		return errNoConn
	}
	return c.write(map[string]any{"op": 9, "d": resumable})
}

// InvalidateSession forgets the gateway session, so the next Resume is answered with
// op 9 (invalid session) and the client must identify again.
func (s *Server) InvalidateSession() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessionID = ""
}
