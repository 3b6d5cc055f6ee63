//go:build cgo

package sessions

import (
	"strings"
	"testing"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// covers V1, V2: a provider's 500 is logged with the reason the metrics count
// it under (classify.Outcome: server_error), never as "timeout (HTTP 500)":
// the client's "llm call failed" line, the model_fallback_decision event and
// its detail alike.
func TestLogs_V1_V2_ServerErrorIsLoggedAsTheMetricsCountIt(t *testing.T) {
	testdb.Each(t, testLogsServerError)
}

func testLogsServerError(t *testing.T, driver string) {
	h := newHarness(t, driver)
	h.fake.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeServer500, Times: 1})
	expect(t, h.say(key1, "hello"), "notice,reply")
	want := classify.Outcome(classify.ReasonTimeout, 500) // what /metrics label the call with
	if want != "server_error" {
		t.Fatalf("setup: the metrics' outcome of a 500 is %q", want)
	}
	logs := h.logs.String()
	var failed, decision string
	for _, l := range strings.Split(logs, "\n") {
		switch {
		case strings.Contains(l, `msg="llm call failed"`):
			failed = l
		case strings.Contains(l, "msg=model_fallback_decision") && strings.Contains(l, "fallbackStepFromModel="+mPrimary):
			decision = l
		}
	}
	if failed == "" || decision == "" {
		t.Fatalf("no llm failure or fallback decision logged:\n%s", logs)
	}
	if !strings.Contains(failed, " reason="+want+" ") || !strings.Contains(failed, " status=500 ") {
		t.Errorf("the client logs the 500 with another reason than the metrics' %s:\n%s", want, failed)
	}
	if !strings.Contains(decision, "fallbackStepFromFailureReason="+want) || !strings.Contains(decision, `fallbackStepFromFailureDetail="`+want+` (HTTP 500)`) {
		t.Errorf("V2: the decision names the 500 otherwise than the metrics (%s):\n%s", want, decision)
	}
	if strings.Contains(logs, "timeout (HTTP 5") || strings.Contains(logs, "reason=timeout status=5") {
		t.Errorf("a server error is logged as a timeout:\n%s", logs)
	}
}
