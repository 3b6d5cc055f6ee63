package failover

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
	"time"
)

// corpusCase is one line of testdata/corpus/errors-public.jsonl.
type corpusCase struct {
	ID             string            `json:"id"`
	Provider       string            `json:"provider"`
	HTTPStatus     *int              `json:"http_status"`
	Headers        map[string]string `json:"headers"`
	Body           string            `json:"body"`
	Stream         bool              `json:"stream"`
	ExpectedReason string            `json:"expected_reason"`
	ExpectedClass  string            `json:"expected_class"`
	RecoveryHint   *string           `json:"recovery_at_hint"`
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	f, err := os.Open("testdata/corpus/errors-public.jsonl")
	if err != nil {
		t.Fatalf("open corpus: %v", err)
	}
	defer f.Close()
	var out []corpusCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<22)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var c corpusCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("corpus line %d: %v", len(out)+1, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (c corpusCase) response() Response {
	r := Response{Provider: c.Provider, Headers: c.Headers, Body: c.Body, Stream: c.Stream}
	if c.HTTPStatus != nil {
		r.Status = *c.HTTPStatus
	}
	return r
}

// corpusNow is a fixed clock for the corpus: early 2026, before every stated reset.
var corpusNow = time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)

// TestClassify_Corpus runs every public corpus case (covers C1-C12 on real bodies).
func TestClassify_Corpus(t *testing.T) {
	cases := loadCorpus(t)
	if len(cases) < 90 {
		t.Fatalf("corpus has %d cases, want >= 90", len(cases))
	}
	for _, c := range cases {
		t.Run(c.ID, func(t *testing.T) {
			f := Classify(c.response(), corpusNow)
			if string(f.Reason) != c.ExpectedReason || string(f.Class) != c.ExpectedClass {
				t.Errorf("got %s/%s, want %s/%s (code %q, message %q)", f.Reason, f.Class,
					c.ExpectedReason, c.ExpectedClass, f.Code, f.Message)
			}
			if c.RecoveryHint != nil && f.RecoveryAt.IsZero() && f.RetryAfter == 0 {
				t.Errorf("recovery hint %q not parsed", *c.RecoveryHint)
			}
			if len([]rune(f.Message)) > maxPreviewRunes {
				t.Errorf("message preview too long: %d runes", len([]rune(f.Message)))
			}
		})
	}
}

// TestPhraseTable_Consistent: the named lists point at the intended rows.
func TestPhraseTable_Consistent(t *testing.T) {
	checks := map[int]string{catORKeyLimit: "key limit exceeded", catQuotaExhausted: "quota has been exhausted", lAuth: "invalid api key",
		catStatusWords: "status", catRecoveryWords: "retry"}
	for c, p := range checks {
		if c >= len(phraseTable) || phraseTable[c][0] != p && phraseTable[c][1] != p && phraseTable[c][2] != p {
			t.Errorf("phrase list %d does not hold %q", c, p)
		}
	}
	if len(phraseTable) > 64 {
		t.Fatalf("%d phrase lists, max 64", len(phraseTable))
	}
}
