package classify

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestClassify_CorpusBlindSets runs issue 39's blind sets, each at its stated
// rate (testdata/corpus/README.md; each set's .score.md records its
// before-score, taken before any pass read it, and argues its misses). The
// last set is the honest predictor: no pass has tuned on it, so its rate is a
// floor a change must not lower.
func TestClassify_CorpusBlindSets(t *testing.T) {
	for _, set := range []struct {
		name         string
		cases, right int // at least
	}{
		{"errors-unseen6", 41, 40},
		{"errors-unseen7", 28, 27},
		{"errors-unseen8", 16, 14},
		{"errors-unseen9", 27, 27},
		{"errors-unseen10", 21, 21},
		{"errors-unseen11", 20, 20},
		{"errors-unseen12", 15, 14},
		{"errors-unseen13", 20, 20},
		{"errors-unseen14", 20, 20},
		{"errors-unseen15", 20, 19}, // 75% before issue 39's tenth pass, which tuned on it
		{"errors-unseen16", 22, 20}, // 59.1% before issue 39's eleventh pass, which tuned on it
		{"errors-unseen17", 23, 19}, // 78.3% before issue 39's twelfth pass, which tuned on it
		{"errors-unseen18", 18, 18}, // 83.3% before issue 39's thirteenth pass, which tuned on it
		{"errors-unseen19", 24, 22}, // 87.5% before issue 39's sixteenth pass, which tuned on it
		{"errors-unseen20", 24, 23}, // 91.7% before issue 39's fifteenth pass, which tuned on it
		{"errors-unseen21", 25, 21}, // 64.0% before issue 39's fourteenth pass, which tuned on it
		{"errors-unseen22", 23, 20}, // 73.9% before issue 39's seventeenth pass, which tuned on it
		{"errors-unseen23", 30, 30}, // 80.0% before issue 39's eighteenth pass: the declared predictor of passes ten to seventeen
		{"errors-unseen24", 20, 17}, // 70.0% before issue 39's twenty-second pass, which tuned on it
		{"errors-unseen25", 23, 13}, // 47.8% before issue 39's twentieth pass, which tuned on it; ten misses argued
		{"errors-unseen26", 25, 23}, // 80.0% before issue 39's nineteenth pass, which tuned on it
		{"errors-unseen27", 21, 19}, // 76.2% before issue 39's twenty-first pass, which tuned on it
		{"errors-unseen28", 32, 29}, // 87.5% before issue 39's twenty-third pass: the declared predictor of passes eighteen to twenty-two
	} {
		t.Run(set.name, func(t *testing.T) {
			cases := loadCorpus(t, "testdata/corpus/"+set.name+".jsonl")
			right := 0
			for _, c := range cases {
				f := Classify(c.response(), corpusNow)
				if string(f.Reason) == c.ExpectedReason && string(f.Class) == c.ExpectedClass {
					right++
				} else {
					t.Logf("miss %s: got %s/%s, want %s/%s (%s)", c.ID, f.Reason, f.Class, c.ExpectedReason, c.ExpectedClass, f.Why.Rule)
				}
				if c.RecoveryHint != nil && f.RecoveryAt.IsZero() && f.RetryAfter == 0 {
					t.Errorf("%s: recovery hint %q not read", c.ID, *c.RecoveryHint)
				}
			}
			if len(cases) < set.cases || right < set.right {
				t.Fatalf("%d of %d right, want at least %d of at least %d", right, len(cases), set.right, set.cases)
			}
		})
	}
}

// TestClassify_BlindSetsSecondLabeller holds the two-labeller check of issue
// 39's blind sets (testdata/corpus/README.md, "Two labellers"): a second
// labeller, who saw neither the labels nor the classifier, labelled every case
// of errors-unseen6 to 28 (testdata/second-labels.jsonl). The rate at which the
// two agree is the ceiling a classifier can be held to on these sets; the
// classifier must keep the cases both agree on, but for the argued misses.
func TestClassify_BlindSetsSecondLabeller(t *testing.T) {
	data, err := os.ReadFile("testdata/second-labels.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]corpusCase{}
	for n := 6; n <= 28; n++ {
		for _, c := range loadCorpus(t, fmt.Sprintf("testdata/corpus/errors-unseen%d.jsonl", n)) {
			cases[c.ID] = c
		}
	}
	var rows, agree, kept int
	for line := range strings.Lines(string(data)) {
		var l struct{ ID, Reason, Class string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		c, ok := cases[l.ID]
		if !ok || string(ReasonClass(Reason(l.Reason))) != l.Class {
			t.Fatalf("%s: not a blind-set case, or class %q does not follow reason %q", l.ID, l.Class, l.Reason)
		}
		delete(cases, l.ID)
		rows++
		if l.Reason != c.ExpectedReason {
			continue
		}
		agree++
		if f := Classify(c.response(), corpusNow); string(f.Reason) == l.Reason {
			kept++
		} else {
			t.Logf("both labellers say %s, the classifier %s: %s", l.Reason, f.Reason, l.ID)
		}
	}
	if len(cases) > 0 || rows != 538 || agree != 484 {
		t.Fatalf("%d rows (%d cases unlabelled), %d agree; README states 538 rows, 484 agree", rows, len(cases), agree)
	}
	if kept < 453 { // thirty-one argued misses, each in its set's score file
		t.Fatalf("the classifier keeps %d of the %d cases both labellers agree on, want at least 453", kept, agree)
	}
}
