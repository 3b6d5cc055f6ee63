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
	also  []string // when set, the text must contain one of these too
	words bool     // keys count only as whole words
	alts  []alt    // when set, one must match too; its match is the evidence
	// unless, when set, vetoes the rule when it matches anywhere in the text.
	unless []alt
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
	r := rule{name: name, alts: alternatives(p)}
	if keys != "" {
		r.keys = strings.Split(keys, "|")
	}
	return r
}

func (r rule) unlessRe(l *lazyRE) rule                         { r.unless = alternatives(l.String()); return r }
func (r rule) and(keys string) rule                            { r.also = strings.Split(keys, "|"); return r }
func (r rule) only(provider string) rule                       { r.provider = provider; return r }
func (r rule) when(check func(c *textCtx, m string) bool) rule { r.check = check; return r }

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

// alt is one alternative of a rule's pattern, compiled on its own, so that one
// that starts with a literal is found by a substring search (Go's regexp skips
// to its literal prefix; a leading \b is checked by hand for that reason). Read
// as one expression, a rule's alternatives are tried at every byte of the text:
// the corpus's slowest case took 1.2 ms instead of 0.1 ms (BENCHMARKS.md).
// It is compiled when a text first holds its rule's keys: a failure compiles
// the few patterns its words call for, not the table (BENCHMARKS.md).
type alt struct {
	re        *lazyRE
	wordStart bool // the match must start at a word boundary
}

// alternatives splits p into its top-level alternatives, a leading group of
// choices expanded (`\b(account|team)s? suspended` is two).
func alternatives(p string) []alt {
	var out []alt
	for _, a := range splitAlternatives(p) {
		for _, e := range expandLeadingGroup(a) {
			var x alt
			if rest, ok := strings.CutPrefix(e, `\b`); ok {
				e, x.wordStart = rest, true
			}
			x.re = rx(e)
			out = append(out, x)
		}
	}
	return out
}

// find returns the first match of a in t (at a word start when required).
func (a *alt) find(t string, re *regexp.Regexp, prefix string) string {
	for from, n := 0, 0; from <= len(t) && n < 8; n++ {
		loc := re.FindStringIndex(t[from:])
		if loc == nil {
			return ""
		}
		i, j := from+loc[0], from+loc[1]
		if !a.wordStart || i == 0 || !isWordByte(t[i-1]) {
			if j > i || prefix == "" {
				return t[i:j]
			}
		}
		from = i + 1
	}
	return ""
}

// firstOf is the first alternative's match in t, in their order.
func firstOf(alts []alt, t string) string {
	for i := range alts {
		a := &alts[i]
		re := a.re.get()
		prefix, _ := re.LiteralPrefix() // literal every match starts with ("" = none)
		if prefix != "" && !strings.Contains(t, prefix) {
			continue
		}
		if m := a.find(t, re, prefix); m != "" {
			return m
		}
	}
	return ""
}

// expandLeadingGroup turns an alternative that starts with a group of choices,
// `\b(account|team)s? has been disabled`, into one alternative per choice, each
// starting with a literal. A group with a quantifier is left alone.
func expandLeadingGroup(p string) []string {
	wb := ""
	if rest, ok := strings.CutPrefix(p, `\b`); ok {
		wb, p = `\b`, rest
	}
	if !strings.HasPrefix(p, "(") {
		return []string{wb + p}
	}
	end := closingParen(p)
	if end < 0 || end+1 < len(p) && strings.ContainsRune("?*+{", rune(p[end+1])) {
		return []string{wb + p}
	}
	inner := strings.TrimPrefix(p[1:end], "?:")
	var out []string
	for _, choice := range splitAlternatives(inner) {
		out = append(out, wb+"(?:"+choice+")"+p[end+1:])
	}
	return out
}

// closingParen returns the index of the ")" that closes p[0], or -1.
func closingParen(p string) int {
	end := -1
	walkPattern(p, func(i int, c byte, depth int) bool {
		if c == ')' && depth == 0 {
			end = i
			return false
		}
		return true
	})
	return end
}

// splitAlternatives splits a pattern at its top-level "|".
func splitAlternatives(p string) []string {
	var out []string
	start := 0
	walkPattern(p, func(i int, c byte, depth int) bool {
		if c == '|' && depth == 0 {
			out = append(out, p[start:i])
			start = i + 1
		}
		return true
	})
	return append(out, p[start:])
}

// walkPattern calls fn for every byte of a regular expression that is neither
// escaped nor inside a character class, with the group depth after it (so a "("
// reports 1 and its ")" 0); fn returns false to stop.
func walkPattern(p string, fn func(i int, c byte, depth int) bool) {
	depth, inClass := 0, false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\':
			i++
			continue
		case inClass:
			if c == ']' {
				inClass = false
			}
			continue
		case c == '[':
			inClass = true
			continue
		case c == '(':
			depth++
		case c == ')':
			depth--
		}
		if !fn(i, p[i], depth) {
			return
		}
	}
}

// rankOf gives a Reason found by the field step the rank of its family (C1);
// a reason of no family ranks with the generic wording.
func rankOf(r Reason) rank {
	if k, ok := reasonRank[r]; ok {
		return k
	}
	return rankGeneric
}

var reasonRank = map[Reason]rank{ReasonAborted: rankAborted, ReasonLocal: rankLocal, ReasonNoErrorDetails: rankNoDetails,
	ReasonContentFilter: rankContentFilter, ReasonAuthPermanent: rankAuthPermanent, ReasonBilling: rankBilling,
	ReasonContextOverflow: rankContext, ReasonOverloaded: rankOverloaded, ReasonRateLimit: rankRateLimit,
	ReasonModelNotFound: rankModelNotFound, ReasonAuth: rankAuth, ReasonFormat: rankFormat}

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
	if len(r.alts) > 0 {
		if ev = firstOf(r.alts, t); ev == "" {
			return "", false
		}
	}
	if r.unless != nil && firstOf(r.unless, t) != "" {
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
