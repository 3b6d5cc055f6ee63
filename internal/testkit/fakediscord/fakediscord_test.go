package fakediscord

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

// vclock is a settable clock for the fake's Now.
type vclock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *vclock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *vclock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newFake(t *testing.T, mod func(*Server)) (*Server, *vclock) {
	t.Helper()
	clock := &vclock{t: time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)}
	s := New()
	s.Token = "tok"
	s.Now = clock.Now
	if mod != nil {
		mod(s)
	}
	s.Start()
	t.Cleanup(s.Close)
	return s, clock
}

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

func errCode(t *testing.T, resp *http.Response) int {
	t.Helper()
	var b struct {
		Code int `json:"code"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&b)
	return b.Code
}

type step struct {
	name, method, path, body string
	advance                  time.Duration // move the fake's clock first
	want                     int
	wantCode                 int
	headers                  map[string]string
}

func run(t *testing.T, s *Server, c *vclock, steps []step) {
	t.Helper()
	for _, st := range steps {
		c.Advance(st.advance)
		resp := do(t, s, st.method, st.path, "Bot tok", st.body)
		if resp.StatusCode != st.want {
			t.Fatalf("%s: status %d, want %d", st.name, resp.StatusCode, st.want)
		}
		for k, v := range st.headers {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", st.name, k, got, v)
			}
		}
		if st.wantCode != 0 {
			if got := errCode(t, resp); got != st.wantCode {
				t.Errorf("%s: code %d, want %d", st.name, got, st.wantCode)
			}
		}
	}
}

func TestRateLimits_DiscordShapesAndWindows(t *testing.T) {
	t.Parallel()
	t.Run("per-route 429 keeps the bucket empty for retry_after", func(t *testing.T) {
		t.Parallel()
		s, c := newFake(t, nil)
		s.RateLimitNext("POST /channels/{id}/messages", 1500*time.Millisecond)
		run(t, s, c, []step{
			{name: "limited", method: "POST", path: "/channels/C1/messages", body: `{"content":"x"}`, want: 429,
				headers: map[string]string{"X-RateLimit-Scope": "user", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "1.500", "Retry-After": "2", "X-RateLimit-Global": ""}},
			{name: "another channel is another bucket", method: "POST", path: "/channels/C2/messages", body: `{"content":"x"}`, want: 200},
			{name: "too early: limited again", method: "POST", path: "/channels/C1/messages", body: `{"content":"x"}`, advance: time.Second, want: 429},
			{name: "after the reset", method: "POST", path: "/channels/C1/messages", body: `{"content":"x"}`, advance: time.Second, want: 200},
		})
		if s.RateLimited() != 2 || s.InvalidRequests() != 2 {
			t.Fatalf("429s %d, invalid %d, want 2 and 2", s.RateLimited(), s.InvalidRequests())
		}
	})
	t.Run("global 429 holds every route but interactions", func(t *testing.T) {
		t.Parallel()
		s, c := newFake(t, nil)
		id, tok := s.SendCommand(Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "status"})
		s.GlobalRateLimitNext(2 * time.Second)
		run(t, s, c, []step{
			{name: "global", method: "POST", path: "/channels/C1/typing", want: 429,
				headers: map[string]string{"X-RateLimit-Global": "true", "X-RateLimit-Scope": "global", "X-RateLimit-Bucket": ""}},
			{name: "any other route too", method: "GET", path: "/channels/C9", want: 429},
			{name: "interactions are exempt", method: "POST", path: "/interactions/" + id + "/" + tok + "/callback", body: `{"type":5}`, want: 204},
			{name: "over", method: "GET", path: "/channels/C9", advance: 2 * time.Second, want: 200},
		})
	})
	t.Run("drained bucket: the next request before the reset is refused", func(t *testing.T) {
		t.Parallel()
		s, c := newFake(t, nil)
		s.DrainBucketNext("POST /channels/{id}/messages", time.Second)
		run(t, s, c, []step{
			{name: "last allowed", method: "POST", path: "/channels/C1/messages", body: `{"content":"x"}`, want: 200,
				headers: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "1.000"}},
			{name: "too early", method: "POST", path: "/channels/C1/messages", body: `{"content":"x"}`, want: 429},
			{name: "after the reset", method: "POST", path: "/channels/C1/messages", body: `{"content":"x"}`, advance: time.Second, want: 200},
		})
	})
	t.Run("invalid requests past the limit: banned", func(t *testing.T) {
		t.Parallel()
		s, c := newFake(t, func(s *Server) { s.InvalidRequestLimit = 2 })
		resp := do(t, s, "GET", "/channels/C1", "Bot wrong", "")
		if resp.StatusCode != 401 {
			t.Fatalf("wrong token: %d", resp.StatusCode)
		}
		s.RateLimitNext("GET /channels/C1", time.Second)
		run(t, s, c, []step{
			{name: "429", method: "GET", path: "/channels/C1", want: 429},
			{name: "banned", method: "GET", path: "/channels/C2", want: 403},
			{name: "ban lifts after 10 minutes", method: "GET", path: "/channels/C2", advance: 11 * time.Minute, want: 200},
		})
	})
}

func TestRateLimitNext_BodyParsesAsDiscordgo(t *testing.T) {
	t.Parallel()
	s, _ := newFake(t, nil)
	s.RateLimitNext("POST /channels/{id}/messages", 1500*time.Millisecond)
	resp := do(t, s, "POST", "/channels/C1/messages", "Bot tok", `{"content":"x"}`)
	body, _ := io.ReadAll(resp.Body)
	var tmr discordgo.TooManyRequests
	if err := json.Unmarshal(body, &tmr); err != nil || tmr.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("429 body %s parsed to %+v, %v", body, tmr, err)
	}
}

func TestInteractions_DeadlineAndWebhooks(t *testing.T) {
	t.Parallel()
	s, c := newFake(t, nil)
	id, tok := s.SendCommand(Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "status"})
	app := "/webhooks/" + s.AppID + "/"
	run(t, s, c, []step{
		{name: "webhook before the ack", method: "PATCH", path: app + tok + "/messages/@original", body: `{"content":"x"}`, want: 404, wantCode: 10015},
		{name: "deferral in time", method: "POST", path: "/interactions/" + id + "/" + tok + "/callback", body: `{"type":5,"data":{"flags":64}}`, want: 204},
		{name: "second response", method: "POST", path: "/interactions/" + id + "/" + tok + "/callback", body: `{"type":5}`, want: 400, wantCode: 40060},
		{name: "edit original", method: "PATCH", path: app + tok + "/messages/@original", body: `{"content":"answer","allowed_mentions":{"parse":[]}}`, want: 200},
		{name: "unknown interaction", method: "POST", path: "/interactions/1/nope/callback", body: `{"type":5}`, want: 404, wantCode: 10062},
		{name: "token expired after 15 minutes", method: "POST", path: app + tok, body: `{"content":"late"}`, advance: 16 * time.Minute, want: 404, wantCode: 10015},
	})
	// Discord's 3 seconds, shortened by the option so that any response is late.
	strict, sc := newFake(t, func(s *Server) { s.InteractionDeadline = time.Nanosecond })
	late, lateTok := strict.SendCommand(Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "status"})
	run(t, strict, sc, []step{
		{name: "past the deadline", method: "POST", path: "/interactions/" + late + "/" + lateTok + "/callback", body: `{"type":5}`, want: 404, wantCode: 10062},
	})
	rs := s.InteractionResponses()
	if len(rs) != 1 || rs[0].InteractionID != id || rs[0].Flags != 64 || rs[0].Latency <= 0 {
		t.Fatalf("responses = %+v", rs)
	}
}

func TestLiveMentions(t *testing.T) {
	t.Parallel()
	content := "@everyone @here <@1> <@!2> <@&3>"
	tests := []struct {
		name    string
		am      *allowedMentions
		replied string
		want    []string
	}{
		{"no allowed_mentions: everything pings", nil, "", []string{"@everyone", "@here", "user:1", "user:2", "role:3"}},
		{"parse []: nothing", &allowedMentions{Parse: []string{}}, "", nil},
		{"reply pings its author by default", nil, "9", []string{"@everyone", "@here", "user:1", "user:2", "role:3", "replied:9"}},
		{"replied_user false", &allowedMentions{Parse: []string{}}, "9", nil},
		{"users listed", &allowedMentions{Users: []string{"2"}, Roles: []string{"3"}}, "", []string{"user:2", "role:3"}},
		{"parse everyone only", &allowedMentions{Parse: []string{"everyone"}}, "", []string{"@everyone", "@here"}},
	}
	for _, tc := range tests {
		got := liveMentions(content, tc.am, tc.replied != "", tc.replied)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMessages_ReferenceAndLength(t *testing.T) {
	t.Parallel()
	s, c := newFake(t, nil)
	asked := s.SendMention("G1", "C1", "U1", "hi")
	run(t, s, c, []step{
		{name: "reply", method: "POST", path: "/channels/C1/messages", body: `{"content":"a","message_reference":{"message_id":"` + asked + `"},"allowed_mentions":{"parse":[],"replied_user":false}}`, want: 200},
		{name: "unknown reference", method: "POST", path: "/channels/C1/messages", body: `{"content":"a","message_reference":{"message_id":"404"}}`, want: 400, wantCode: 50035},
		{name: "unknown reference allowed", method: "POST", path: "/channels/C1/messages", body: `{"content":"a","message_reference":{"message_id":"404","fail_if_not_exists":false}}`, want: 200},
		{name: "too long", method: "POST", path: "/channels/C1/messages", body: `{"content":"` + strings.Repeat("x", 2001) + `"}`, want: 400, wantCode: 50035},
	})
	msgs := s.Messages()
	if len(msgs) != 2 || msgs[0].Reference != asked || len(msgs[0].LiveMentions) != 0 {
		t.Fatalf("messages = %+v", msgs)
	}
}

// ---- gateway ----

type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func dial(t *testing.T, s *Server, path string) (*client, int64) {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(s.wsBase()+path+"?v=9&encoding=json", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	c := &client{t: t, ws: ws}
	hello := c.read()
	var h struct {
		Interval int64 `json:"heartbeat_interval"`
	}
	_ = json.Unmarshal(hello.D, &h)
	return c, h.Interval
}

func (c *client) read() gwFrame {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	var f gwFrame
	if err := c.ws.ReadJSON(&f); err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return f
}

func (c *client) send(op int, d any) {
	c.t.Helper()
	if err := c.ws.WriteJSON(map[string]any{"op": op, "d": d}); err != nil {
		c.t.Fatal(err)
	}
}

// closedWith reads until the server closes, returning its close code.
func (c *client) closedWith() int {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, _, err := c.ws.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		if err != nil {
			return 0
		}
	}
}

func (c *client) identify(intents int) (session string, seq int64) {
	c.t.Helper()
	c.send(2, map[string]any{"token": "Bot tok", "intents": intents})
	f := c.read()
	var r struct {
		SessionID string `json:"session_id"`
		Resume    string `json:"resume_gateway_url"`
	}
	_ = json.Unmarshal(f.D, &r)
	if f.T != "READY" || !strings.HasSuffix(r.Resume, "/gw-resume") {
		c.t.Fatalf("READY = %+v", f)
	}
	return r.SessionID, *f.S
}

func TestGateway_CloseCodesDecideResume(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		close     func(c *client)
		resumable bool
	}{
		{"1000 ends the session", func(c *client) {
			_ = c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(1000, ""))
		}, false},
		{"1001 ends the session", func(c *client) {
			_ = c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(1001, ""))
		}, false},
		{"4000 keeps it", func(c *client) {
			_ = c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4000, ""))
		}, true},
		{"no close frame keeps it", func(c *client) { _ = c.ws.UnderlyingConn().Close() }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, _ := newFake(t, nil)
			c, interval := dial(t, s, "/gw/")
			if interval != 41250 {
				t.Fatalf("heartbeat_interval = %d, want Discord's 41250", interval)
			}
			session, seq := c.identify(0)
			tc.close(c)
			if err := WaitFor(time.Second, func() bool { return !s.Connected() }); err != nil {
				t.Fatal(err)
			}
			s.SendDM("D1", "U1", "missed")
			r, _ := dial(t, s, "/gw-resume/")
			r.send(6, map[string]any{"token": "Bot tok", "session_id": session, "seq": seq})
			f := r.read()
			if tc.resumable {
				if f.T != "MESSAGE_CREATE" || r.read().T != "RESUMED" {
					t.Fatalf("resume: got %+v, want the missed event then RESUMED", f)
				}
			} else if f.Op != 9 || string(f.D) != "false" {
				t.Fatalf("resume: got %+v, want op 9 false", f)
			}
			if got := s.ResumePaths(); !slices.Equal(got, []string{"/gw-resume/"}) {
				t.Errorf("resume paths = %v", got)
			}
		})
	}
}

func TestGateway_IdentifyBudgetAndIntents(t *testing.T) {
	t.Parallel()
	s, clock := newFake(t, func(s *Server) {
		s.SessionStartTotal, s.SessionStartReset = 2, time.Hour
		s.RefuseIntents = int(discordgo.IntentsMessageContent)
	})
	budget := func() (remaining, resetAfter int) {
		var g struct {
			L struct {
				Remaining  int `json:"remaining"`
				ResetAfter int `json:"reset_after"`
			} `json:"session_start_limit"`
		}
		_ = json.NewDecoder(do(t, s, "GET", "/gateway/bot", "Bot tok", "").Body).Decode(&g)
		return g.L.Remaining, g.L.ResetAfter
	}
	if r, _ := budget(); r != 2 {
		t.Fatalf("remaining = %d, want 2", r)
	}
	c, _ := dial(t, s, "/gw/")
	c.send(2, map[string]any{"token": "Bot tok", "intents": int(discordgo.IntentsMessageContent)})
	if code := c.closedWith(); code != 4014 {
		t.Fatalf("disallowed intent: close %d, want 4014", code)
	}
	c, _ = dial(t, s, "/gw/")
	c.identify(0)
	clock.Advance(10 * time.Minute)
	if r, reset := budget(); r != 0 || reset != 50*60*1000 {
		t.Fatalf("budget = %d remaining, reset after %d ms; want 0 and 3000000", r, reset)
	}
	c, _ = dial(t, s, "/gw/")
	c.send(2, map[string]any{"token": "Bot tok", "intents": 0})
	if code := c.closedWith(); code != 4004 || s.OverIdentifies() != 1 {
		t.Fatalf("identify past the budget: close %d, over %d; want 4004 and 1", code, s.OverIdentifies())
	}
	if resp := do(t, s, "GET", "/users/@me", "Bot tok", ""); resp.StatusCode != 401 {
		t.Fatalf("after the token reset: %d, want 401", resp.StatusCode)
	}
}

func TestGateway_ZombieHoldsEventsForResume(t *testing.T) {
	t.Parallel()
	s, _ := newFake(t, nil)
	c, _ := dial(t, s, "/gw/")
	session, seq := c.identify(0)
	c.send(1, seq)
	if f := c.read(); f.Op != 11 {
		t.Fatalf("heartbeat: %+v, want ACK", f)
	}
	if err := s.StopAcking(); err != nil {
		t.Fatal(err)
	}
	s.SendDM("D1", "U1", "held")
	c.send(1, seq)
	_ = c.ws.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, _, err := c.ws.ReadMessage(); err == nil {
		t.Fatal("a zombie connection still delivers")
	}
	_ = c.ws.UnderlyingConn().Close()
	r, _ := dial(t, s, "/gw-resume/")
	r.send(6, map[string]any{"token": "Bot tok", "session_id": session, "seq": seq})
	if f := r.read(); f.T != "MESSAGE_CREATE" {
		t.Fatalf("replay = %+v", f)
	}
}

func TestChannelLookupAndGateway(t *testing.T) {
	t.Parallel()
	s, _ := newFake(t, nil)
	s.AddThread("G1", "C1", "T1")
	var ch discordgo.Channel
	if err := json.NewDecoder(do(t, s, "GET", "/channels/T1", "Bot tok", "").Body).Decode(&ch); err != nil || !ch.IsThread() || ch.ParentID != "C1" {
		t.Fatalf("thread lookup = %+v, %v", ch, err)
	}
	if s.Connected() {
		t.Fatal("connected without a client")
	}
	if err := s.ForceReconnect(ReconnectOp7); err == nil {
		t.Fatal("ForceReconnect without a client succeeded")
	}
}
