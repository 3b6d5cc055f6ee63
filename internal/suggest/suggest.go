// Package suggest finds the known word a mistyped one was probably meant to be
// ("did you mean ...?"), by edit distance. It is pure and imports nothing of the
// project, so the commands, the sessions and the fake provider can all use it.
package suggest

import "strings"

// Distance is the Levenshtein distance between a and b, counted in runes and
// ignoring case.
func Distance(a, b string) int {
	ra, rb := []rune(strings.ToLower(a)), []rune(strings.ToLower(b))
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// maxInput bounds the words compared: a chat message can be long, and a
// quadratic distance over a 64 KiB "model name" is work nobody asked for.
const maxInput = 200

// Closest returns the option nearest to word, when it is near enough to be a
// typo: at most a third of the option's length (and at least 2) edits away, or
// an option that word is the start or the end of ("gpt-4o" for
// "openai/gpt-4o"). Ties go to the earlier option. ok is false when nothing is
// close.
func Closest(word string, options []string) (best string, ok bool) {
	if word == "" || len(word) > maxInput {
		return "", false
	}
	bestD := -1
	for _, o := range options {
		if o == "" || len(o) > maxInput {
			continue
		}
		d := Distance(word, o)
		if d > max(2, len([]rune(o))/3) {
			lw, lo := strings.ToLower(word), strings.ToLower(o)
			if len(lw) < 3 || !(strings.HasSuffix(lo, "/"+lw) || strings.HasPrefix(lo, lw)) {
				continue
			}
		}
		if bestD < 0 || d < bestD {
			best, bestD = o, d
		}
	}
	return best, bestD >= 0
}
