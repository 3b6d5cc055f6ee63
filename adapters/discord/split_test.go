package discord

import (
	"strings"
	"testing"
)

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
