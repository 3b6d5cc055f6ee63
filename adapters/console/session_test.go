package console

import (
	"encoding/json"
	"strings"
	"testing"
)

// A line of valid JSON with a field of the wrong type gets its error in the
// session it names; a line that is no JSON at all in the default one.
func TestJSONL_ErrorOfAMistypedFieldInItsSession(t *testing.T) {
	input := `{"session": "s7", "id": 5, "text": "hi"}` + "\n" + `{"session": "s8", "text": 3` + "\n"
	var out strings.Builder
	a := New(Options{Format: FormatJSONL, In: strings.NewReader(input), Out: &out})
	if got := collect(t, a); len(got) != 0 {
		t.Fatalf("inbound: %+v", got)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 error lines, got %q", out.String())
	}
	for i, want := range []string{"s7", "default"} {
		var o map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &o); err != nil || o["type"] != "error" || o["session"] != want {
			t.Errorf("line %d = %s (want an error of session %s)", i+1, lines[i], want)
		}
	}
}
