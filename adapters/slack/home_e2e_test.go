package slack_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
)

// homeWait bounds a wait for a Home tab (the board feed's pace, 2 s between
// looks, runs on the world's virtual clock: it costs no real time).
const homeWait = 15 * time.Second

// TestE2E_Issue38_AppHomeShowsTheBoard: opening the App Home publishes the
// health board (views.publish, accepted by the fake under Slack's rules: Home
// tab enabled by the manifest, a home view within 100 blocks and the blocks'
// text limits); admins see keys and spend, others models and states; a
// fallback updates the tab of those who opened it.
// covers issue 38
func TestE2E_Issue38_AppHomeShowsTheBoard(t *testing.T) {
	e := startE2E(t, func(st *setup) { st.admins = []string{"slack:UADMIN"} })
	if !e.slack.AppHomeOpened("U1") || !e.slack.AppHomeOpened("UADMIN") {
		t.Fatal("the manifest's app does not get app_home_opened")
	}
	user, ok := e.slack.WaitHome("U1", homeWait, nil)
	if !ok {
		t.Fatalf("no Home tab published; calls: %+v", e.slack.CallLog())
	}
	admin, ok := e.slack.WaitHome("UADMIN", homeWait, nil)
	if !ok {
		t.Fatal("no Home tab published to the admin")
	}
	for _, want := range []string{"detour health", "p1/alpha", "answering", "Active fallbacks", "Last 24 hours"} {
		if !strings.Contains(user.Text(), want) {
			t.Errorf("the Home tab misses %q:\n%s", want, user.Text())
		}
	}
	for _, never := range []string{"p1:main", "Today", "$", "CANARY"} {
		if strings.Contains(user.Text(), never) {
			t.Errorf("everyone's Home tab shows %q:\n%s", never, user.Text())
		}
	}
	for _, want := range []string{"key `p1:main`", "Today", "admin view"} {
		if !strings.Contains(admin.Text(), want) {
			t.Errorf("the admin's Home tab misses %q:\n%s", want, admin.Text())
		}
	}
	if n := len(user.Blocks); n == 0 || n > fakeslack.MaxViewBlocks {
		t.Fatalf("%d blocks", n)
	}

	// A fallback: the open tabs are published again, showing it.
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeOverloaded529})
	m := e.slack.Mention("C1", "U2", "hello", "")
	e.waitThread("C1", m.TS, 2) // the notice and the answer
	updated, ok := e.slack.WaitHome("U1", homeWait, func(h fakeslack.HomeView) bool {
		return strings.Contains(h.Text(), "p1/alpha` → `p2/beta")
	})
	if !ok {
		t.Fatalf("the Home tab was not updated after the fallback; published:\n%s", homesText(e.slack.Homes("U1")))
	}
	if strings.Contains(updated.Text(), "p1:main") {
		t.Error("everyone's updated tab names a key")
	}
	for _, c := range e.slack.CallLog() {
		if c.Method == "views.publish" && c.Error != "" {
			t.Errorf("views.publish refused: %s", c.Error)
		}
	}
}

// TestE2E_Issue38_HomeTabOffIsRefused: the fake enforces views.publish's
// not_enabled for an app whose manifest does not enable the Home tab
// (https://docs.slack.dev/reference/methods/views.publish), and such an app
// gets no app_home_opened.
// covers issue 38
func TestE2E_Issue38_HomeTabOffIsRefused(t *testing.T) {
	srv := fakeslack.New()
	manifest := "features: {app_home: {home_tab_enabled: false}}\nsettings: {event_subscriptions: {bot_events: [app_home_opened]}}\n"
	if err := srv.InstallManifest([]byte(manifest)); err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Close()
	if srv.AppHomeOpened("U1") {
		t.Error("app_home_opened sent to an app without the Home tab")
	}
	view, _ := json.Marshal(map[string]any{"user_id": "U1", "view": map[string]any{"type": "home", "blocks": []any{}}})
	resp := postJSON(t, srv.URL()+"views.publish", string(view))
	if !strings.Contains(resp, `"not_enabled"`) {
		t.Fatalf("views.publish without the Home tab: %s", resp)
	}
}

func homesText(hs []fakeslack.HomeView) string {
	var b strings.Builder
	for _, h := range hs {
		b.WriteString(h.Text() + "\n---\n")
	}
	return b.String()
}

// postJSON calls a Web API method with a JSON body, as slack-go does.
func postJSON(t *testing.T, url, body string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
