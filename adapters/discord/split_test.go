package discord

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplitMessage(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 30) // 150 chars, one line
	code := "```py\n" + strings.Repeat("print(1)\n", 20) + "```"
	tests := []struct {
		name  string
		in    string
		limit int
		want  []string
	}{
		{"short stays whole", "hello", 20, []string{"hello"}},
		{"split at line ends", "aaaa\nbbbb\ncccc", 12, []string{"aaaa\nbbbb", "cccc"}},
		{"long line split at a space", "alpha beta gamma delta", 14, []string{"alpha beta ", "gamma delta"}},
		{"unbroken word cut", strings.Repeat("x", 30), 14, []string{strings.Repeat("x", 14), strings.Repeat("x", 14), "xx"}},
		{"fence closed and reopened", "```go\nl1\nl2\nl3\nl4\nl5\n```", 22, []string{"```go\nl1\nl2\nl3\nl4\n```", "```go\nl5\n```"}},
		{"long fence line reopened plain", "```" + strings.Repeat("0", 35) + "\n00000", 43, []string{"```" + strings.Repeat("0", 35) + "\n```", "```\n00000"}},
	}
	for _, tc := range tests {
		got := splitMessage(tc.in, tc.limit)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	for _, in := range []string{long, code, "intro\n" + code + "\noutro " + long} {
		for _, limit := range []int{30, 64, 100} {
			for i, c := range splitMessage(in, limit) {
				if textLen(c) > limit {
					t.Errorf("limit %d chunk %d has %d chars: %q", limit, i, textLen(c), c)
				}
				if strings.Count(c, "```")%2 != 0 {
					t.Errorf("limit %d chunk %d unbalanced: %q", limit, i, c)
				}
			}
		}
	}
}

func TestSplitMessage_RunesAndUTF16(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("😀", 1500) // 2 UTF-16 units each: 3000 units
	chunks := splitMessage(in, MaxMessageLen)
	if len(chunks) != 2 {
		t.Fatalf("%d chunks, want 2", len(chunks))
	}
	total := 0
	for _, c := range chunks {
		if !utf8.ValidString(c) || textLen(c) > MaxMessageLen {
			t.Fatalf("bad chunk: valid=%v len=%d", utf8.ValidString(c), textLen(c))
		}
		total += utf8.RuneCountInString(c)
	}
	if total != 1500 {
		t.Fatalf("lost runes: %d", total)
	}
}

func FuzzSplitMessage(f *testing.F) {
	f.Add("```go\nx\n```\n"+strings.Repeat("y ", 50), 40)
	f.Add(strings.Repeat("é", 90), 16)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if limit < 16 || limit > 4000 || !utf8.ValidString(s) {
			return
		}
		for _, c := range splitMessage(s, limit) {
			if textLen(c) > limit {
				t.Fatalf("chunk of %d > %d", textLen(c), limit)
			}
		}
	})
}

func TestCompleteModel_Limits(t *testing.T) {
	t.Parallel()
	var models []string
	for i := range 40 {
		models = append(models, "p/m"+strings.Repeat("x", i%3)+string(rune('a'+i%26)))
	}
	models = append(models, "p/"+strings.Repeat("z", 120))
	got := completeModel(models, []string{"p:one"}, "")
	if len(got) != maxChoices {
		t.Fatalf("%d choices, want %d", len(got), maxChoices)
	}
	for _, c := range got {
		if len(c) > maxChoiceLen {
			t.Fatalf("choice too long: %d", len(c))
		}
	}
}
