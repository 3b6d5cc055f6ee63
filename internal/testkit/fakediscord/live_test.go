package fakediscord

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// post posts content to ch as the bot and returns the message id.
func post(t *testing.T, s *Server, ch, body string) string {
	t.Helper()
	resp := do(t, s, "POST", "/channels/"+ch+"/messages", "Bot tok", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("post: %d (code %d)", resp.StatusCode, errCode(t, resp))
	}
	var m struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m.ID
}

func menu(n int, value func(i int) string) string {
	var opts []string
	for i := range n {
		opts = append(opts, fmt.Sprintf(`{"label":"l%d","value":%q}`, i, value(i)))
	}
	return `[{"type":1,"components":[{"type":3,"custom_id":"pick","options":[` + strings.Join(opts, ",") + `]}]}]`
}

func TestEditsAndDeletes_DiscordRules(t *testing.T) {
	t.Parallel()
	s, c := newFake(t, nil)
	s.EchoOwnMessages = false
	mine := post(t, s, "C1", `{"content":"first"}`)
	theirs := s.SendMessage(Msg{GuildID: "G1", ChannelID: "C1", AuthorID: "U1", Content: "a person's"})
	long := strings.Repeat("x", 2001)
	run(t, s, c, []step{
		{name: "edit", method: "PATCH", path: "/channels/C1/messages/" + mine, body: `{"content":"second","allowed_mentions":{"parse":[]}}`, want: 200},
		{name: "edit in another channel", method: "PATCH", path: "/channels/C2/messages/" + mine, body: `{"content":"x"}`, want: 404, wantCode: 10008},
		{name: "edit a person's message", method: "PATCH", path: "/channels/C1/messages/" + theirs, body: `{"content":"x"}`, want: 403, wantCode: 50005},
		{name: "edit past 2,000 characters", method: "PATCH", path: "/channels/C1/messages/" + mine, body: `{"content":"` + long + `"}`, want: 400, wantCode: 50035},
		{name: "edit to nothing", method: "PATCH", path: "/channels/C1/messages/" + mine, body: `{"content":""}`, want: 400, wantCode: 50006},
		{name: "delete a person's message", method: "DELETE", path: "/channels/C1/messages/" + theirs, want: 403, wantCode: 50013},
		{name: "delete", method: "DELETE", path: "/channels/C1/messages/" + mine, want: 204},
		{name: "delete twice", method: "DELETE", path: "/channels/C1/messages/" + mine, want: 404, wantCode: 10008},
		{name: "edit a deleted message", method: "PATCH", path: "/channels/C1/messages/" + mine, body: `{"content":"x"}`, want: 404, wantCode: 10008},
	})
	m, _ := s.Message(mine)
	if !m.Deleted || m.Content != "second" || strings.Join(m.Versions, "|") != "first|second" {
		t.Fatalf("message = %+v", m)
	}
	if e := s.Edits(); len(e) != 1 || *e[0].Content != "second" || e[0].AllowedMentionsParse == nil || e[0].ChannelID != "C1" {
		t.Fatalf("edits = %+v", e)
	}
	if d := s.Deletes(); len(d) != 1 || d[0].MessageID != mine {
		t.Fatalf("deletes = %+v", d)
	}
	if l := s.Latest("C1"); len(l) != 0 {
		t.Fatalf("latest = %+v, want nothing left", l)
	}
}

