package config

import (
	"fmt"
	"strings"
)

// The YAML library reports a misplaced line at the start of the block it was
// reading ("line 2: did not find expected key" for a key misindented on line
// 5) and in parser terms. When it fails, the text is scanned for the first
// line whose indentation lines up with nothing, and that line is reported in
// plain words; other failures get plain words for the library's known messages.

// indentProblem finds the first badly indented line of a block-style YAML text.
// It returns its line number (1-based) and what is wrong, or 0 when it sees no
// indentation problem. It never quotes a value (a value may be a secret), only
// the key of the line.
func indentProblem(data []byte) (int, string) {
	type level struct{ indent, line int }
	var stack []level
	opens := false // the previous line ends a "key:" that opens a block
	prevLine := 0  // the previous content line
	block := -1    // inside a | or > block scalar whose key is indented this much
	flow := 0      // depth of an unclosed { or [ spanning lines
	flowLine := 0  // where it opened
	lines := strings.Split(string(data), "\n")
	for i, raw := range lines {
		n := i + 1
		raw = strings.TrimRight(raw, "\r")
		body := strings.TrimLeft(raw, " \t")
		lead := raw[:len(raw)-len(body)]
		ind := len(lead)
		if block >= 0 {
			if body == "" || ind > block {
				continue
			}
			block = -1
		}
		if body == "" || strings.HasPrefix(body, "#") || body == "---" || body == "..." {
			continue
		}
		// An unclosed quote swallows the brackets and keys after it, so it is
		// named before anything it would be mistaken for.
		if q, open := openQuote(body); open && !continuesBelow(lines[i+1:], ind) {
			return n, fmt.Sprintf("a value opened with %c on this line is never closed: add the closing %c at the end of the value (or remove the opening one)", q, q)
		}
		if flow > 0 {
			flow += depth(body)
			continue
		}
		if strings.Contains(lead, "\t") {
			return n, "a tab indents this line; YAML needs spaces"
		}
		content := stripComment(body)
		key := keyOf(content)
		switch {
		case len(stack) == 0:
			stack = append(stack, level{ind, n})
		case ind > stack[len(stack)-1].indent:
			if !opens && key != "" {
				top := stack[len(stack)-1]
				return n, fmt.Sprintf("bad indentation: %q starts at %s, deeper than line %d, which already has its value; to put it beside line %d, start it at %s",
					key, spaces(ind), prevLine, prevLine, spaces(top.indent))
			}
			stack = append(stack, level{ind, n})
		case ind < stack[len(stack)-1].indent:
			var popped level
			for len(stack) > 0 && ind < stack[len(stack)-1].indent {
				popped, stack = stack[len(stack)-1], stack[:len(stack)-1]
			}
			if len(stack) == 0 || ind != stack[len(stack)-1].indent {
				what := "this line"
				if key != "" {
					what = fmt.Sprintf("%q", key)
				}
				msg := fmt.Sprintf("bad indentation: %s starts at %s, but the keys above it start at %s (line %d)", what, spaces(ind), spaces(popped.indent), popped.line)
				if len(stack) > 0 {
					outer := stack[len(stack)-1]
					msg += fmt.Sprintf(" or %s (line %d)", spaces(outer.indent), outer.line)
				}
				return n, msg + "; keys of one section must line up exactly"
			}
		}
		// A list item "- key: value" holds a mapping whose keys line up with key.
		item := content
		for strings.HasPrefix(item, "- ") || item == "-" {
			rest := strings.TrimLeft(strings.TrimPrefix(item, "-"), " ")
			col := ind + (len(content) - len(rest))
			if rest != "" && keyOf(rest) != "" {
				stack = append(stack, level{col, n})
			}
			item = rest
		}
		opens = strings.HasSuffix(item, ":") || item == "" || strings.HasSuffix(content, "-")
		if v := valueOf(item); v != "" && (v[0] == '|' || v[0] == '>') {
			block = ind
			opens = false
		}
		if d := depth(item); d > 0 {
			flow, flowLine = d, n
		}
		prevLine = n
	}
	if flow > 0 {
		return flowLine, "a { ... } or [ ... ] opened on this line is never closed: a '}' or ']' is missing"
	}
	return 0, ""
}

