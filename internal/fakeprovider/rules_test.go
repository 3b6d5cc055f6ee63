package fakeprovider

import (
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
