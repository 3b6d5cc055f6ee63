package fakeslack

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/slack-go/slack"
)

// conversations.replies keeps Slack's rules: the parent first on every page,
// pages of at most RepliesPageSize, a cursor to follow, latest exclusive, the
// history scope of the conversation's type, thread_not_found for a ts that is
// no message.
func TestReplies_PaginationAndRules(t *testing.T) {
	s := New()
	s.RepliesPageSize = 2
	s.Start()
	defer s.Close()
	api := client(s)
	ctx := context.Background()
	root := s.ChannelMessage("C1", "U1", "root", "")
	var last string
	for i := range 5 {
		last = s.ThreadMessage("C1", "U2", "reply "+string(rune('a'+i)), root.TS).TS
	}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("bot says", false), slack.MsgOptionTS(root.TS)); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := ""
	pages := 0
	for {
		msgs, more, next, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
			ChannelID: "C1", Timestamp: root.TS, Cursor: cursor, Latest: last, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(msgs) == 0 || msgs[0].Timestamp != root.TS || len(msgs) > 3 {
			t.Fatalf("page %d: %+v", pages, msgs)
		}
		for _, m := range msgs[1:] {
			got = append(got, m.Text)
		}
		if !more {
			break
		}
		cursor = next
	}
	if strings.Join(got, ",") != "reply a,reply b,reply c,reply d" || pages != 2 {
		t.Fatalf("replies before the last: %v in %d pages", got, pages)
	}
	_, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: "1700000000.999999"})
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "thread_not_found" {
		t.Fatalf("unknown ts: %v", err)
	}
	if err := s.InstallManifest([]byte("oauth_config: {scopes: {bot: [chat:write, groups:history]}}\nsettings: {event_subscriptions: {bot_events: [message.channels]}}\n")); err != nil {
		t.Fatal(err)
	}
	_, _, _, err = api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: root.TS})
	if !errors.As(err, &se) || se.Err != "missing_scope" {
		t.Fatalf("without channels:history: %v", err)
	}
	if th := s.ThreadOf("C1", root.TS); len(th) != 7 || th[6] != "bot says" {
		t.Fatalf("the thread holds %q", th)
	}
}

// A hosted file needs the bot token: without it Slack redirects to its
// sign-in page on another host.
func TestFiles_BehindTheToken(t *testing.T) {
	s := New()
	s.BotToken = "xoxb-right"
	s.Start()
	defer s.Close()
	f := s.AddFile("a.txt", "text/plain", []byte("hello"))
	url := f["url_private_download"].(string)
	get := func(token string, follow bool) (*http.Response, string) {
		c := &http.Client{}
		if !follow {
			c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, body := get("xoxb-right", false); resp.StatusCode != 200 || body != "hello" {
		t.Fatalf("with the token: %d %q", resp.StatusCode, body)
	}
	for _, tok := range []string{"", "xoxb-wrong"} {
		resp, _ := get(tok, false)
		if resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), s.signInURL()) {
			t.Fatalf("token %q: %d to %s", tok, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if _, body := get("", true); !strings.Contains(body, "Sign in") || len(s.SignInHits()) != 1 {
		t.Fatalf("followed: %q, hits %v", body, s.SignInHits())
	}
	if d := s.Downloads(); len(d) != 4 || !d[0].Served || d[1].Served {
		t.Fatalf("downloads %+v", d)
	}
}
