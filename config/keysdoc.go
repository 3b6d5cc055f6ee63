// The keys' documentation, rendered from the settings table.

package config

import (
	"strings"
)

// keysMarkdown renders docs/configuration-keys.md: one row per setting, in
// the table's order, with its default and its doc line.
func keysMarkdown() string {
	var b strings.Builder
	b.WriteString(`# Configuration keys

Every key of ` + "`config.yaml`" + `, its default and what it does, in the order of
config.example.yaml (which shows them in context, with comments). ` + "`<id>`" + `,
` + "`<provider:name>`" + ` and ` + "`<provider/model>`" + ` stand for names you choose; ` + "`[]`" + ` for the
items of a list. A value may be ` + "`${VAR}`" + ` (an environment variable) or
` + "`${VAR:-default}`" + `; unknown keys are errors. The defaults of the engine's numbers
are ` + "`failover.DefaultPolicy`" + `'s.

This file is generated from config/settings.go, where each key is declared once:
` + "`go test ./config -run TestSettings_Docs -update`" + ` rewrites it, and the test fails
when it differs.

| key | default | what it does |
|---|---|---|
`)
	def := Default()
	for _, s := range settings {
		d := s.def
		switch {
		case fixed(s.key):
			d = s.val.show(def)
		case d == "":
			d = s.val.show(entryOwner(s.key))
		}
		switch {
		case d == "" && s.sample:
			d = "—"
		case d == "":
			d = "`\"\"`"
		default:
			d = "`" + d + "`"
		}
		doc := s.doc
		if len(s.enum) > 0 {
			doc += " (" + orList(s.enum) + ")"
		}
		b.WriteString("| `" + s.key + "` | " + d + " | " + strings.ReplaceAll(doc, "|", `\|`) + " |\n")
	}
	return b.String()
}

// entryOwner returns a new owner of the entry section key belongs to, as the
// walker starts each entry.
func entryOwner(key string) any {
	for path, kind := range entrySections {
		if strings.HasPrefix(key, path+".") || strings.HasPrefix(key, path+"[]") {
			return kind.start(nil, "")
		}
	}
	panic("config: no entry section for " + key)
}
