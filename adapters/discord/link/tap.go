package link

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// The gateway connection is discordgo's, but the bytes pass through gwConn, which
// the adapter's websocket dialer hands to gorilla/websocket (above TLS). gwConn
// reads the frames both ways to see what discordgo v0.29.0 does not act on as
// Discord requires, and acts itself:
//
//   - a heartbeat sent while the previous one has no ACK marks a zombie connection:
//     gwConn sends a close frame with code 4000 and cuts the connection, so the
//     session stays resumable (discordgo would wait five intervals, then close with
//     1000, which invalidates the session);
//   - an op 9 Invalid Session is dropped before discordgo sees it (discordgo would
//     identify again at once, ignoring whether the session is resumable, the
//     1-5 s wait and the identify budget) and the connection is cut without a close
//     frame; the supervisor resumes or identifies;
//   - when the supervisor resumes, discordgo (a fresh discordgo.Session for every
//     connection, so a stale goroutine of an old one can never close a new
//     connection) sends an Identify, which goes out as the Resume of the session
//     (op 6 with its id and last sequence); Discord answers with the missed events
//     and RESUMED, which discordgo takes as it would after its own resume;
//   - the close code the server sent and op 7 are recorded for the supervisor.
//
// Every other frame passes unchanged. After the cut, writes fail (so discordgo's
// own close, code 1000, never reaches Discord) and reads fail.

// inspectMax is the largest frame gwConn decodes; larger ones (READY with many
// guilds) pass through unread. Opcodes 1, 7, 9, 10 and 11 are a few bytes.
const inspectMax = 64 << 10

var (
	errInvalidSession = errors.New("discord gateway: invalid session (op 9)")
	errZombie         = errors.New("discord gateway: heartbeat not acknowledged (zombie connection)")
	errGatewayClosed  = errors.New("discord gateway: connection closed")
)

// closeZombie is the close code for a zombie connection: anything but 1000 and
// 1001 keeps the session resumable.
const closeZombie = 4000

// gwConn is one gateway connection seen through the tap.
type gwConn struct {
	net.Conn
	opened time.Time

	// read side, owned by the one reader (gorilla, under discordgo)
	br         *bufio.Reader
	out        []byte
	headerDone bool
	passLeft   int64

	// write side, under wmu
	wmu sync.Mutex
	ws  frameScan

	mu          sync.Mutex
	hard        time.Time // handshake deadline; zero = none
	outstanding bool      // a heartbeat has had no ACK yet
	asked       bool      // the server asked for a heartbeat (op 1): the next one is an answer
	serverClose int       // close code the server sent; 0 = none
	invalid     bool      // op 9 received
	resumable   bool      // op 9's d
	zombie      bool
	reconnect   bool   // op 7 received
	resume      []byte // when set, the Resume (op 6 payload) sent instead of discordgo's Identify
	final       bool   // the bot is stopping: a 1000 close may pass
	dead        error
}

func newGWConn(c net.Conn, hard time.Time, resume []byte) *gwConn {
	g := &gwConn{Conn: c, opened: time.Now(), br: bufio.NewReaderSize(c, 32<<10), resume: resume}
	g.setHard(hard)
	return g
}

// outcome is what ended (or is ending) a connection, for the supervisor.
type outcome struct {
	serverClose int
	invalid     bool
	resumable   bool
	zombie      bool
	reconnect   bool
	lived       time.Duration
}

func (c *gwConn) outcome() outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	return outcome{serverClose: c.serverClose, invalid: c.invalid, resumable: c.resumable,
		zombie: c.zombie, reconnect: c.reconnect, lived: time.Since(c.opened)}
}

func (c *gwConn) deadErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// kill cuts the connection: no more frames either way.
func (c *gwConn) kill(err error) {
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return
	}
	c.dead = err
	c.mu.Unlock()
	_ = c.Conn.Close()
}

// Close closes the connection (discordgo closing it).
func (c *gwConn) Close() error {
	c.kill(errGatewayClosed)
	return nil
}

