package opsserver

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

// serveLimited starts a server within lim for t and returns its address.
func serveLimited(t *testing.T, m *Metrics, c Checks, lim Limits) string {
	t.Helper()
	s, err := ListenLimited("127.0.0.1:0", m, c, nil, lim)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s.Addr()
}

// closedWithin reports whether the server closes c (a read ends) within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}

// covers A4: the endpoint serves a bounded number of connections: one past the
// limit is closed at once and counted, the ones within it are closed after the
// read-header timeout when they send nothing, and then the endpoint answers
// again.
func TestServer_A4_ConnectionLimitAndHeaderTimeout(t *testing.T) {
	m := NewMetrics(nil, Names{}, nil)
	lim := Limits{ReadHeader: 300 * time.Millisecond, Read: time.Second, Write: time.Second, Idle: time.Second, MaxConns: 4}
	addr := serveLimited(t, m, Checks{}, lim)
	var held []net.Conn
	for range lim.MaxConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	time.Sleep(50 * time.Millisecond) // let the server accept them
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if !closedWithin(extra, 2*time.Second) {
		t.Fatal("a connection past the limit was kept open")
	}
	for i, c := range held {
		if !closedWithin(c, 3*time.Second) {
			t.Fatalf("idle connection %d (no request) not closed after the read-header timeout", i)
		}
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("after the idle ones were closed: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "detour_ops_connections_refused_total 1") {
		t.Fatalf("refused connection not counted:\n%s", grep(string(body), "refused"))
	}
}

// covers A4: a kept-alive connection with no further request is closed after
// the idle timeout, and the server sets read, write and header timeouts.
func TestServer_A4_IdleKeepAliveClosed(t *testing.T) {
	lim := Limits{ReadHeader: time.Second, Read: time.Second, Write: time.Second, Idle: 200 * time.Millisecond, MaxConns: 4}
	addr := serveLimited(t, NewMetrics(nil, Names{}, nil), Checks{}, lim)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "200 OK") {
		t.Fatalf("healthz: %q %v", buf[:n], err)
	}
	if !closedWithin(c, 3*time.Second) {
		t.Fatal("an idle kept-alive connection was not closed after the idle timeout")
	}
	s, err := Listen("127.0.0.1:0", NewMetrics(nil, Names{}, nil), Checks{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if srv := s.srv; srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Fatalf("default timeouts not set: %+v", srv)
	}
	if _, ok := s.ln.(*limitListener); !ok || DefaultLimits.MaxConns <= 0 {
		t.Fatal("the default listener has no connection limit")
	}
}

// covers A4: a local failure is counted as such, never as a provider's call.
func TestMetrics_A4_LocalFailures(t *testing.T) {
	m := NewMetrics(nil, Names{}, nil)
	m.Attempt(failover.AttemptRecord{Candidate: failover.Candidate{Provider: "p1", Model: "a"},
		Failure: &failover.Failure{Reason: classify.ReasonLocal, Message: "too many open files"}})
	addr := serveLimited(t, m, Checks{}, DefaultLimits)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "detour_local_failures_total 1") || strings.Contains(string(body), `outcome="local"`) {
		t.Fatalf("metrics:\n%s", grep(string(body), "detour_"))
	}
}

func grep(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
