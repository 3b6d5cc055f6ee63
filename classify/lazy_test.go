package classify

import (
	"os"
	"os/exec"
	"sync"
	"testing"
)

// TestClassify_PatternsCompiledOnFirstFailure: in a fresh process no pattern is
// compiled before the first Classify, eight first failures at once get the
// verdict one gets alone (sync.Once; run with -race), and a failure compiles
// only the rule patterns whose keys its text holds.
func TestClassify_PatternsCompiledOnFirstFailure(t *testing.T) {
	if os.Getenv("CLASSIFY_COLD_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestClassify_PatternsCompiledOnFirstFailure$", "-test.v")
		cmd.Env = append(os.Environ(), "CLASSIFY_COLD_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("fresh process: %v\n%s", err, out)
		}
		return
	}
	lazies := []*lazyRE{reURL, reTitle, reLeadStatus, reNamedStatus, reISOTime, reClock, reStopReasonText,
		reRequestWords, reGoogleMetric, reAccessEnded, reLimitHit, reCondIntl}
	for _, l := range lazies {
		if l.re != nil {
			t.Fatalf("%q compiled before any failure", l.src)
		}
	}
	r := Response{Provider: "openai", Status: 429, Headers: map[string]string{"retry-after": "2"},
		Body: `{"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM). Please try again in 18.6s.","code":"rate_limit_exceeded"}}`}
	got := make([]Verdict, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i] = Classify(r, corpusNow) })
	}
	wg.Wait()
	for i, v := range got {
		if v.Reason != ReasonRateLimit || v.RetryAfter == 0 || v.Why.Rule != got[0].Why.Rule {
			t.Errorf("goroutine %d: %s %v %q", i, v.Reason, v.RetryAfter, v.Why.Rule)
		}
	}
	// the failure compiled the patterns its words called for, not the table
	total, compiled := 0, 0
	for _, f := range families() {
		for _, r := range f.rules {
			for _, a := range append(append([]alt{}, r.alts...), r.unless...) {
				total++
				if a.re.re != nil {
					compiled++
				}
			}
		}
	}
	if total < 500 || compiled*20 > total {
		t.Fatalf("%d of %d rule patterns compiled by one failure", compiled, total)
	}
	t.Logf("%d of %d rule patterns compiled by one failure", compiled, total)
}
