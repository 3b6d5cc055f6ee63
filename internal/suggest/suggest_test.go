package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "", 3},
		{"kitten", "sitting", 3},
		{"gpt-4o-mimi", "gpt-4o-mini", 1},
		{"Rate_Limit", "rate_limit", 0},
		{"ünï", "uni", 2},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	opts := []string{"openai/gpt-4o-mini", "backup/gpt-4o-mini", "anthropic/claude-haiku-4-5", "fast"}
	for _, tc := range []struct {
		word string
		want string
		ok   bool
	}{
		{"backup/gpt-4o-mimi", "backup/gpt-4o-mini", true},
		{"openai/gpt-4o-mimi", "openai/gpt-4o-mini", true},
		{"fats", "fast", true},
		{"claude-haiku-4-5", "anthropic/claude-haiku-4-5", true},
		{"mistral/large", "", false},
		{"x", "", false},
		{"", "", false},
	} {
		got, ok := Closest(tc.word, opts)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Closest(%q) = %q, %v; want %q, %v", tc.word, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := Closest(string(make([]byte, 100000)), opts); ok {
		t.Error("a huge word matched")
	}
}
