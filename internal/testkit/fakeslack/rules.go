package fakeslack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Scopes, membership and sizes: the rules a real workspace holds an installed
// app to (see the package doc, "Scopes, membership and sizes").

// methodScopes are the bot token scopes each Web API method accepts (any one of
// them), as each method's reference page lists them
// (https://docs.slack.dev/reference/methods/<method>, "Scopes").
var methodScopes = map[string][]string{
	"chat.postMessage":   {"chat:write"}, // https://docs.slack.dev/reference/methods/chat.postMessage
	"chat.postEphemeral": {"chat:write"}, // https://docs.slack.dev/reference/methods/chat.postEphemeral
	"chat.update":        {"chat:write"}, // https://docs.slack.dev/reference/methods/chat.update
	"chat.delete":        {"chat:write"}, // https://docs.slack.dev/reference/methods/chat.delete
	"chat.startStream":   {"chat:write"}, // https://docs.slack.dev/reference/methods/chat.startStream
	"chat.appendStream":  {"chat:write"}, // https://docs.slack.dev/reference/methods/chat.appendStream
	"chat.stopStream":    {"chat:write"}, // https://docs.slack.dev/reference/methods/chat.stopStream
	// Either, "for the time being" (https://docs.slack.dev/changelog/2026/03/05/set-status-scope-update).
	"assistant.threads.setStatus":           {"chat:write", "assistant:write"},
	"assistant.threads.setSuggestedPrompts": {"assistant:write"}, // https://docs.slack.dev/reference/methods/assistant.threads.setSuggestedPrompts
	"assistant.threads.setTitle":            {"assistant:write"}, // https://docs.slack.dev/reference/methods/assistant.threads.setTitle
}

// conversationScope is the scope conversations.info needs for a conversation of
// each kind (https://docs.slack.dev/reference/methods/conversations.info):
// public channels, private channels (here: ids starting with G), DMs, group DMs.
func conversationScope(channel string, groupDM bool) string {
	switch {
	case groupDM:
		return "mpim:read"
	case strings.HasPrefix(channel, "G"):
		return "groups:read"
	case strings.HasPrefix(channel, "D"):
		return "im:read"
	case strings.HasPrefix(channel, "M"):
		return "mpim:read"
	}
	return "channels:read"
}

// Slack's sizes the fake refuses past.
const (
	// MaxText is what chat.postMessage's text may hold: "Slack will truncate
	// messages containing more than 40,000 characters"; the method's error
	// list has msg_too_long (https://docs.slack.dev/reference/methods/chat.postMessage).
	MaxText = 40000
	// MaxBlocks is how many blocks a message may hold
	// (https://docs.slack.dev/reference/block-kit/blocks: "up to 50 blocks in each message").
	MaxBlocks = 50
)

// InstallManifest installs the app as an app manifest describes it
// (https://docs.slack.dev/reference/app-manifest): the bot token gets the
// manifest's bot scopes (oauth_config.scopes.bot), and only the events it
// subscribes to (settings.event_subscriptions.bot_events) are delivered: without
// message.channels, only mentions and DMs are (OnlyMentions).
func (s *Server) InstallManifest(manifest []byte) error {
	var m struct {
		OAuth struct {
			Scopes struct {
				Bot []string `yaml:"bot"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
		Settings struct {
			Events struct {
				Bot []string `yaml:"bot_events"`
			} `yaml:"event_subscriptions"`
		} `yaml:"settings"`
		Features struct {
			AppHome struct {
				HomeTab bool `yaml:"home_tab_enabled"`
			} `yaml:"app_home"`
		} `yaml:"features"`
	}
	if err := yaml.Unmarshal(manifest, &m); err != nil {
		return fmt.Errorf("fakeslack: manifest: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Scopes = slices.Clone(m.OAuth.Scopes.Bot)
	s.OnlyMentions = !slices.Contains(m.Settings.Events.Bot, "message.channels")
	// home.go: without the Home tab, views.publish is refused; without the
	// event, opening the tab is not announced.
	s.HomeTabOff = !m.Features.AppHome.HomeTab || !slices.Contains(m.Settings.Events.Bot, "app_home_opened")
	return nil
}

// Leave makes the bot no member of channel: posting there is refused with
// not_in_channel, and conversations.info says is_member false.
func (s *Server) Leave(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notIn[channel] = true
}

// refuse answers why Slack would refuse a call as the installed app makes it,
// or "": a missing scope (with needed and provided, as Slack's answer has
// them), a channel the bot is not in, text or blocks past Slack's sizes.
func (s *Server) refuse(w http.ResponseWriter, method string, form url.Values, ci int) bool {
	s.mu.Lock()
	scopes, notIn, groupDM := s.Scopes, s.notIn[form.Get("channel")], s.groupDMs[form.Get("channel")]
	s.mu.Unlock()
	needed := methodScopes[method]
	switch method {
	case "conversations.info":
		needed = []string{conversationScope(form.Get("channel"), groupDM)}
	case "conversations.replies":
		needed = []string{historyScope(form.Get("channel"), groupDM)} // history.go
	}
	if scopes != nil && len(needed) > 0 && !slices.ContainsFunc(needed, func(n string) bool { return slices.Contains(scopes, n) }) {
		s.outcome(ci, "missing_scope")
		writeJSON(w, map[string]any{"ok": false, "error": "missing_scope", "needed": strings.Join(needed, ","),
			"provided": strings.Join(scopes, ",")})
		return true
	}
	code := ""
	switch method {
	case "chat.postMessage", "chat.postEphemeral", "chat.startStream":
		// "not_in_channel: Cannot post user messages to a channel they are not in"
		// (https://docs.slack.dev/reference/methods/chat.postMessage); a DM is the bot's own.
		if notIn && !strings.HasPrefix(form.Get("channel"), "D") {
			code = "not_in_channel"
		}
	}
	if code == "" && utf8.RuneCountInString(form.Get("text")) > MaxText {
		code = "msg_too_long"
	}
	if code == "" && form.Get("blocks") != "" {
		var blocks []json.RawMessage
		if json.Unmarshal([]byte(form.Get("blocks")), &blocks) == nil && len(blocks) > MaxBlocks {
			code = "invalid_blocks"
		}
	}
	if code == "" {
		return false
	}
	s.fail(w, ci, code)
	return true
}
