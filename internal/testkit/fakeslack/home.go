package fakeslack

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// The App Home tab (issue 38's board).
//
//   - Opening it: AppHomeOpened sends app_home_opened
//     (https://docs.slack.dev/reference/events/app_home_opened: user, channel,
//     tab "home", and the view when one was published), only to an app
//     subscribed to it with the Home tab enabled (HomeTabOff, InstallManifest).
//   - views.publish (https://docs.slack.dev/reference/methods/views.publish):
//     needs no scope ("scopes": none on its reference page), Tier 4 (100+ per
//     minute, DefaultMethodLimits), user_id and view required (invalid_arguments),
//     not_enabled when the app's Home tab is not enabled, view_too_large past
//     250 kB. The view is a home view ("type": "home", the App Home surface,
//     https://docs.slack.dev/surfaces/app-home) of at most 100 blocks ("up to 100 blocks in modals or Home tabs",
//     https://docs.slack.dev/reference/block-kit/blocks), each within its
//     block's limits: a header's plain_text at most 150 characters
//     (https://docs.slack.dev/reference/block-kit/blocks/header-block), a
//     section's text at most 3,000 and at most 10 fields of at most 2,000
//     (https://docs.slack.dev/reference/block-kit/blocks/section-block), a
//     context block at most 10 elements
//     (https://docs.slack.dev/reference/block-kit/blocks/context-block), a
//     block_id at most 255. Slack refuses a view past these with
//     invalid_arguments and the reason in response_metadata.messages; so does
//     the fake.

// View limits of views.publish.
const (
	MaxViewBlocks   = 100
	MaxViewBytes    = 250 << 10
	MaxHeaderText   = 150
	MaxSectionField = 2000
	MaxFields       = 10
	MaxContextElems = 10
)

// HomeView is one view published to a user's Home tab.
type HomeView struct {
	User   string
	At     time.Time
	View   json.RawMessage
	Blocks []map[string]any
}

// Text is every text of the view's blocks, joined by newlines, for tests.
func (h HomeView) Text() string {
	var out []byte
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if t, ok := c.(string); ok && k == "text" {
					out = append(append(out, t...), '\n')
				} else {
					walk(c)
				}
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	for _, b := range h.Blocks {
		walk(map[string]any(b))
	}
	return string(out)
}

// AppHomeOpened sends app_home_opened for user's Home tab; false when the app
// would not get it (HomeTabOff).
func (s *Server) AppHomeOpened(user string) bool {
	s.mu.Lock()
	off := s.HomeTabOff
	s.mu.Unlock()
	if off {
		return false
	}
	s.PushEvent(map[string]any{"type": "app_home_opened", "user": user, "channel": "D" + user, "tab": "home", "event_ts": s.NewTS()})
	return true
}

// Homes returns the views published to user's Home tab, oldest first.
func (s *Server) Homes(user string) []HomeView {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]HomeView(nil), s.homes[user]...)
}

// WaitHome waits until user's Home tab has a view for which ok holds (nil =
// any), and returns the newest such view.
func (s *Server) WaitHome(user string, timeout time.Duration, ok func(HomeView) bool) (HomeView, bool) {
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		hs, ch := s.homes[user], s.changed
		s.mu.Unlock()
		for i := len(hs) - 1; i >= 0; i-- {
			if ok == nil || ok(hs[i]) {
				return hs[i], true
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			return HomeView{}, false
		}
		select {
		case <-ch:
		case <-time.After(left):
		}
	}
}

func (s *Server) handleViewsPublish(w http.ResponseWriter, r *http.Request, ci int) {
	user, raw := r.Form.Get("user_id"), r.Form.Get("view")
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		// views.publish takes a JSON body too (its reference page: "application/json"),
		// as slack-go sends it; the view is then an object, not a string.
		var body struct {
			UserID string          `json:"user_id"`
			View   json.RawMessage `json:"view"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 2*MaxViewBytes)).Decode(&body); err == nil {
			user, raw = body.UserID, string(body.View)
			if raw == "null" {
				raw = ""
			}
		}
	}
	invalid := func(why string) {
		s.outcome(ci, "invalid_arguments")
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_arguments", "response_metadata": map[string]any{"messages": []string{why}}})
	}
	if user == "" {
		invalid("[ERROR] missing required field: user_id")
		return
	}
	if raw == "" {
		invalid("[ERROR] missing required field: view")
		return
	}
	s.mu.Lock()
	off := s.HomeTabOff
	s.mu.Unlock()
	if off {
		s.fail(w, ci, "not_enabled")
		return
	}
	if len(raw) > MaxViewBytes {
		s.fail(w, ci, "view_too_large")
		return
	}
	var view struct {
		Type   string           `json:"type"`
		Blocks []map[string]any `json:"blocks"`
	}
	if err := json.Unmarshal([]byte(raw), &view); err != nil {
		invalid("[ERROR] failed to parse view")
		return
	}
	if view.Type != "home" {
		invalid("[ERROR] must be 'home' [json-pointer:/view/type]")
		return
	}
	if why := checkViewBlocks(view.Blocks); why != "" {
		invalid(why)
		return
	}
	s.mu.Lock()
	if s.homes == nil {
		s.homes = map[string][]HomeView{}
	}
	s.homes[user] = append(s.homes[user], HomeView{User: user, At: s.Now(), View: json.RawMessage(raw), Blocks: view.Blocks})
	s.notifyLocked()
	s.mu.Unlock()
	writeJSON(w, map[string]any{"ok": true, "view": map[string]any{"id": "V" + user, "type": "home", "blocks": view.Blocks}})
}

// checkViewBlocks is why a Home tab's blocks break Slack's limits, or "".
func checkViewBlocks(blocks []map[string]any) string {
	if len(blocks) > MaxViewBlocks {
		return "[ERROR] no more than 100 items allowed [json-pointer:/view/blocks]"
	}
	runes := func(v any) int {
		m, _ := v.(map[string]any)
		t, _ := m["text"].(string)
		return utf8.RuneCountInString(t)
	}
	for _, b := range blocks {
		if id, _ := b["block_id"].(string); utf8.RuneCountInString(id) > maxBlockID {
			return "[ERROR] must be less than 256 characters [json-pointer:/view/blocks/block_id]"
		}
		switch b["type"] {
		case "header":
			if runes(b["text"]) > MaxHeaderText {
				return "[ERROR] must be less than 151 characters [json-pointer:/view/blocks/text/text]"
			}
		case "section":
			if runes(b["text"]) > maxSectionText {
				return "[ERROR] must be less than 3001 characters [json-pointer:/view/blocks/text/text]"
			}
			fields, _ := b["fields"].([]any)
			if len(fields) > MaxFields {
				return "[ERROR] no more than 10 items allowed [json-pointer:/view/blocks/fields]"
			}
			for _, f := range fields {
				if runes(f) > MaxSectionField {
					return "[ERROR] must be less than 2001 characters [json-pointer:/view/blocks/fields/text]"
				}
			}
		case "context":
			if els, _ := b["elements"].([]any); len(els) > MaxContextElems {
				return "[ERROR] no more than 10 items allowed [json-pointer:/view/blocks/elements]"
			}
		}
	}
	return ""
}
