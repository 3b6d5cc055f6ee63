package sessions

import (
	"fmt"
	"strings"
	"testing"

	"github.com/detourbot/detour/adapters"
)

// covers H2: the earlier messages are bounded by the model's window (half of
// it), the newest kept.
func TestRenderEarlier_H2_BoundedByWindow(t *testing.T) {
	r := &Router{}
	var msgs []adapters.Earlier
	for i := range 12 {
		msgs = append(msgs, adapters.Earlier{User: "slack:U1", Text: fmt.Sprintf("message %02d %s", i, strings.Repeat("x", 100))})
	}
	all, _ := r.renderEarlier(msgs, 0)
	if strings.Count(all, "\n") != 11 {
		t.Fatalf("want 12 lines:\n%s", all)
	}
	some, _ := r.renderEarlier(msgs, 100)
	if EstimateTokens(some) > 110 || !strings.Contains(some, "message 11") || strings.Contains(some, "message 00") {
		t.Fatalf("want the newest lines within 100 tokens:\n%s", some)
	}
}

// covers R16: a summary stays within its token cap whatever the model wrote.
func TestBoundSummary_R16(t *testing.T) {
	s := boundSummary("  "+strings.Repeat("word ", 500), 60)
	if n := EstimateTokens(s); n > 61 || !strings.HasSuffix(s, "…") {
		t.Fatalf("%d tokens: %q", n, s)
	}
	if got := boundSummary(" short ", 60); got != "short" {
		t.Fatalf("%q", got)
	}
}
