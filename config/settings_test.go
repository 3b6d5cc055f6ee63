package config

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const examplePath = "../config.example.yaml"

// exampleKeys walks config.example.yaml along the schema and returns, for
// each key it holds, the setting's key; a key the table does not declare is
// an error naming its line.
func exampleKeys(t *testing.T, data []byte) map[string]bool {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	var walk func(s *node, v *yaml.Node, path string)
	walk = func(s *node, v *yaml.Node, path string) {
		if e := s.entries(); e != nil {
			each := func(item *yaml.Node, at string) {
				if e.set != nil {
					found[e.set.key] = true
				} else {
					walk(e, item, at)
				}
			}
			switch v.Kind {
			case yaml.SequenceNode:
				for i, item := range v.Content {
					each(item, fmt.Sprintf("%s[%d]", path, i))
				}
			case yaml.MappingNode:
				for i := 0; i+1 < len(v.Content); i += 2 {
					each(v.Content[i+1], join(path, v.Content[i].Value))
				}
			}
			return
		}
		if v.Kind != yaml.MappingNode {
			t.Errorf("config.example.yaml:%d: %s holds %s, where the table has the keys of a section", v.Line, path, kindName(v))
			return
		}
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, val := v.Content[i], v.Content[i+1]
			kid := s.kid(k.Value)
			switch {
			case kid == nil:
				t.Errorf("config.example.yaml:%d: %s: not a key of the settings table (config/settings.go)", k.Line, join(path, k.Value))
			case kid.set != nil:
				found[kid.set.key] = true
			default:
				walk(kid, val, join(path, k.Value))
			}
		}
	}
	walk(schema(), doc.Content[0], "")
	return found
}

// covers the agreement DESIGN.md asks for: every key of config.example.yaml
// is a key of the settings table, every key of the table appears in the
// example (as a key, or commented out where it only has a sample), and the
// example states each key's default where it is not a sample.
func TestSettings_ExampleAgrees(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	found := exampleKeys(t, data)
	comments := map[string]bool{} // leaf keys written in comments: "# api_version: ..."
	commented := regexp.MustCompile(`#\s*(?:- )?([a-z_]+):`)
	flowKey := regexp.MustCompile(`[{,]\s*([a-z_]+):`)
	for _, line := range strings.Split(string(data), "\n") {
		if _, c, ok := strings.Cut(line, "#"); ok {
			c = "#" + c
			for _, m := range commented.FindAllStringSubmatch(c, -1) {
				comments[m[1]] = true
			}
			for _, m := range flowKey.FindAllStringSubmatch(c, -1) {
				comments[m[1]] = true
			}
		}
	}
	for _, s := range settings {
		if found[s.key] {
			continue
		}
		leaf := segments(s.key)[len(segments(s.key))-1]
		if !comments[leaf] {
			t.Errorf("%s is in the settings table but not in config.example.yaml (not even commented out)", s.key)
		}
	}

	// The defaults: the example's value of each key that is not a sample,
	// decoded as the bot decodes it, is the default.
	env := func(name string) (string, bool) { return "set-" + strings.ToLower(name), true }
	cfg, err := Parse(examplePath, data, env)
	if err != nil {
		t.Fatal(err)
	}
	def := Default()
	for _, s := range settings {
		if !fixed(s.key) || s.sample || !found[s.key] {
			continue
		}
		if got, want := s.val.show(cfg), s.val.show(def); got != want {
			t.Errorf("%s: config.example.yaml says %q, the default is %q (config/settings.go)", s.key, got, want)
		}
	}
}

// covers the table itself: keys are unique and documented, defaults parse
// (Default would panic), enums hold their default, and every entry section
// is known to the walker.
func TestSettings_Table(t *testing.T) {
	seen := map[string]bool{}
	def := Default()
	for _, s := range settings {
		if seen[s.key] {
			t.Errorf("%s is declared twice", s.key)
		}
		seen[s.key] = true
		if strings.TrimSpace(s.doc) == "" {
			t.Errorf("%s has no doc line", s.key)
		}
		if len(s.enum) > 0 && fixed(s.key) && !slices.Contains(s.enum, s.val.show(def)) {
			t.Errorf("%s: the default %q is not one of %v", s.key, s.val.show(def), s.enum)
		}
	}
	var walk func(n *node)
	walk = func(n *node) {
		if n.entries() != nil {
			if _, ok := entrySections[n.path]; !ok {
				t.Errorf("%s has entries but no entrySections entry", n.path)
			}
		}
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(schema())
}

var update = flag.Bool("update", false, "rewrite docs/configuration-keys.md from the settings table")

const docsPath = "../docs/configuration-keys.md"

// covers the documentation of the keys: docs/configuration-keys.md is the
// settings table, rendered (go test ./config -run TestSettings_Docs -update
// rewrites it).
func TestSettings_Docs(t *testing.T) {
	want := keysMarkdown()
	if *update {
		if err := os.WriteFile(docsPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not the settings table: run go test ./config -run TestSettings_Docs -update", docsPath)
	}
}

// covers the walker's use of the table: each fixed key of the table, its
// default written back under its path, decodes to that default; and a value
// outside an enum is an error naming the choices.
func TestSettings_EveryKeyDecodes(t *testing.T) {
	for _, s := range settings {
		if !fixed(s.key) || s.sample {
			continue
		}
		v := s.val.show(Default())
		if v == "" {
			v = `""`
		}
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(v), &n); err != nil {
			t.Fatalf("%s: %v", s.key, err)
		}
		tree := map[string]any{
			"providers": map[string]any{"o": map[string]any{"base_url": "http://127.0.0.1:1/v1"}},
			"agents":    map[string]any{"defaults": map[string]any{"model": map[string]any{"primary": "o/m"}}},
		}
		m, segs := tree, segments(s.key)
		for _, seg := range segs[:len(segs)-1] {
			next, ok := m[seg].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[seg] = next
			}
			m = next
		}
		m[segs[len(segs)-1]] = n.Content[0]
		src, err := yaml.Marshal(tree)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := Parse("c.yaml", src, nil)
		if err != nil {
			t.Errorf("%s: %v\n%s", s.key, err, src)
			continue
		}
		if got := s.val.show(cfg); got != s.val.show(Default()) {
			t.Errorf("%s: %q read back as %q", s.key, v, got)
		}
	}
	const base = "providers:\n  o: {base_url: http://127.0.0.1:1/v1}\nagents: {defaults: {model: {primary: o/m}}}\n"
	_, err := Parse("c.yaml", []byte("storage: {driver: mysql}\n"+base), nil)
	if err == nil || err.Error() != `c.yaml:1: storage.driver: unknown driver "mysql": want sqlite or postgres` {
		t.Errorf("enum: %v", err)
	}
}
