package classify

import (
	"regexp/syntax"
	"strings"
)

// A pattern "head ~ tail" runs its gap from every occurrence of its head to the
// end of that sentence part: on a long body with many heads (a Google 429 names
// "quota" in every violation) the expression engine, stepping the gap a byte
// at a time, took most of a failure's CPU. Such an alternative is first checked
// for one of its tail's literals in the part; most parts have none, and a
// substring search passes them over. The result is the expression's own.

// findInParts finds a's first match, part by part.
func (a *alt) findInParts(t string) string {
	head := max(len(a.prefix), 1)
	for from := 0; from < len(t); {
		var i int
		if a.prefix != "" {
			i = strings.Index(t[from:], a.prefix)
		} else {
			i = strings.IndexAny(t[from:], a.firstBytes)
		}
		if i < 0 {
			return ""
		}
		i += from
		if a.wordStart && i > 0 && isWordByte(t[i-1]) {
			from = i + 1
			continue
		}
		e := len(t)
		if k := strings.IndexAny(t[i:], "|\n"); k >= 0 {
			e = i + k
		}
		seg := t[i:e]
		if !containsAny(seg[head:], a.tails) {
			from = e + 1 // no later head of this part has a tail after it either
			continue
		}
		// Every match that starts in this part ends in it, so the expression
		// run on the part alone finds what it finds on the whole text: '|' and
		// '\n' are not word characters, so \b at the cut reads as at the end.
		for off := 0; off < len(seg); {
			loc := a.re.FindStringIndex(seg[off:])
			if loc == nil {
				break
			}
			s, j := i+off+loc[0], i+off+loc[1]
			if (!a.wordStart || s == 0 || !isWordByte(t[s-1])) && j > s {
				return t[s:j]
			}
			off += loc[0] + 1
		}
		from = e + 1
	}
	return ""
}

// partLocalTails returns the literals one of which must follow the first gap
// (`[^|\n]*?`) of pattern p, or nil when p has no such gap, when p could match
// a '|' or a line break, or begins or ends at a text boundary (then a part read
// alone could answer differently), or when the tail has no literal start.
//
// With needFirst (p has no literal prefix), it also returns the ASCII bytes a
// match can start with ("0123456789" for `\d+ hours?~limit`), and nil tails if
// they are not known.
func partLocalTails(p string, needFirst bool) (tails []string, first string) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil || !partLocal(re) || startsWithAssertion(re) {
		return nil, ""
	}
	if re.Op != syntax.OpConcat {
		return nil, ""
	}
	for k, sub := range re.Sub {
		if !isGap(sub) {
			continue
		}
		tails = concatLiterals(re.Sub[k+1:])
		break
	}
	if tails == nil || !needFirst {
		return tails, ""
	}
	first = firstByteSet(re)
	if first == "" {
		return nil, ""
	}
	return tails, first
}

// firstByteSet returns the ASCII bytes every match of re starts with, or "".
func firstByteSet(re *syntax.Regexp) string {
	lits := firstLiterals(re)
	if lits == nil {
		switch re.Op {
		case syntax.OpConcat:
			if len(re.Sub) > 0 && re.Sub[0].Op != syntax.OpQuest && re.Sub[0].Op != syntax.OpStar {
				return firstByteSet(re.Sub[0])
			}
		case syntax.OpPlus, syntax.OpRepeat:
			if re.Op == syntax.OpPlus || re.Min > 0 {
				return firstByteSet(re.Sub[0])
			}
		case syntax.OpCapture:
			return firstByteSet(re.Sub[0])
		case syntax.OpCharClass:
			var b []byte
			for i := 0; i+1 < len(re.Rune); i += 2 {
				if re.Rune[i+1] >= 0x80 || re.Rune[i+1]-re.Rune[i] > 16 {
					return ""
				}
				for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
					b = append(b, byte(r))
				}
			}
			return string(b)
		}
		return ""
	}
	var b []byte
	for _, l := range lits {
		if l[0] >= 0x80 {
			return ""
		}
		if !strings.ContainsRune(string(b), rune(l[0])) {
			b = append(b, l[0])
		}
	}
	return string(b)
}

// partLocal reports whether no node of re can match '|' or '\n' or test a
// text boundary.
func partLocal(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL, syntax.OpBeginLine, syntax.OpEndLine,
		syntax.OpBeginText, syntax.OpEndText:
		return false
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return false
		}
		for _, r := range re.Rune {
			if r == '|' || r == '\n' {
				return false
			}
		}
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if lo <= '|' && '|' <= hi || lo <= '\n' && '\n' <= hi {
				return false
			}
		}
	}
	for _, sub := range re.Sub {
		if !partLocal(sub) {
			return false
		}
	}
	return true
}

func startsWithAssertion(re *syntax.Regexp) bool {
	for {
		switch re.Op {
		case syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpBeginLine, syntax.OpBeginText:
			return true
		case syntax.OpConcat, syntax.OpCapture:
			if len(re.Sub) == 0 {
				return false
			}
			re = re.Sub[0]
		case syntax.OpAlternate:
			for _, sub := range re.Sub {
				if startsWithAssertion(sub) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
}

// isGap reports the gap "~": a lazy run of anything but '|' and '\n'.
func isGap(re *syntax.Regexp) bool {
	if re.Op != syntax.OpStar || re.Flags&syntax.NonGreedy == 0 || len(re.Sub) != 1 {
		return false
	}
	c := re.Sub[0]
	if c.Op != syntax.OpCharClass {
		return false
	}
	// [^\n|] is the ranges 0-9, 11-123, 125-max.
	r := c.Rune
	return len(r) == 6 && r[0] == 0 && r[1] == '\n'-1 && r[2] == '\n'+1 && r[3] == '|'-1 && r[4] == '|'+1
}

// firstLiterals returns literals one of which starts every match of re, or nil.
func firstLiterals(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 || len(re.Rune) == 0 {
			return nil
		}
		return []string{string(re.Rune)}
	case syntax.OpCapture:
		return firstLiterals(re.Sub[0])
	case syntax.OpConcat:
		return concatLiterals(re.Sub)
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			l := firstLiterals(sub)
			if l == nil {
				return nil
			}
			out = append(out, l...)
		}
		return out
	case syntax.OpCharClass:
		// a short class of single characters, as in "(exceed|reach)(ed)" after
		// the parser factors it: [er]
		if len(re.Rune) > 8 {
			return nil
		}
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				out = append(out, string(r))
				if len(out) > 8 {
					return nil
				}
			}
		}
		return out
	}
	return nil
}

// concatLiterals is firstLiterals of a sequence: an optional first item ("(is
// |are )?exhausted") adds its own literals to those of what follows it.
func concatLiterals(subs []*syntax.Regexp) []string {
	for k, sub := range subs {
		switch sub.Op {
		case syntax.OpWordBoundary:
			continue
		case syntax.OpQuest, syntax.OpStar:
			own := firstLiterals(sub.Sub[0])
			rest := concatLiterals(subs[k+1:])
			if own == nil || rest == nil {
				return nil
			}
			return append(own, rest...)
		}
		return firstLiterals(sub)
	}
	return nil
}
