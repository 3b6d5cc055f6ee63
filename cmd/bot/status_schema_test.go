package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/health"
)

// jsonPaths lists the JSON fields of t, as the schema writes them:
// providers[].models[].ref. A time is a value, not an object.
func jsonPaths(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeFor[time.Time]() {
		return nil
	}
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		p := prefix + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			p += "[]" // a list of objects; a list of strings is a value
		}
		out = append(out, p)
		out = append(out, jsonPaths(f.Type, p+".")...)
	}
	return out
}

// TestStatus_Issue38_SchemaAsDocumented: docs/operations.md's `bot status
// --json` table names every field the board has, each in its own row or among
// its parent's, and every row it has is a field. covers issue 38
func TestStatus_Issue38_SchemaAsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "### `bot status --json` schema")
	if !ok {
		t.Fatal("docs/operations.md has no `bot status --json` schema")
	}
	_, sec, _ = strings.Cut(sec, "\n| field |")
	sec, _, _ = strings.Cut(sec, "\n\n") // the table ends at the first blank line
	rows := map[string]string{}          // the path a row documents -> the whole row
	tick := regexp.MustCompile("`([^`]+)`")
	for _, l := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		cols := strings.Split(l, "|")
		var base string
		for _, m := range tick.FindAllStringSubmatch(cols[1], -1) {
			p := m[1]
			if strings.HasPrefix(p, ".") { // `providers[].state`, `.reason`
				p = base[:strings.LastIndex(base, ".")] + p
			} else {
				base = p
			}
			rows[p] = l
		}
	}
	paths := jsonPaths(reflect.TypeFor[health.Board](), "")
	if len(paths) < 30 || len(rows) < 10 {
		t.Fatalf("read %d fields and %d rows: the test reads nothing", len(paths), len(rows))
	}
	for _, p := range paths {
		if _, ok := rows[p]; ok {
			continue
		}
		// A field named among its parent's (or an ancestor's) row:
		// providers[].models[] | `ref`, `state`, ...
		segs := strings.Split(p, ".")
		found := false
		for k := len(segs) - 1; k >= 1 && !found; k-- {
			row, ok := rows[strings.Join(segs[:k], ".")]
			found = ok && strings.Contains(row, "`"+segs[len(segs)-1]+"`")
		}
		if !found {
			t.Errorf("bot status --json has %s, which the schema in docs/operations.md does not name", p)
		}
	}
	for p := range rows {
		if !slices.Contains(paths, p) {
			t.Errorf("the schema in docs/operations.md names %s, which bot status --json does not have", p)
		}
	}
}

// The lists the schema says are always there are, on a board with nothing to
// show: a script can range over them without a check. covers issue 38
func TestStatus_Issue38_EmptyListsAreThere(t *testing.T) {
	b, err := json.Marshal(health.Build(health.State{Now: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC), Policy: failover.DefaultPolicy()}, true))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"providers":[]`, `"fallbacks":[]`, `"timeline":[]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
}