func TestThreadFromMessage_DiscordRules(t *testing.T) {
	t.Parallel()
	s, c := newFake(t, nil)
	q := s.SendMention("G1", "C1", "U1", "a question")
	dm := s.SendDM("D1", "U1", "in a DM")
	s.AddThread("G1", "C1", "T1")
	inThread := s.SendMessage(Msg{GuildID: "G1", ChannelID: "T1", AuthorID: "U1", Content: "x"})
	run(t, s, c, []step{
		{name: "empty name", method: "POST", path: "/channels/C1/messages/" + q + "/threads", body: `{"name":" "}`, want: 400, wantCode: 50035},
		{name: "name past 100", method: "POST", path: "/channels/C1/messages/" + q + "/threads", body: `{"name":"` + strings.Repeat("n", 101) + `"}`, want: 400, wantCode: 50035},
		{name: "bad archive", method: "POST", path: "/channels/C1/messages/" + q + "/threads", body: `{"name":"n","auto_archive_duration":30}`, want: 400, wantCode: 50035},
		{name: "unknown message", method: "POST", path: "/channels/C1/messages/42/threads", body: `{"name":"n"}`, want: 404, wantCode: 10008},
		{name: "in a DM", method: "POST", path: "/channels/D1/messages/" + dm + "/threads", body: `{"name":"n"}`, want: 400, wantCode: 50024},
		{name: "in a thread", method: "POST", path: "/channels/T1/messages/" + inThread + "/threads", body: `{"name":"n"}`, want: 400, wantCode: 50024},
		{name: "started", method: "POST", path: "/channels/C1/messages/" + q + "/threads", body: `{"name":"a question","auto_archive_duration":1440}`, want: 201},
		{name: "twice", method: "POST", path: "/channels/C1/messages/" + q + "/threads", body: `{"name":"again"}`, want: 400, wantCode: 160004},
		{name: "the thread is a thread", method: "GET", path: "/channels/" + q, want: 200},
	})
	ts := s.ThreadStarts()
	if len(ts) != 1 || ts[0].ThreadID != q || ts[0].ParentID != "C1" || ts[0].Name != "a question" || ts[0].AutoArchiveDuration != 1440 {
		t.Fatalf("thread starts = %+v", ts)
	}
}

