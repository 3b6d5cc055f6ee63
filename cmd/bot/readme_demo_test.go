package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README's 30-second demo, word for word: the lines it shows typed are
// sent to the demo in a fresh folder, and the answers must be the README's,
// once the clock times and the "in N s" countdowns are set aside. covers N1, S4
func TestReadme_DemoTranscriptWordForWord(t *testing.T) {
	bin := builtBot(t)
	_, block, ok := strings.Cut(readme(t), "```\n$ go run ./cmd/bot\n")
	if !ok {
		t.Fatal("the README has no demo transcript")
	}
	block, _, _ = strings.Cut(block, "```")
	var typed, shown []string
	for _, l := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "> "):
			typed = append(typed, strings.TrimPrefix(l, "> "))
		case l == "..." || strings.HasPrefix(l, "detour demo:"):
			// the banner, on stderr
		default:
			shown = append(shown, l)
		}
	}
	out, errOut, code := runIn(t, bin, t.TempDir(), strings.Join(typed, "\n")+"\n", cleanEnv())
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
	clock := regexp.MustCompile(`(\d{4}-\d\d-\d\d )?\d\d:\d\d(:\d\d)? UTC|\(in \d+ (s|min)\)`) // when.At drops the seconds on the minute
	norm := func(s string) string { return clock.ReplaceAllString(s, "T") }
	got := strings.Split(norm(strings.TrimSuffix(out, "\n")), "\n")
	want := strings.Split(norm(strings.Join(shown, "\n")), "\n")
	if !slices.Equal(got, want) {
		t.Errorf("the demo answers\n%s\n\nthe README shows\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
