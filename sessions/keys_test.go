package sessions

import (
	"testing"
)

func TestParentKey(t *testing.T) {
	cases := []struct{ key, want string }{
		{"slack:T1:C1:1712.0001", "slack:T1:C1"},
		{"slack:T1:C1", "slack:T1"},
		{"console:default", ""},
		{"console", ""},
		{"", ""},
		{":x", ""},
	}
	for _, c := range cases {
		if got := parentKey(c.key); got != c.want {
			t.Errorf("parentKey(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}
