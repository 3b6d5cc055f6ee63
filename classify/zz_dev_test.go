package classify

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"
)

func TestDevScore(t *testing.T) {
	for _, p := range []string{"testdata/corpus/errors-public.jsonl", "testdata/corpus/errors-peer.jsonl", os.Getenv("EXTRA")} {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<22)
		n, ok := 0, 0
		for sc.Scan() {
			var c struct {
				ID, Provider, Body string
				HTTPStatus         *int              `json:"http_status"`
				Headers            map[string]string `json:"headers"`
				Stream             bool
				ExpectedReason     string `json:"expected_reason"`
				ExpectedClass      string `json:"expected_class"`
			}
			json.Unmarshal(sc.Bytes(), &c)
			n++
			st := 0
			if c.HTTPStatus != nil {
				st = *c.HTTPStatus
			}
			g := Classify(Response{Provider: c.Provider, Status: st, Headers: c.Headers, Body: c.Body, Stream: c.Stream}, time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC))
			if string(g.Reason) == c.ExpectedReason && string(g.Class) == c.ExpectedClass {
				ok++
			}
			if os.Getenv("V") == "all" || os.Getenv("V") != "" && !(string(g.Reason) == c.ExpectedReason) {
				fmt.Printf("MISS %s got %s want %s [%s %s %q] | %d %.150q\n", c.ID, g.Reason, c.ExpectedReason, g.Why.Step, g.Why.Rule, g.Why.Evidence, st, c.Body)
			}
		}
		fmt.Printf("%s %d/%d %.3f\n", p, ok, n, float64(ok)/float64(n))
	}
}
