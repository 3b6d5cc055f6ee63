package opsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/detourbot/detour/redact"
)

// Checks are what /readyz asks.
type Checks struct {
	// Ping reaches the database with a cheap round trip; nil = not checked.
	Ping func(ctx context.Context) error
	// Disconnected names the enabled channels that are not connected now.
	Disconnected func() []string
	// Stopping reports that the bot is shutting down (draining its turns).
	Stopping func() bool
	// Version names the running build in the ready answer ("ready (detour
	// v1.2.3)") and in every answer's Detour-Version header; "" = not shown.
	Version string
}

// readyTimeout bounds one readiness check, well inside a probe's usual timeout.
const readyTimeout = 2 * time.Second

// Limits bound what clients of the endpoint may hold, so a flood of idle or
// slow connections cannot take the descriptors the bot needs to reach its
// providers (A4). DefaultLimits are what Listen uses.
type Limits struct {
	ReadHeader time.Duration // a request's headers must arrive within this
	Read       time.Duration // the whole request
	Write      time.Duration // the whole response (/metrics reads the state within stateTimeout)
	Idle       time.Duration // a kept-alive connection with no request is closed after this
	MaxConns   int           // connections served at once; more are closed as soon as they are accepted
}

// DefaultLimits: a Prometheus scraper and a few health probes need a handful
// of connections, each answered in milliseconds.
var DefaultLimits = Limits{ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 10 * time.Second,
	Idle: 30 * time.Second, MaxConns: 64}

// shutdownGrace bounds how long Serve waits for requests in flight at the end.
const shutdownGrace = 5 * time.Second

// Server serves the operations endpoint. Build it with Listen, run it with Serve.
type Server struct {
	ln  net.Listener
	srv *http.Server
	log *slog.Logger
}

// Listen binds addr (host:port; port 0 picks a free one) at once, so a bad or
// busy address fails at start-up rather than later. It serves within
// DefaultLimits.
func Listen(addr string, m *Metrics, c Checks, log *slog.Logger) (*Server, error) {
	return ListenLimited(addr, m, c, log, DefaultLimits)
}

// ListenLimited is Listen within lim.
func ListenLimited(addr string, m *Metrics, c Checks, log *slog.Logger, lim Limits) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("server.listen %s: %w", addr, err)
	}
	if lim.MaxConns > 0 {
		ln = &limitListener{Listener: ln, slots: make(chan struct{}, lim.MaxConns), refused: m.refusedConn(log)}
	}
	s := &Server{ln: ln, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { c.plain(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if why := c.notReady(r.Context()); why != "" {
			c.plain(w, http.StatusServiceUnavailable, "not ready: "+why)
			return
		}
		ready := "ready"
		if c.Version != "" {
			ready += " (detour " + c.Version + ")" // which build a rollout reached
		}
		c.plain(w, http.StatusOK, ready)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry(), promhttp.HandlerOpts{
		// A failed availability read leaves those gauges out; the rest still serves.
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}))
	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: lim.ReadHeader,
		ReadTimeout:       lim.Read,
		WriteTimeout:      lim.Write,
		IdleTimeout:       lim.Idle,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// limitListener serves at most cap(slots) connections at once; one more is
// closed as soon as it is accepted (so it holds a descriptor for an instant,
// and the kernel's queue never fills with connections nobody will serve).
type limitListener struct {
	net.Listener
	slots   chan struct{}
	refused func()
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			_ = c.Close()
			l.refused()
		}
	}
}

// limitConn gives its slot back when closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// Addr is the address it listens on (with the port chosen for port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve answers requests until ctx ends, then shuts down, letting requests in
// flight finish (within a short grace). It returns nil after a clean stop.
func (s *Server) Serve(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- s.srv.Serve(s.ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("operations endpoint: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("operations endpoint: shutdown: %w", err)
	}
	return nil
}

// Close stops listening; for a Server whose Serve never ran.
func (s *Server) Close() error { return s.srv.Close() }

// notReady is why the bot is not ready, "" when it is.
func (c Checks) notReady(ctx context.Context) string {
	var why []string
	if c.Stopping != nil && c.Stopping() {
		why = append(why, "shutting down")
	}
	if c.Ping != nil {
		ctx, cancel := context.WithTimeout(ctx, readyTimeout)
		defer cancel()
		if err := c.Ping(ctx); err != nil {
			// T8: a driver's error may quote its connection string.
			why = append(why, "database: "+redact.Preview(err.Error(), 200))
		}
	}
	if c.Disconnected != nil {
		if names := c.Disconnected(); len(names) > 0 {
			why = append(why, "not connected: "+strings.Join(names, ", "))
		}
	}
	return strings.Join(why, "; ")
}

func (c Checks) plain(w http.ResponseWriter, status int, body string) {
	if c.Version != "" {
		w.Header().Set("Detour-Version", c.Version)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = fmt.Fprintln(w, body)
}
