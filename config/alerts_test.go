package config

import (
	"fmt"
	"strings"
	"testing"
)

// alertsBase is a working configuration; the tests append an alerts section.
const alertsBase = `providers:
  openai: {base_url: https://api.openai.com/v1}
agents:
  defaults:
    model: {primary: openai/gpt-4o-mini}
`

// alerts.webhooks decodes the URL, the secret from the environment (never
// printed) and the events.
func TestParse_AlertsWebhooks(t *testing.T) {
	src := alertsBase + `alerts:
  webhooks:
    - url: https://hooks.example.com/detour/T0KEN
      secret: ${DETOUR_TEST_HOOK_SECRET}
      events: [fallback_started, all_down, recovered]
    - url: http://127.0.0.1:9000/in
      secret: ${DETOUR_TEST_HOOK_SECRET}
      events: [key_disabled, budget_reached, fallback_cleared]
`
	cfg, err := Parse("c.yaml", []byte(src), fakeEnv(map[string]string{"DETOUR_TEST_HOOK_SECRET": "CANARY-hook-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Alerts.Webhooks
	if len(w) != 2 || w[0].URL != "https://hooks.example.com/detour/T0KEN" || w[0].Secret.Reveal() != "CANARY-hook-secret" ||
		strings.Join(w[0].Events, ",") != "fallback_started,all_down,recovered" || len(w[1].Events) != 3 {
		t.Fatalf("%+v", w)
	}
	if s := fmt.Sprintf("%v %+v %#v", cfg.Alerts, cfg.Alerts, cfg.Alerts); strings.Contains(s, "CANARY") {
		t.Fatalf("the secret prints: %s", s)
	}
}

// Broken webhooks give file:line: key errors, never quoting the URL (it may
// hold the receiver's token) or the secret.
func TestParse_AlertsWebhooksErrors(t *testing.T) {
	tests := []struct {
		name, alerts string
		line         int
		key, msg     string
	}{
		{"unset secret", "    - url: https://h.example/T0KEN\n      secret: ${DETOUR_TEST_UNSET_HOOK}\n      events: [all_down]\n",
			9, "alerts.webhooks[0].secret", "DETOUR_TEST_UNSET_HOOK is not set"},
		{"no secret", "    - url: https://h.example/T0KEN\n      events: [all_down]\n",
			8, "alerts.webhooks[0].secret", "is required"},
		{"bad url", "    - url: ftp://h.example/T0KEN\n      secret: CANARY-literal\n      events: [all_down]\n",
			8, "alerts.webhooks[0].url", "want http:// or https://"},
		{"no url", "    - secret: ${DETOUR_TEST_HOOK}\n      events: [all_down]\n",
			8, "alerts.webhooks[0].url", "is required"},
		{"unknown event", "    - url: https://h.example/T0KEN\n      secret: ${DETOUR_TEST_HOOK}\n      events: [all_down, fallback]\n",
			10, "alerts.webhooks[0].events[1]", `unknown event "fallback"`},
		{"no events", "    - url: https://h.example/T0KEN\n      secret: ${DETOUR_TEST_HOOK}\n",
			8, "alerts.webhooks[0].events", "is required"},
		{"unknown key", "    - url: https://h.example/T0KEN\n      secret: ${DETOUR_TEST_HOOK}\n      events: [all_down]\n      retries: 3\n",
			11, "alerts.webhooks[0].retries", "unknown key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := alertsBase + "alerts:\n  webhooks:\n" + tc.alerts
			_, err := Parse("c.yaml", []byte(src), fakeEnv(map[string]string{"DETOUR_TEST_HOOK": "CANARY-env"}))
			if err == nil {
				t.Fatal("want an error")
			}
			var hit *Error
			for _, e := range Errors(err) {
				if e.Key == tc.key {
					hit = e
				}
			}
			if hit == nil || hit.File != "c.yaml" || hit.Line != tc.line || !strings.Contains(hit.Msg, tc.msg) {
				t.Fatalf("want c.yaml:%d: %s: ...%s..., got %v", tc.line, tc.key, tc.msg, err)
			}
			if s := err.Error(); strings.Contains(s, "CANARY") || strings.Contains(s, "T0KEN") {
				t.Fatalf("the error quotes the secret or the URL: %s", s)
			}
		})
	}
}
