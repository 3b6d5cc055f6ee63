package adapters

import (
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }

func TestSplit(t *testing.T) {
	para := strings.Repeat("x", 30)
	for _, tc := range []struct {
		name  string
		in    string
		limit int
		want  []string
	}{
		{"short stays whole", "hello", 20, []string{"hello"}},
		{"blank gives nothing", "  \n", 50, nil},
		{"paragraphs", para + "\n\n" + para + "\n\n" + para, 70, []string{para + "\n\n" + para, para}},
		{"line ends", "aaaaaaa\nbbbbbbb\nccccccc", 16, []string{"aaaaaaa\nbbbbbbb", "ccccccc"}},
		{"long line at a space", "alpha beta gamma delta", 16, []string{"alpha beta", "gamma delta"}},
		{"unbroken word cut", strings.Repeat("x", 36), 16, []string{strings.Repeat("x", 16), strings.Repeat("x", 16), "xxxx"}},
		{"fence closed and reopened with its language", "```go\nl1\nl2\nl3\nl4\nl5\n```", 22, []string{"```go\nl1\nl2\nl3\nl4\n```", "```go\nl5\n```"}},
		{"long fence line reopened plain", "```" + strings.Repeat("0", 35) + "\n00000", 43, []string{"```" + strings.Repeat("0", 35) + "\n```", "```\n00000"}},
	} {
		got := Split(tc.in, tc.limit, utf8.RuneCountInString)
		if strings.Join(got, "¶") != strings.Join(tc.want, "¶") || len(got) != len(tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Properties on long texts: every chunk fits, every block is balanced, nothing
// is lost.
func TestSplit_Properties(t *testing.T) {
	for _, count := range []func(string) int{utf8.RuneCountInString, utf16Len} {
		for i, in := range []string{
			strings.Repeat("word ", 5000),
			strings.Repeat("line of text\n", 2000),
			"intro\n\n```python\n" + strings.Repeat("print('hello world')\n", 800) + "```\n\noutro " + strings.Repeat("é", 9000),
			strings.Repeat("x", 20000),
			strings.Repeat("😀", 1500),
		} {
			for _, limit := range []int{30, 100, 2000, 3900} {
				chunks := Split(in, limit, count)
				if count(in) > limit && len(chunks) < 2 {
					t.Fatalf("input %d limit %d not split", i, limit)
				}
				total := 0
				for j, c := range chunks {
					if n := count(c); n > limit || n == 0 || !utf8.ValidString(c) {
						t.Fatalf("input %d limit %d chunk %d: %d units (valid %v)", i, limit, j, n, utf8.ValidString(c))
					}
					if strings.Count(c, "```")%2 != 0 {
						t.Fatalf("input %d limit %d chunk %d: unbalanced block: %q", i, limit, j, c)
					}
					total += strings.Count(c, "print('hello world')") + strings.Count(c, "é") + strings.Count(c, "😀")
				}
				// (at 30 units a code line no longer fits beside its fences and is cut)
				if want := map[int]int{2: 800 + 9000, 4: 1500}[i]; want != 0 && limit > 30 && total != want {
					t.Fatalf("input %d limit %d: content lost: %d of %d", i, limit, total, want)
				}
			}
		}
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("```go\nx\n```\n"+strings.Repeat("y ", 50), 40)
	f.Add(strings.Repeat("é", 90), 16)
	f.Add("a\n\n```"+strings.Repeat("z", 40)+"\nq\n```\n\nb", 20)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if limit < 16 || limit > 4000 {
			return // invalid UTF-8 stays in: model output may hold it, and Split must not panic
		}
		for _, count := range []func(string) int{utf8.RuneCountInString, utf16Len} {
			for _, c := range Split(s, limit, count) {
				if count(c) > limit {
					t.Fatalf("chunk of %d > %d: %q", count(c), limit, c)
				}
			}
		}
	})
}
