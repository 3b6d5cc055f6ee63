package notices

import (
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

// covers A2, N1: a fallback caused by a refused response names what was
// refused, never "invalid request"; when every model refused, the user's one
// message says it once.
func TestTexts_A2_RefusedResponse(t *testing.T) {
	f := &failover.Failure{Reason: classify.ReasonRefusedResponse, Class: classify.ClassTransient, Status: 307,
		Provider: "a", Model: "m", Message: "redirect to https://edge.example/… (HTTP 307, never followed)"}
	n := ForChange(State{}, State{Selected: "a/m", Active: "b/m", Reason: f.Reason, Status: f.Status, Words: f.Describe()})
	want := "↪️ model fallback: b/m (selected a/m; response refused by detour: redirect to https://edge.example/… (HTTP 307, never followed))"
	if n != want {
		t.Fatalf("notice\n got %q\nwant %q", n, want)
	}
	// Read back from the store (no Words): the plain words of the reason.
	if n := ForChange(State{}, State{Selected: "a/m", Active: "b/m", Reason: f.Reason, Status: f.Status}); !strings.HasSuffix(n, "; response refused by detour)") {
		t.Fatalf("stored notice %q", n)
	}
	s := &failover.SummaryError{Attempts: []failover.AttemptRecord{{Candidate: failover.Candidate{Provider: "a", Model: "m"}, Failure: f}}}
	msg := UserFailure(s, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if strings.Count(msg, "redirect to https://edge.example/") != 1 || strings.Contains(msg, "invalid request") ||
		!strings.HasPrefix(msg, "a/m failed: response refused by detour: redirect to") {
		t.Fatalf("user message %q", msg)
	}
	if txt := FailureText(f); strings.Count(txt, "redirect to") != 1 {
		t.Fatalf("failure text %q", txt)
	}
}

// covers A2, A4, V4: the admin report says what to do about a refused response
// (the provider's address or the caps) and a local failure (the bot itself).
func TestAdminReport_A2_A4(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := AdminReport([]ReportLine{
		{Model: "a/m", Provider: "a", Reason: classify.ReasonRefusedResponse, Error: "redirect to https://edge.example/… (HTTP 307, never followed)"},
		{Model: "b/m", Provider: "b", Reason: classify.ReasonLocal, Error: "socket: too many open files"},
	}, "console:x", now)
	for _, want := range []string{"providers.a.base_url", "the bot itself failed"} {
		if !strings.Contains(r, want) {
			t.Errorf("report lacks %q:\n%s", want, r)
		}
	}
}