// openQuote reports a quoted scalar that starts on line s and does not end
// there, and its quote. A quote starts a scalar only where a value can start
// (the line's start, after ": ", "- ", "{", "[" or ","), so "it's" is plain text.
func openQuote(s string) (byte, bool) {
	start := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
		case start && (c == '"' || c == '\''):
			j := closing(s, i)
			if j < 0 {
				return c, true
			}
			i, start = j, false
		case c == '#' && (i == 0 || s[i-1] == ' '):
			return 0, false // a comment
		case c == '{' || c == '[' || c == ',':
			start = true
		case c == ':' && (i+1 == len(s) || s[i+1] == ' '):
			start = true
		case c == '-' && start && (i+1 == len(s) || s[i+1] == ' '):
		default:
			start = false
		}
	}
	return 0, false
}

// closing returns the index of the quote that closes the one at s[open], or -1:
// a double-quoted scalar escapes with a backslash, a single-quoted one by
// doubling the quote.
func closing(s string, open int) int {
	q := s[open]
	for i := open + 1; i < len(s); i++ {
		switch {
		case q == '"' && s[i] == '\\':
			i++
		case s[i] == q && q == '\'' && i+1 < len(s) && s[i+1] == '\'':
			i++
		case s[i] == q:
			return i
		}
	}
	return -1
}

// continuesBelow reports whether the next content line looks like the rest of
// a quoted value spanning lines (indented deeper than ind, and not a key), as
// YAML allows.
func continuesBelow(rest []string, ind int) bool {
	for _, raw := range rest {
		body := strings.TrimLeft(strings.TrimRight(raw, "\r"), " \t")
		if body == "" {
			continue
		}
		return len(raw)-len(strings.TrimLeft(raw, " \t")) > ind && keyOf(stripComment(body)) == ""
	}
	return false
}

// spaces renders an indentation width.
func spaces(n int) string {
	if n == 1 {
		return "1 space"
	}
	return fmt.Sprintf("%d spaces", n)
}

// stripComment drops a trailing " # comment" outside quotes.
func stripComment(s string) string {
	end := len(s)
	unquoted(s, func(i int) bool {
		if s[i] == '#' && i > 0 && (s[i-1] == ' ' || s[i-1] == '\t') {
			end = i
			return false
		}
		return true
	})
	if end < len(s) {
		return strings.TrimRight(s[:end], " \t")
	}
	return s
}

// unquoted calls fn with the index of every byte of s outside quotes (the
// quotes themselves excluded); fn returns false to stop.
func unquoted(s string, fn func(i int) bool) {
	var quote byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		default:
			if !fn(i) {
				return
			}
		}
	}
}

// keyOf returns the key of a "key: value" or "key:" line, or "".
func keyOf(s string) string {
	if s == "" || strings.ContainsRune("-[{\"'|>&*!%@`", rune(s[0])) {
		return ""
	}
	i := strings.Index(s, ": ")
	if i < 0 {
		if !strings.HasSuffix(s, ":") {
			return ""
		}
		i = len(s) - 1
	}
	k := s[:i]
	if len(k) > 40 {
		k = k[:40] + "…"
	}
	return k
}

// valueOf returns the value after "key: ", or "".
func valueOf(s string) string {
	if i := strings.Index(s, ": "); i >= 0 {
		return strings.TrimSpace(s[i+2:])
	}
	return ""
}

// depth counts unclosed { and [ outside quotes.
func depth(s string) int {
	d := 0
	unquoted(s, func(i int) bool {
		switch s[i] {
		case '{', '[':
			d++
		case '}', ']':
			d--
		}
		return true
	})
	return d
}

// plainYAML rewords the YAML library's messages people meet most.
func plainYAML(msg string) string {
	for _, p := range plainYAMLWords {
		if strings.Contains(msg, p.says) {
			return p.means
		}
	}
	return msg
}

// plainYAMLWords pairs a part of the YAML library's message with what it means.
var plainYAMLWords = []struct{ says, means string }{
	{"mapping values are not allowed", "a ':' where no key can start: put quotes around a value that contains ': ', or check the indentation"},
	{"did not find expected key", "something on this line or just below does not line up with the keys around it (check the indentation)"},
	{"did not find expected ',' or '}'", "a { ... } is not closed: a '}' or a ',' is missing"},
	{"did not find expected ',' or ']'", "a [ ... ] is not closed: a ']' or a ',' is missing"},
	{"found character that cannot start any token", "a character that cannot start a value here (a tab, or a value starting with ` or @ that needs quotes)"},
	{"found unexpected end of stream", "the file ends inside a quoted value: a closing quote is missing"},
	{"could not find expected ':'", "a line without ':' where a key is expected (key: value)"},
	{"found a tab character", "a tab indents this line; YAML needs spaces"},
}
