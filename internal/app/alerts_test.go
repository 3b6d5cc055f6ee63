package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/alerts"
	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/e2e"
)

// The configuration offers exactly the event types the alerts package sends.
func TestAlertEvents_ConfigMatchesAlerts(t *testing.T) {
	var types []string
	for _, ty := range alerts.Types {
		types = append(types, string(ty))
	}
	if !slices.Equal(config.AlertEvents, types) {
		t.Fatalf("config.AlertEvents %v, alerts.Types %v", config.AlertEvents, types)
	}
}

// End to end (issue 38): with alerts.webhooks configured, a conversation
// that falls back reaches the receiver as a signed fallback_started event,
// and a key disabled for billing as key_disabled, while the user gets the
// answers; /metrics counts the deliveries.
func TestSystem_AlertsWebhookEndToEnd(t *testing.T) {
	const secret = "e2e-hook-secret-0000"
	type delivery struct {
		sigErr error
		body   alerts.Event
	}
	got := make(chan delivery, 8)
	var w *e2e.World
	recv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var d delivery
		d.sigErr = alerts.Verify([]byte(secret), r.Header.Get(alerts.SignatureHeader), b, w.Clock.Now(), 5*time.Minute)
		if err := json.Unmarshal(b, &d.body); err != nil {
			d.sigErr = err
		}
		got <- d
	}))
	defer recv.Close()
	spec := outageSpec()
	spec.ExtraYAML = "server: {listen: \"127.0.0.1:0\"}\nalerts:\n  webhooks:\n    - url: " + recv.URL + "/detour\n      secret: " + secret +
		"\n      events: [fallback_started, all_down, key_disabled]\n"
	spec.Secrets = []string{secret}
	w, u := consoleWorld(t, spec)
	w.LLM.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeServer500, Times: 2})
	if lines := u.say("s1", "hello"); lines[len(lines)-1].Type != "reply" {
		t.Fatalf("the turn must still be answered: %+v", lines)
	}
	var d delivery
	select {
	case d = <-got:
	case <-time.After(e2e.Wait):
		t.Fatal("no webhook delivery")
	}
	if d.sigErr != nil {
		t.Fatalf("signature: %v", d.sigErr)
	}
	if d.body.Type != alerts.FallbackStarted || d.body.Data.RequestedModel != "p1/alpha" || d.body.Data.FallbackModel != "p2/beta" || d.body.Data.Status != 500 {
		t.Fatalf("event %+v", d.body)
	}
	// A key out of credit (D3) is disabled and rotated past: the user gets
	// the answer from the provider's other key, the receiver a key_disabled.
	w.LLM.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeBilling402, Times: 1})
	w.Clock.Advance(time.Hour) // s1's fallback and p1's cooldown are over
	if lines := u.say("s2", "hello"); lines[len(lines)-1].Type != "reply" {
		t.Fatalf("the turn must still be answered: %+v", lines)
	}
	// (Whether s2 also falls back depends on whether p1 is still marked down
	// and checked first (E1); only the disable matters here.)
	for d.body.Type != alerts.KeyDisabled {
		select {
		case d = <-got:
		case <-time.After(e2e.Wait):
			t.Fatal("no key_disabled delivery")
		}
	}
	if k := d.body.Data; d.sigErr != nil || k.KeyID != "p1:a" || k.Reason != "billing" || k.Until == nil {
		t.Fatalf("want key_disabled of p1:a for billing, got %+v (%v)", d.body, d.sigErr)
	}
	want := `detour_alert_deliveries_total{outcome="delivered",type="key_disabled"} 1`
	// The count follows the receiver's answer by a moment: read until it shows.
	for deadline := time.Now().Add(e2e.Wait); time.Now().Before(deadline); {
		if _, m := get(t, w, "/metrics"); strings.Contains(m, want) {
			return
		}
	}
	_, m := get(t, w, "/metrics")
	t.Fatalf("/metrics lacks %s:\n%s", want, grepLines(m, "detour_alert"))
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
