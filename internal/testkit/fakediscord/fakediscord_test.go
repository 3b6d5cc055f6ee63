package fakediscord

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
)

func do(t *testing.T, s *Server, method, path, auth, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+"/api/v9"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func TestRateLimitNext_DiscordShape(t *testing.T) {
	s := New()
	s.Token = "tok"
	s.Start()
	defer s.Close()
	s.RateLimitNext("POST /channels/{id}/messages", 1500*time.Millisecond)

	tests := []struct {
		name, method, path, auth string
		want                     int
	}{
		{"wrong token", "POST", "/channels/C1/messages", "Bot nope", http.StatusUnauthorized},
		{"other route passes", "POST", "/channels/C1/typing", "Bot tok", http.StatusNoContent},
		{"matching route limited once", "POST", "/channels/C1/messages", "Bot tok", http.StatusTooManyRequests},
		{"then served", "POST", "/channels/C1/messages", "Bot tok", http.StatusOK},
		{"unknown route", "GET", "/nothing/here", "Bot tok", http.StatusNotFound},
	}
	for _, tc := range tests {
		resp := do(t, s, tc.method, tc.path, tc.auth, `{"content":"x"}`)
		if resp.StatusCode != tc.want {
			t.Fatalf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			body, _ := io.ReadAll(resp.Body)
			var tmr discordgo.TooManyRequests
			if err := json.Unmarshal(body, &tmr); err != nil || tmr.RetryAfter != 1500*time.Millisecond {
				t.Fatalf("429 body %s parsed to %+v, %v", body, tmr, err)
			}
			if resp.Header.Get("X-RateLimit-Remaining") != "0" || resp.Header.Get("X-RateLimit-Reset-After") != "1.500" || resp.Header.Get("Retry-After") != "2" {
				t.Fatalf("429 headers = %v", resp.Header)
			}
		}
	}
	if s.RateLimited() != 1 || s.AuthFailures() != 1 {
		t.Fatalf("rate limited %d, auth failures %d", s.RateLimited(), s.AuthFailures())
	}
	msgs := s.Messages()
	if len(msgs) != 1 || msgs[0].ChannelID != "C1" || msgs[0].Content != "x" || msgs[0].AllowedMentionsParse != nil {
		t.Fatalf("messages = %+v", msgs)
	}
	if got := s.Typings(); len(got) != 1 || got[0] != "C1" {
		t.Fatalf("typings = %v", got)
	}
}

func TestChannelLookupAndGateway(t *testing.T) {
	s := New()
	s.Start()
	defer s.Close()
	s.AddThread("G1", "C1", "T1")
	var ch discordgo.Channel
	if err := json.NewDecoder(do(t, s, "GET", "/channels/T1", "", "").Body).Decode(&ch); err != nil || !ch.IsThread() || ch.ParentID != "C1" {
		t.Fatalf("thread lookup = %+v, %v", ch, err)
	}
	var gw struct{ URL string }
	if err := json.NewDecoder(do(t, s, "GET", "/gateway/bot", "", "").Body).Decode(&gw); err != nil || !strings.HasPrefix(gw.URL, "ws://127.0.0.1:") {
		t.Fatalf("gateway = %+v, %v", gw, err)
	}
	if s.Connected() {
		t.Fatal("connected without a client")
	}
	if err := s.ForceReconnect(ReconnectOp7); err == nil {
		t.Fatal("ForceReconnect without a client succeeded")
	}
}
