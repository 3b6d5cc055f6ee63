package link

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/failover/failovertest"
)

// A close discordgo sends with 1000 or 1001 would end the session; it goes out
// as 4000 unless the bot is stopping.
func TestKeepResumable(t *testing.T) {
	t.Parallel()
	frame := func(code int, key byte) []byte {
		f := []byte{0x88, 0x82, key, key + 1, key + 2, key + 3}
		c := binary.BigEndian.AppendUint16(nil, uint16(code))
		return append(f, c[0]^key, c[1]^(key+1))
	}
	codeOf := func(f []byte) int { return int(f[6]^f[2])<<8 | int(f[7]^f[3]) }
	tests := []struct {
		in, want int
	}{{1000, 4000}, {1001, 4000}, {1012, 1012}, {4000, 4000}}
	for _, tc := range tests {
		got := keepResumable(frame(tc.in, 7))
		if codeOf(got) != tc.want {
			t.Errorf("close %d went out as %d, want %d", tc.in, codeOf(got), tc.want)
		}
	}
	text := []byte{0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2}
	if got := keepResumable(text); !bytes.Equal(got, text) {
		t.Errorf("a text frame was changed")
	}
	if got := maskedClose(4000, "x"); codeOf(got) != 4000 || got[0] != 0x88 || got[1]&0x80 == 0 {
		t.Errorf("maskedClose = %x", got)
	}
}

// The write-side scanner finds each small text frame's op across any split.
func TestFrameScan_SplitWrites(t *testing.T) {
	t.Parallel()
	masked := func(payload string) []byte {
		key := [4]byte{9, 8, 7, 6}
		f := []byte{0x81}
		n := len(payload)
		switch {
		case n < 126:
			f = append(f, 0x80|byte(n))
		default:
			f = append(f, 0x80|126)
			f = binary.BigEndian.AppendUint16(f, uint16(n))
		}
		f = append(f, key[:]...)
		for i := range n {
			f = append(f, payload[i]^key[i%4])
		}
		return f
	}
	stream := []byte("GET /gw/?v=9 HTTP/1.1\r\nHost: x\r\n\r\n")
	stream = append(stream, masked(`{"op":2,"d":{}}`)...)
	stream = append(stream, masked(`{"op":1,"d":5}`)...)
	stream = append(stream, masked(`{"op":6,"d":{"pad":"`+strings.Repeat("x", 300)+`"}}`)...)
	stream = append(stream, masked(`{"op":1,"d":6}`)...)
	// One whole frame is recognised for the Identify-to-Resume swap; anything
	// else is left alone.
	if op := clientOp(masked(`{"op":2,"d":{}}`)); op != 2 {
		t.Errorf("clientOp(identify) = %d", op)
	}
	if op := clientOp(maskedFrame(opText, []byte(`{"op":6,"d":{"pad":"`+strings.Repeat("y", 200)+`"}}`))); op != 6 {
		t.Errorf("clientOp(long resume) = %d", op)
	}
	if op := clientOp(stream[:20]); op != -1 {
		t.Errorf("clientOp(part of a frame) = %d", op)
	}
	for _, size := range []int{1, 2, 3, 7, 64, len(stream)} {
		var s frameScan
		var ops []int
		for p := stream; len(p) > 0; {
			n := min(size, len(p))
			s.feed(p[:n], func(op int) { ops = append(ops, op) })
			p = p[n:]
		}
		if want := []int{2, 1, 6, 1}; !slices.Equal(ops, want) {
			t.Errorf("chunks of %d: ops %v, want %v", size, ops, want)
		}
	}
}

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
	l, err := New(Config{Token: "t", Log: slog.New(slog.DiscardHandler), Sleep: clock.Sleep, Now: clock.Now, MaxRateLimitWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
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
	tr.observe(routeOf("POST", "/api/v9/channels/3/messages"), &http.Response{StatusCode: 200, Body: http.NoBody,
		Header: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset-After": {"90"}}})
	if err := tr.waitTurn(ctx, routeOf("POST", "/api/v9/channels/3/messages")); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("a wait past MaxRateLimitWait = %v, want ErrRateLimited at once", err)
	}
}