func TestComponents_LimitsAndPicks(t *testing.T) {
	t.Parallel()
	s, c := newFake(t, nil)
	ok := menu(25, func(i int) string { return fmt.Sprintf("/model p/m%d", i) })
	run(t, s, c, []step{
		{name: "26 options", method: "POST", path: "/channels/C1/messages", body: `{"content":"x","components":` + menu(26, func(i int) string { return fmt.Sprint(i) }) + `}`, want: 400, wantCode: 50035},
		{name: "value past 100", method: "POST", path: "/channels/C1/messages", body: `{"content":"x","components":` + menu(1, func(int) string { return strings.Repeat("v", 101) }) + `}`, want: 400, wantCode: 50035},
		{name: "duplicate values", method: "POST", path: "/channels/C1/messages", body: `{"content":"x","components":` + menu(2, func(int) string { return "v" }) + `}`, want: 400, wantCode: 50035},
		{name: "not in an action row", method: "POST", path: "/channels/C1/messages", body: `{"content":"x","components":[{"type":3,"custom_id":"a"}]}`, want: 400, wantCode: 50035},
		{name: "no content, no components", method: "POST", path: "/channels/C1/messages", body: `{"content":""}`, want: 400, wantCode: 50006},
	})
	id := post(t, s, "C1", `{"content":"pick one","components":`+ok+`}`)
	if _, _, err := s.SendComponent(Component{GuildID: "G1", ChannelID: "C1", UserID: "U1", MessageID: id, CustomID: "pick", Values: []string{"/model other"}}); err == nil {
		t.Fatal("a value not among the options was dispatched")
	}
	iid, tok, err := s.SendComponent(Component{GuildID: "G1", ChannelID: "C1", UserID: "U1", MessageID: id, CustomID: "pick", Values: []string{"/model p/m3"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s, c, []step{
		{name: "autocomplete result for a component", method: "POST", path: "/interactions/" + iid + "/" + tok + "/callback", body: `{"type":8}`, want: 400, wantCode: 50035},
		{name: "deferred update", method: "POST", path: "/interactions/" + iid + "/" + tok + "/callback", body: `{"type":6}`, want: 204},
		{name: "the menu's message is @original", method: "PATCH", path: "/webhooks/" + DefaultAppID + "/" + tok + "/messages/@original", body: `{"content":"model set","components":[]}`, want: 200},
	})
	m, _ := s.Message(id)
	if m.Content != "model set" || len(m.Selects) != 0 || len(m.Versions) != 2 {
		t.Fatalf("menu message after the answer = %+v", m)
	}
	cid, ctok := s.SendCommand(Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "model"})
	run(t, s, c, []step{
		{name: "deferred update for a command", method: "POST", path: "/interactions/" + cid + "/" + ctok + "/callback", body: `{"type":6}`, want: 400, wantCode: 50035},
	})
}

func TestLimit_BucketHeadersThen429(t *testing.T) {
	t.Parallel()
	s, c := newFake(t, nil)
	s.EchoOwnMessages = false
	s.Limit("PATCH /channels/{id}/messages/{mid}", 2, 5*time.Second)
	id := post(t, s, "C1", `{"content":"x"}`)
	other := post(t, s, "C2", `{"content":"x"}`)
	edit := func(ch, id string) string { return "/channels/" + ch + "/messages/" + id }
	run(t, s, c, []step{
		{name: "first", method: "PATCH", path: edit("C1", id), body: `{"content":"a"}`, want: 200, headers: map[string]string{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset-After": "5.000"}},
		{name: "second empties it", method: "PATCH", path: edit("C1", id), body: `{"content":"b"}`, advance: time.Second, want: 200, headers: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "4.000"}},
		{name: "another channel", method: "PATCH", path: edit("C2", other), body: `{"content":"b"}`, want: 200},
		{name: "third refused", method: "PATCH", path: edit("C1", id), body: `{"content":"c"}`, want: 429, headers: map[string]string{"X-RateLimit-Scope": "user"}},
		{name: "after the reset", method: "PATCH", path: edit("C1", id), body: `{"content":"c"}`, advance: 4 * time.Second, want: 200},
	})
	if s.RateLimited() != 1 {
		t.Fatalf("429s = %d", s.RateLimited())
	}
}

func TestTypingCallsRecorded(t *testing.T) {
	t.Parallel()
	s, c := newFake(t, nil)
	run(t, s, c, []step{{name: "typing", method: "POST", path: "/channels/C1/typing", want: 204}})
	if tc := s.TypingCalls(); len(tc) != 1 || tc[0].ChannelID != "C1" || tc[0].At.IsZero() {
		t.Fatalf("typing calls = %+v", tc)
	}
}

// A channel where the bot lacks permissions refuses every request with 403
// 50013, each counted toward the invalid-request limit; autocomplete holds at
// most 25 choices of at most 100 characters.
func TestForbidAndChoices_DiscordRules(t *testing.T) {
	t.Parallel()
	s, c := newFake(t, nil)
	s.Forbid("C9")
	run(t, s, c, []step{
		{name: "typing where forbidden", method: "POST", path: "/channels/C9/typing", want: 403, wantCode: 50013},
		{name: "elsewhere", method: "POST", path: "/channels/C1/typing", want: 204},
	})
	if n := s.InvalidRequests(); n != 1 {
		t.Fatalf("invalid requests = %d, want 1", n)
	}
	choices := func(n, size int) string {
		var cs []string
		for i := range n {
			cs = append(cs, fmt.Sprintf(`{"name":%q,"value":"v%d"}`, strings.Repeat("n", size), i))
		}
		return `{"type":8,"data":{"choices":[` + strings.Join(cs, ",") + `]}}`
	}
	for _, tc := range []struct {
		name  string
		body  string
		wants int
	}{
		{"26 choices", choices(26, 5), 400},
		{"a 101-character name", choices(1, 101), 400},
		{"25 choices of 100", choices(25, 100), 204},
	} {
		id, tok := s.SendAutocomplete(Command{GuildID: "G1", ChannelID: "C1", UserID: "U1", Name: "model"})
		resp := do(t, s, "POST", "/interactions/"+id+"/"+tok+"/callback", "", tc.body)
		if resp.StatusCode != tc.wants {
			t.Fatalf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.wants)
		}
	}
}
