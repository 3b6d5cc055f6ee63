package slack

import (
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
)

// covers M5: the adapter reports its Socket Mode link (adapters.Connector), so
// /readyz is 503 while Slack is unreachable and 200 once the link is back.
func TestConnected_FollowsTheSocketModeLink(t *testing.T) {
	h := start(t, nil)
	var _ adapters.Connector = h.a
	waitConnected := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(wait)
		for h.a.Connected() != want {
			if time.Now().After(deadline) {
				t.Fatalf("Connected() stayed %v, want %v", !want, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := h.srv.WaitOpen(1, wait); err != nil {
		t.Fatal(err)
	}
	waitConnected(true)
	// Socket Mode turned off in the app: the link closes and no new one opens.
	if err := h.srv.SendDisconnect("link_disabled"); err != nil {
		t.Fatal(err)
	}
	waitConnected(false)
	h.srv.EnableLink()
	waitConnected(true)
}
