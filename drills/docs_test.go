package drills

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The drill table of docs/operations.md lists every drill `bot drill` runs,
// in the order `--scenario all` runs them, each with its own one-line
// description (Scenario.Doc), so the docs cannot fall behind the registry.
func TestDocs_DrillTableListsEveryDrill(t *testing.T) {
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	// The drills' own part: other tables of the file (the `bot status --json`
	// schema) have rows of the same shape.
	_, doc, ok := strings.Cut(string(b), "\n# Drills")
	if !ok {
		t.Fatal("docs/operations.md has no \"# Drills\" part")
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\| (.*) \\|$").FindAllStringSubmatch(doc, -1)
	all := Scenarios()
	if len(rows) != len(all) {
		t.Errorf("the table lists %d drills, the registry has %d", len(rows), len(all))
	}
	listed := map[string]string{}
	for _, r := range rows {
		listed[r[1]] = r[2]
	}
	for i, s := range all {
		doc, ok := listed[s.Name]
		switch {
		case !ok:
			t.Errorf("drill %q is not in docs/operations.md's table", s.Name)
		case doc != s.Doc:
			t.Errorf("drill %q: the table says %q, the drill says %q", s.Name, doc, s.Doc)
		case i < len(rows) && rows[i][1] != s.Name:
			t.Errorf("row %d is %q, but `--scenario all` runs %q there", i+1, rows[i][1], s.Name)
		}
	}
}
