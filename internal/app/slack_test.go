package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/internal/app"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
)

// channels.slack.suggested_prompts reach the Slack adapter: a new chat in the AI
// app container is offered them.
func TestApp_SlackSuggestedPromptsFromConfig(t *testing.T) {
	fake := fakeslack.New()
	fake.Start()
	defer fake.Close()
	yaml := `storage: {driver: sqlite, dsn: "` + t.TempDir() + `/detour.db"}
channels:
  console: {enabled: false}
  slack:
    enabled: true
    app_token: ${SLACK_APP_TOKEN}
    bot_token: ${SLACK_BOT_TOKEN}
    api_url: "` + fake.URL() + `"
    suggested_prompts: ["What can you do?", "Which model answers?"]
providers:
  p1: {base_url: "http://127.0.0.1:1/v1"}
agents:
  defaults:
    model: {primary: p1/alpha}
`
	env := map[string]string{"SLACK_APP_TOKEN": "xapp-test", "SLACK_BOT_TOKEN": "xoxb-test"}
	cfg, err := config.Parse("t.yaml", []byte(yaml), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	sys, err := app.New(context.Background(), cfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- sys.Serve(ctx) }()
	defer func() { cancel(); <-served }()
	if err := fake.WaitConnected(1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	fake.AssistantThreadStarted("D1", "U1", "")
	c, err := fake.WaitCall(5*time.Second, func(c fakeslack.Call) bool { return c.Method == "assistant.threads.setSuggestedPrompts" })
	if err != nil {
		t.Fatal(err)
	}
	var prompts []struct{ Message string }
	if err := json.Unmarshal([]byte(c.Arg("prompts")), &prompts); err != nil || len(prompts) != 2 || prompts[1].Message != "Which model answers?" {
		t.Fatalf("prompts = %s", c.Arg("prompts"))
	}
}
