package classify

import (
	"regexp"
	"strings"
)

// The matching engine: a family is a list of rules; scan runs every family on a
// text once and first picks, in rank order, the family that decides.

// family is one meaning.
type family struct {
	name   string
	rank   rank
	reason Reason
	rules  []rule
}

// rule is one way of saying it.
type rule struct {
	name string
	// keys: the text must contain one of them; with no pattern, the first key
	// found is the match.
	keys  []string
	also  []string       // when set, the text must contain one of these too
	words bool           // keys count only as whole words
	re    *regexp.Regexp // when set, it must match too; its match is the evidence
	// unless, when set, vetoes the rule when it matches anywhere in the text.
	unless *regexp.Regexp
	// provider, when set, limits the rule to providers whose id contains it (C2).
	provider string
	// check, when set, must accept the text and the match.
	check func(c *textCtx, m string) bool
}

// lit is a rule of literal phrases.
func lit(name string, keys ...string) rule { return rule{name: name, keys: keys} }

// word is a rule of whole words or phrases (no letter, digit or '_' on either side).
func word(name string, keys ...string) rule { return rule{name: name, keys: keys, words: true} }

// pat is a rule gated by the "|"-separated literals keys and anchored by the
// pattern p ("~" stands for a gap inside one sentence).
func pat(name, keys, p string) rule {
	r := rule{name: name, re: compileGaps(p)}
	if keys != "" {
		r.keys = strings.Split(keys, "|")
	}
	return r
}

func (r rule) unlessRe(l *lazyRE) rule   { r.unless = l.get(); return r }
func (r rule) and(keys string) rule      { r.also = strings.Split(keys, "|"); return r }
func (r rule) only(provider string) rule { r.provider = provider; return r }
func (r rule) when(check func(c *textCtx, m string) bool) rule {
	r.check = check
	return r
}

// textCtx is what a rule may consult besides the text.
type textCtx struct {
	text     string
	provider string // lower-case provider id
	status   int    // effective status
	rawHTTP  int    // the HTTP status as given
	ev       *evidence
}

// gap is a run of characters inside one sentence and one part: the text has its
// sentence ends turned into part separators (see buildText), so "subject ~ verb"
// never pairs words of two sentences.
const gap = `[^|\n]*?`

// rankOf gives a Reason found by the field step the rank of its family (C1).
func rankOf(r Reason) rank {
	switch r {
	case ReasonAborted:
		return rankAborted
	case ReasonLocal:
		return rankLocal
	case ReasonNoErrorDetails:
		return rankNoDetails
	case ReasonContentFilter:
		return rankContentFilter
	case ReasonAuthPermanent:
		return rankAuthPermanent
	case ReasonBilling:
		return rankBilling
	case ReasonContextOverflow:
		return rankContext
	case ReasonOverloaded:
		return rankOverloaded
	case ReasonRateLimit:
		return rankRateLimit
	case ReasonModelNotFound:
		return rankModelNotFound
	case ReasonAuth:
		return rankAuth
	case ReasonFormat:
		return rankFormat
	}
	return rankGeneric
}

// match is what a family found.
type match struct {
	fam      *family
	rule     *rule
	evidence string
}

func (m match) ok() bool { return m.fam != nil }

// scan runs every family on c.text once and returns each family's first match
// (families are few, and a rule costs little until its keys are present).
func scan(c *textCtx) []match {
	fams := families()
	out := make([]match, len(fams))
	for i := range fams {
		f := &fams[i]
		for j := range f.rules {
			if ev, ok := f.rules[j].find(c); ok {
				out[i] = match{f, &f.rules[j], ev}
				break
			}
		}
	}
	return out
}

// first returns the first match, in rank order, among the families admit accepts.
func first(ms []match, admit func(*family) bool) match {
	for _, m := range ms {
		if m.ok() && (admit == nil || admit(m.fam)) {
			return m
		}
	}
	return match{}
}

// find reports whether the rule holds on c.text, with the matched text.
func (r *rule) find(c *textCtx) (string, bool) {
	t := c.text
	if r.provider != "" && !strings.Contains(c.provider, r.provider) {
		return "", false
	}
	if len(r.also) > 0 && !containsAny(t, r.also) {
		return "", false
	}
	ev := ""
	if len(r.keys) > 0 {
		found := false
		for _, k := range r.keys {
			if strings.Contains(t, k) && (!r.words || hasWord(t, k)) {
				ev, found = k, true
				break
			}
		}
		if !found {
			return "", false
		}
	}
	if r.re != nil {
		if ev = r.re.FindString(t); ev == "" {
			return "", false
		}
	}
	if r.unless != nil && r.unless.MatchString(t) {
		return "", false
	}
	if r.check != nil && !r.check(c, ev) {
		return "", false
	}
	return ev, true
}

// hasWord reports whether w occurs in t with no letter, digit or '_' on either side.
func hasWord(t, w string) bool {
	for from := 0; ; {
		i := strings.Index(t[from:], w)
		if i < 0 {
			return false
		}
		i += from
		j := i + len(w)
		if (i == 0 || !isWordByte(t[i-1])) && (j >= len(t) || !isWordByte(t[j])) {
			return true
		}
		from = i + 1
	}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}
