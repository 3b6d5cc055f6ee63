// alerts.webhooks: where operator alerts are sent (issue 38,
// docs/operations.md "Alerts").

package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Alerts is the alerts section.
type Alerts struct {
	Webhooks []Webhook
}

// Webhook is one alerts.webhooks entry.
type Webhook struct {
	// URL receives a signed POST per event. It may hold a token of the
	// receiver's: it is never quoted in messages.
	URL string
	// Secret keys the HMAC-SHA256 signature (Detour-Signature); from the
	// environment, like every secret.
	Secret Secret
	// Events are the event types the hook receives (AlertEvents).
	Events []string
}

// AlertEvents are the event types a webhook may subscribe to, as the alerts
// package names them (alerts.Types).
var AlertEvents = []string{"fallback_started", "fallback_cleared", "all_down", "recovered", "key_disabled", "budget_reached"}

// checkAlerts validates the webhooks.
func (d *decoder) checkAlerts(bad func(key, format string, args ...any)) {
	for i, w := range d.cfg.Alerts.Webhooks {
		key := fmt.Sprintf("alerts.webhooks[%d]", i)
		if w.URL == "" {
			bad(key+".url", "is required: the receiver's https:// URL")
		} else if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(key+".url", "bad URL: want http:// or https://, e.g. https://alerts.example.com/detour")
		}
		if w.Secret == "" {
			bad(key+".secret", "is required (set it from an environment variable, e.g. secret: ${DETOUR_WEBHOOK_SECRET}): receivers check the signature with it")
		}
		if len(w.Events) == 0 {
			bad(key+".events", "is required: name the events to send (%s)", strings.Join(AlertEvents, ", "))
		}
		for j, e := range w.Events {
			if !slices.Contains(AlertEvents, e) {
				bad(fmt.Sprintf("%s.events[%d]", key, j), "unknown event %q: want one of %s", e, strings.Join(AlertEvents, ", "))
			}
		}
	}
}
