package fakeprovider

import (
	"context"
	"io"
	"strings"
	"testing"
)

// A misspelt rule field is refused, in a script file and at /_fake/script
// alike (both read rules with ParseRules): ignored, "tmes": 2 would make a
// rule that fails twice fail forever.
func TestParseRules_UnknownFieldRefused(t *testing.T) {
	_, err := ParseRules(strings.NewReader(`{"mode":"rate_limit","times":2}` + "\n" + `{"mode":"rate_limit","tmes":2}` + "\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), `unknown field "tmes"`) {
		t.Errorf("err = %v", err)
	}
	if _, err := ParseRules(strings.NewReader(`[{"mode":"ok","retry_after":"2s","delay":1,"honour_markers":true}]`)); err != nil {
		t.Errorf("a rule of known fields: %v", err)
	}
}

// A marker sent to a fake that serves no model named "primary" (a copy of a
// real configuration) says so and how to make a model fail, rather than that
// the conversation is on a fallback.
func TestMarkerNotes_NoPrimaryAnywhere(t *testing.T) {
	s := start(t)
	resp := post(t, context.Background(), s.BaseURL("openai")+"/chat/completions", "", chatBody("gpt-4o-mini", "x #fail:server_500", false))
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	want := `(fake provider) #fail:server_500 was not applied: markers act only on models whose name contains \"primary\", and no model this fake has served has one (this call went to openai/gpt-4o-mini). To make a model fail, script a rule for it`
	if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
}
