package link

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/detourbot/detour/failover/failovertest"
)

func TestRouteOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, path string
		want         route
	}{
		{"POST", "/api/v9/channels/123/messages", route{key: "POST /channels/{major}/messages", major: "123"}},
		{"PATCH", "/api/v9/channels/123/messages/456", route{key: "PATCH /channels/{major}/messages/{id}", major: "123"}},
		{"POST", "/api/v9/interactions/77/tok/callback", route{key: "POST /interactions/{major}/{token}/callback", major: "77", interaction: true}},
		{"PATCH", "/api/v9/webhooks/1/tok/messages/@original", route{key: "PATCH /webhooks/{major}/{token}/messages/@original", major: "1/tok", interaction: true}},
		{"GET", "/api/v9/gateway/bot", route{key: "GET /gateway/bot"}},
	}
	for _, tc := range tests {
		if got := routeOf(tc.method, tc.path); got != tc.want {
			t.Errorf("routeOf(%s %s) = %+v, want %+v", tc.method, tc.path, got, tc.want)
		}
	}
}

// covers the REST part of the package doc: a global 429 that names no
// Reset-After (how Discord sends them) pauses every route once, for 1 s when it
// names no wait, on the link's clock; interaction routes go on; a per-route 429
// and an empty bucket hold that bucket only; the headers never reach discordgo.
func TestTransport_GlobalPause(t *testing.T) {
	t.Parallel()
	clock := failovertest.NewClock(time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC))
	l := New(Config{Token: "t", Log: slog.New(slog.DiscardHandler), Timing: Timing{Sleep: clock.Sleep, Now: clock.Now, MaxRateLimitWait: time.Minute}})
	tr := l.rest.Client.Transport.(*transport)
	resp := &http.Response{StatusCode: 429, Header: http.Header{"X-Ratelimit-Global": {"true"}}, Body: http.NoBody}
	tr.observe(routeOf("POST", "/api/v9/channels/1/messages"), resp)
	if resp.Header.Get("X-Ratelimit-Global") != "" {
		t.Fatal("a rate-limit header reached discordgo")
	}
	ctx := context.Background()
	if err := tr.waitTurn(ctx, routeOf("POST", "/api/v9/interactions/1/t/callback")); err != nil || clock.Now().Sub(clock.Now()) != 0 {
		t.Fatalf("an interaction route waited: %v", err)
	}
	start := clock.Now()
	if err := tr.waitTurn(Dropping(ctx), routeOf("POST", "/api/v9/channels/9/typing")); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("a dropping request waited: %v", err)
	}
	if err := tr.waitTurn(ctx, routeOf("GET", "/api/v9/channels/9")); err != nil {
		t.Fatal(err)
	}
	if got := clock.Now().Sub(start); got != time.Second {
		t.Fatalf("the global pause lasted %v, want 1s (the 429 named no wait)", got)
	}
	// A route's bucket: its own wait, no other route's.
	body := io.NopCloser(bytes.NewReader([]byte(`{"retry_after": 2.5, "global": false}`)))
	tr.observe(routeOf("PATCH", "/api/v9/channels/1/messages/5"), &http.Response{StatusCode: 429, Header: http.Header{}, Body: body})
	start = clock.Now()
	_ = tr.waitTurn(ctx, routeOf("PATCH", "/api/v9/channels/2/messages/5"))
	if clock.Now() != start {
		t.Fatal("another channel's bucket waited")
	}
	_ = tr.waitTurn(ctx, routeOf("PATCH", "/api/v9/channels/1/messages/6"))
	if got := clock.Now().Sub(start); got != 2500*time.Millisecond {
		t.Fatalf("the bucket waited %v, want 2.5s", got)
	}
	// retry_after as a string ("1.5") is honoured as well as a number.
	body = io.NopCloser(bytes.NewReader([]byte(`{"retry_after": "1.5"}`)))
	tr.observe(routeOf("DELETE", "/api/v9/channels/4/messages/7"), &http.Response{StatusCode: 429, Header: http.Header{}, Body: body})
	start = clock.Now()
	_ = tr.waitTurn(ctx, routeOf("DELETE", "/api/v9/channels/4/messages/8"))
	if got := clock.Now().Sub(start); got != 1500*time.Millisecond {
		t.Fatalf("a string retry_after waited %v, want 1.5s", got)
	}
	tr.observe(routeOf("POST", "/api/v9/channels/3/messages"), &http.Response{StatusCode: 200, Body: http.NoBody,
		Header: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset-After": {"90"}}})
	if err := tr.waitTurn(ctx, routeOf("POST", "/api/v9/channels/3/messages")); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("a wait past MaxRateLimitWait = %v, want ErrRateLimited at once", err)
	}
}
