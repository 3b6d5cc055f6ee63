package classify

import (
	"strings"
	"testing"
)

// TestPartLocal_SameAsWholeText: an alternative read part by part (its tails
// first) finds what its expression finds on the whole text, on every corpus
// text and on texts made to cross parts, lines and word boundaries.
func TestPartLocal_SameAsWholeText(t *testing.T) {
	texts := []string{
		"quota metric a | quota metric b | you exceeded your current quota",
		"the quota | was exceeded", "quota\nexceeded", "quota exceeded|quota reached",
		"xquota exceeded quota limit", "daily | limit", "5 hours limit", "a 5-hour limit | 3 days window",
		"your account | has been suspended", "account suspendedaccount suspended",
	}
	for _, p := range corpusFiles {
		for _, c := range loadCorpus(t, p) {
			texts = append(texts, gather(c.response()).text)
		}
	}
	local := 0
	families := families()
	for i := range families {
		for j := range families[i].rules {
			for k := range families[i].rules[j].alts {
				a := &families[i].rules[j].alts[k]
				if a.tails == nil {
					continue
				}
				local++
				for _, text := range texts {
					if got, want := a.findInParts(text), a.findWhole(text); got != want {
						t.Errorf("%s/%s %q on %q: parts %q, whole %q", families[i].name, families[i].rules[j].name, a.re, text, got, want)
					}
				}
			}
		}
	}
	if local < 100 {
		t.Fatalf("only %d alternatives read part by part", local)
	}
}

// TestPartLocal_Shapes: which patterns may be read part by part.
func TestPartLocal_Shapes(t *testing.T) {
	for _, c := range []struct {
		p         string
		tails     string
		needFirst bool
		first     string
	}{
		{`quota\b` + gap + `\b(exceeded|reached|limit)\b`, "exceeded reached limit", false, ""},
		{`quota\b` + gap + `\b(has been |is )?(exhausted|used up)\b`, "has been  is  exhausted used up", false, ""},
		{`\d+[ -]?hours?\b` + gap + `\blimits?\b`, "limit", true, "0123456789"},
		{`quota\W` + gap + `\bexceeded\b`, "", false, ""},     // \W matches '|'
		{`quota.` + gap + `\bexceeded\b`, "", false, ""},      // so does '.'
		{`quota` + gap + `exceeded$`, "", false, ""},          // the end of one part is not the text's
		{`\bquota` + gap + `exceeded`, "", false, ""},         // nor its start
		{`quota exceeded`, "", false, ""},                     // no gap
		{`quota\b` + gap + `\b\w+ exceeded`, "", false, ""},   // no literal after the gap
		{`[a-z]+ quota\b` + gap + `\bexceeded`, "", true, ""}, // no first byte known
	} {
		tails, first := partLocalTails(rx(c.p).String(), c.needFirst)
		if got := strings.Join(tails, " "); got != c.tails || first != c.first {
			t.Errorf("%s: tails %q first %q, want %q %q", c.p, got, first, c.tails, c.first)
		}
	}
}

// FuzzPartLocal: on any text, reading part by part agrees with the whole text.
func FuzzPartLocal(f *testing.F) {
	for _, s := range []string{"quota metric a | you exceeded your quota", "your account\nhas been suspended", "5 hours | limit", "e.g. daily limit reached"} {
		f.Add(s)
	}
	var alts []*alt
	families := families()
	for i := range families {
		for j := range families[i].rules {
			for k := range families[i].rules[j].alts {
				if a := &families[i].rules[j].alts[k]; a.tails != nil {
					alts = append(alts, a)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		text = strings.ToLower(text)
		for _, a := range alts {
			if got, want := a.findInParts(text), a.findWhole(text); got != want {
				t.Fatalf("%q on %q: parts %q, whole %q", a.re, text, got, want)
			}
		}
	})
}