// Read hands gorilla the server's bytes, minus any op 9 frame.
func (c *gwConn) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		if err := c.deadErr(); err != nil {
			return 0, err
		}
		if err := c.fill(); err != nil {
			if dead := c.deadErr(); dead != nil {
				return 0, dead
			}
			return 0, err
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// fill reads the next piece of the stream into c.out: a header line of the HTTP
// upgrade, a frame (inspected when small), or a chunk of a large frame's payload.
func (c *gwConn) fill() error {
	if !c.headerDone {
		line, err := c.br.ReadSlice('\n')
		c.out = append(c.out[:0], line...)
		if string(line) == "\r\n" {
			c.headerDone = true
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil
		}
		return err
	}
	if c.passLeft > 0 {
		buf := make([]byte, min(c.passLeft, 32<<10))
		n, err := c.br.Read(buf)
		c.out, c.passLeft = buf[:n], c.passLeft-int64(n)
		return err
	}
	hdr := make([]byte, 2, 14)
	if _, err := io.ReadFull(c.br, hdr); err != nil {
		return err
	}
	op, fin, masked := hdr[0]&0x0f, hdr[0]&0x80 != 0, hdr[1]&0x80 != 0
	n := int64(hdr[1] & 0x7f)
	switch n {
	case 126:
		ext := make([]byte, 2)
		if _, err := io.ReadFull(c.br, ext); err != nil {
			return err
		}
		hdr, n = append(hdr, ext...), int64(binary.BigEndian.Uint16(ext))
	case 127:
		ext := make([]byte, 8)
		if _, err := io.ReadFull(c.br, ext); err != nil {
			return err
		}
		hdr, n = append(hdr, ext...), int64(binary.BigEndian.Uint64(ext)&(1<<63-1))
	}
	if masked { // servers never mask; pass such a frame through untouched
		key := make([]byte, 4)
		if _, err := io.ReadFull(c.br, key); err != nil {
			return err
		}
		hdr = append(hdr, key...)
	}
	inspect := !masked && ((op == opText && fin && n <= inspectMax) || op == opClose)
	if !inspect {
		c.out, c.passLeft = hdr, n
		return nil
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(c.br, payload); err != nil {
		return err
	}
	if op == opClose {
		c.mu.Lock()
		if len(payload) >= 2 {
			c.serverClose = int(binary.BigEndian.Uint16(payload))
		} else {
			c.serverClose = 1005 // no status
		}
		c.mu.Unlock()
	} else if c.serverFrame(payload) {
		c.kill(errInvalidSession)
		return errInvalidSession
	}
	c.out = append(hdr, payload...)
	return nil
}

// Websocket opcodes.
const (
	opText  = 1
	opClose = 8
)

// serverFrame notes one server payload (heartbeat requests and ACKs, op 7, op 9);
// it reports true for an op 9, which must not reach discordgo.
func (c *gwConn) serverFrame(payload []byte) (drop bool) {
	var f struct {
		Op int             `json:"op"`
		D  json.RawMessage `json:"d"`
	}
	if json.Unmarshal(payload, &f) != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch f.Op {
	case 1:
		c.asked = true
	case 7:
		c.reconnect = true
	case 9:
		c.invalid, c.resumable = true, string(f.D) == "true"
		return true
	case 11:
		c.outstanding = false
	}
	return false
}

// stopping lets a close with code 1000 through: the bot is shutting down, and
// Discord may end the session and show the bot offline at once.
func (c *gwConn) stopping() {
	c.mu.Lock()
	c.final = true
	c.mu.Unlock()
}

// Write sends the client's bytes and watches its frames for heartbeats. A close
// frame with code 1000 or 1001 (discordgo uses 1000 for every close, even to
// reconnect) goes out as 4000 unless the bot is stopping, so nothing but a
// shutdown ends a resumable session.
func (c *gwConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.deadErr(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	final, resume := c.final, c.resume
	c.mu.Unlock()
	out := p
	if c.ws.atBoundary() {
		if !final {
			out = keepResumable(p)
		}
		if resume != nil && clientOp(p) == 2 {
			out = maskedFrame(opText, resume)
			c.mu.Lock()
			c.resume = nil
			c.mu.Unlock()
			// The Identify is not sent: feed the scanner what went out instead.
			if _, err := c.Conn.Write(out); err != nil {
				return 0, err
			}
			c.ws.feed(out, func(int) {})
			return len(p), nil
		}
	}
	n, err := c.Conn.Write(out)
	n = min(n, len(p))
	zombie := false
	c.ws.feed(p[:n], func(op int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch op {
		case 1:
			switch {
			case c.asked:
				c.asked = false // an answer to the server's op 1, not a beat of its own
			case c.outstanding:
				c.zombie, zombie = true, true
			default:
				c.outstanding = true
			}
		}
	})
	if zombie {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Conn.Write(maskedClose(closeZombie, "heartbeat not acknowledged"))
		c.kill(errZombie)
		return n, errZombie
	}
	if err != nil {
		if dead := c.deadErr(); dead != nil {
			return n, dead
		}
	}
	return n, err
}

// maskedClose builds a client close frame (clients must mask).
func maskedClose(code int, reason string) []byte {
	payload := binary.BigEndian.AppendUint16(nil, uint16(code))
	return maskedFrame(opClose, append(payload, reason...))
}

// maskedFrame builds one final client frame of opcode op.
func maskedFrame(op byte, payload []byte) []byte {
	var key [4]byte
	_, _ = rand.Read(key[:])
	f := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		f = append(f, 0x80|byte(n))
	case n <= 0xffff:
		f = append(f, 0x80|126)
		f = binary.BigEndian.AppendUint16(f, uint16(n))
	default:
		f = append(f, 0x80|127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	f = append(f, key[:]...)
	for i, b := range payload {
		f = append(f, b^key[i%4])
	}
	return f
}

// clientOp is the gateway opcode of p when p is exactly one complete, masked,
// final text frame; -1 otherwise.
func clientOp(p []byte) int {
	if len(p) < 6 || p[0] != 0x80|opText || p[1]&0x80 == 0 {
		return -1
	}
	n, at := int(p[1]&0x7f), 2
	switch n {
	case 126:
		if len(p) < 8 {
			return -1
		}
		n, at = int(binary.BigEndian.Uint16(p[2:4])), 4
	case 127:
		return -1
	}
	if len(p) != at+4+n {
		return -1
	}
	key, payload := p[at:at+4], append([]byte(nil), p[at+4:]...)
	for i := range payload {
		payload[i] ^= key[i%4]
	}
	var f struct {
		Op int `json:"op"`
	}
	if json.Unmarshal(payload, &f) != nil {
		return -1
	}
	return f.Op
}

// keepResumable returns p with a leading client close frame's code 1000 or 1001
// changed to 4000 (p itself when there is none).
func keepResumable(p []byte) []byte {
	if len(p) < 8 || p[0]&0x0f != opClose || p[1]&0x80 == 0 {
		return p
	}
	n := int(p[1] & 0x7f)
	if n < 2 || n > 125 || len(p) < 6+n {
		return p
	}
	key := p[2:6]
	code := int(p[6]^key[0])<<8 | int(p[7]^key[1])
	if code != 1000 && code != 1001 {
		return p
	}
	q := append([]byte(nil), p...)
	q[6] = byte(closeZombie>>8) ^ key[0]
	q[7] = byte(closeZombie&0xff) ^ key[1]
	return q
}

// frameScan follows the client's frames across Write calls (gorilla may split a
// frame over several) and reports the gateway opcode of each small text frame.
type frameScan struct {
	upgraded bool   // past the HTTP upgrade request
	tail     []byte // the request's last bytes, to find its end across writes
	hdr      []byte
	need     int // header bytes still missing; 0 = reading payload
	left     int64
	capture  bool
	payload  []byte
	key      [4]byte
}

func (s *frameScan) atBoundary() bool { return s.upgraded && s.left == 0 && s.need == 0 }

func (s *frameScan) feed(p []byte, onOp func(op int)) {
	if !s.upgraded { // the HTTP upgrade request comes first
		s.tail = append(s.tail, p...)
		i := bytes.Index(s.tail, []byte("\r\n\r\n"))
		if i < 0 {
			s.tail = s.tail[max(0, len(s.tail)-3):]
			return
		}
		p = s.tail[i+4:]
		s.upgraded, s.tail = true, nil
	}
	for len(p) > 0 {
		if s.left == 0 && s.need == 0 { // a new frame starts
			s.hdr, s.need, s.payload = s.hdr[:0], 2, s.payload[:0]
		}
		if s.need > 0 {
			take := min(s.need, len(p))
			s.hdr = append(s.hdr, p[:take]...)
			p, s.need = p[take:], s.need-take
			if s.need > 0 {
				continue
			}
			if !s.header(onOp) {
				continue // the header grew (extended length, mask key): read more
			}
			continue
		}
		take := int(min(s.left, int64(len(p))))
		if s.capture {
			s.payload = append(s.payload, p[:take]...)
		}
		p, s.left = p[take:], s.left-int64(take)
		if s.left == 0 {
			s.done(onOp)
		}
	}
}

// header parses s.hdr once complete; it reports false and sets s.need when more
// header bytes are due.
func (s *frameScan) header(onOp func(op int)) bool {
	masked := s.hdr[1]&0x80 != 0
	n := int64(s.hdr[1] & 0x7f)
	size := 2
	switch n {
	case 126:
		size += 2
	case 127:
		size += 8
	}
	if masked {
		size += 4
	}
	if len(s.hdr) < size {
		s.need = size - len(s.hdr)
		return false
	}
	switch n {
	case 126:
		n = int64(binary.BigEndian.Uint16(s.hdr[2:4]))
	case 127:
		n = int64(binary.BigEndian.Uint64(s.hdr[2:10]) & (1<<63 - 1))
	}
	if masked {
		copy(s.key[:], s.hdr[size-4:size])
	} else {
		s.key = [4]byte{}
	}
	s.left = n
	s.capture = s.hdr[0]&0x0f == opText && s.hdr[0]&0x80 != 0 && n <= inspectMax
	if n == 0 {
		s.done(onOp)
	}
	return true
}

func (s *frameScan) done(onOp func(op int)) {
	if !s.capture {
		return
	}
	for i := range s.payload {
		s.payload[i] ^= s.key[i%4]
	}
	var f struct {
		Op int `json:"op"`
	}
	if json.Unmarshal(s.payload, &f) == nil {
		onOp(f.Op)
	}
	s.capture = false
}

// ---- deadlines: discordgo's Open has no read deadline of its own ----

func (c *gwConn) clamp(t time.Time) time.Time {
	if !c.hard.IsZero() && (t.IsZero() || t.After(c.hard)) {
		return c.hard
	}
	return t
}

func (c *gwConn) setHard(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hard = t
	_ = c.Conn.SetDeadline(t)
}

// SetDeadline sets both deadlines, clamped to the handshake deadline.
func (c *gwConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetDeadline(c.clamp(t))
}

// SetReadDeadline sets the read deadline, clamped to the handshake deadline.
func (c *gwConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetReadDeadline(c.clamp(t))
}

// SetWriteDeadline sets the write deadline, clamped to the handshake deadline.
func (c *gwConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetWriteDeadline(c.clamp(t))
}

// gwDialer dials gateway connections for gorilla/websocket (plain and TLS, so the
// tap sits above TLS). Each handshake runs armed: its connections carry a hard
// deadline until Open returns, and, when the handshake resumes, the Resume to
// send in place of discordgo's Identify.
type gwDialer struct {
	timeout time.Duration
	tls     *tls.Config

	mu      sync.Mutex
	armed   bool
	resume  []byte
	pending []*gwConn
	last    *gwConn
}

func (g *gwDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return g.connect(ctx, network, addr, false)
}

func (g *gwDialer) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	return g.connect(ctx, network, addr, true)
}

func (g *gwDialer) connect(ctx context.Context, network, addr string, secure bool) (net.Conn, error) {
	g.mu.Lock()
	armed, resume := g.armed, g.resume
	g.mu.Unlock()
	if !armed {
		return nil, errors.New("discord gateway: dial outside a handshake")
	}
	d := net.Dialer{Timeout: g.timeout}
	raw, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(g.timeout)
	var conn net.Conn = raw
	if secure {
		host, _, _ := net.SplitHostPort(addr)
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if g.tls != nil {
			cfg = g.tls.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		tc := tls.Client(raw, cfg)
		_ = raw.SetDeadline(deadline)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, err
		}
		conn = tc
	}
	c := newGWConn(conn, deadline, resume)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.armed {
		_ = conn.Close()
		return nil, errors.New("discord gateway: dial outside a handshake")
	}
	g.pending = append(g.pending, c)
	g.last = c
	return c, nil
}

// arm starts a handshake; resume, when not nil, is the Resume payload to send
// instead of discordgo's Identify.
func (g *gwDialer) arm(resume []byte) {
	g.mu.Lock()
	g.armed, g.resume, g.pending, g.last = true, resume, nil, nil
	g.mu.Unlock()
}

// expire makes the handshake in progress fail now (ctx ended).
func (g *gwDialer) expire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = false
	for _, c := range g.pending {
		c.setHard(time.Now())
	}
}

// disarm ends the handshake; on success the live connection loses its deadline.
// It returns the handshake's connection (nil when none was dialled).
func (g *gwDialer) disarm(ok bool) *gwConn {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ok {
		for _, c := range g.pending {
			c.setHard(time.Time{})
		}
	}
	last := g.last
	g.armed, g.resume, g.pending = false, nil, nil
	return last
}
