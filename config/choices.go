package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/detourbot/detour/commands"
	"github.com/detourbot/detour/failover"
)

// checkChoices validates what lets people choose models: aliases (one word each,
// unique across models, on a model people can choose) and the
// agents.defaults.model.allow patterns (provider/model, a provider that is
// configured unless the provider part has a wildcard).
func (d *decoder) checkChoices(bad func(key, format string, args ...any)) {
	c := d.cfg
	allow := c.Agents.Defaults.Model.Allow
	for i, p := range allow {
		key := fmt.Sprintf("agents.defaults.model.allow[%d]", i)
		prov, rest, ok := strings.Cut(p, "/")
		switch {
		case !ok || prov == "" || rest == "" || strings.ContainsAny(p, " \t"):
			bad(key, "bad pattern %q: want provider/model, with * for any characters, e.g. openai/*", p)
		case !strings.ContainsAny(prov, "*?") && !d.hasProvider(prov):
			bad(key, "pattern %q names provider %q, which is not configured under providers (configured: %s)", p, prov, d.providerList())
		}
	}
	chained := map[failover.ModelRef]bool{}
	for _, r := range c.ModelRefs() {
		chained[r] = true
	}
	owner := map[string]failover.ModelRef{} // lower-case alias -> model
	refs := sortedKeys(c.Models)
	// In file order, so a repeated alias is reported where it is repeated.
	sort.SliceStable(refs, func(i, j int) bool { return d.lines["models."+string(refs[i])] < d.lines["models."+string(refs[j])] })
	for _, r := range refs {
		m := c.Models[r]
		for i, a := range m.Aliases {
			key := fmt.Sprintf("models.%s.aliases[%d]", r, i)
			switch {
			case strings.Contains(a, "/"):
				bad(key, "alias %q looks like a model (provider/model); an alias is one word, such as fast", a)
				continue
			case strings.EqualFold(a, "default") || strings.EqualFold(a, "list"):
				bad(key, "alias %q is a word /model keeps for itself (/model default, /model list)", a)
				continue
			case !commands.ValidAlias(a):
				bad(key, "bad alias %q: use letters, digits, '-', '_' or '.' (at most 64), starting with a letter or digit", a)
				continue
			}
			if prev, dup := owner[strings.ToLower(a)]; dup {
				if prev == r {
					bad(key, "alias %q is listed twice", a)
				} else {
					bad(key, "alias %q is already an alias of %s; each alias names one model", a, prev)
				}
				continue
			}
			owner[strings.ToLower(a)] = r
		}
		if len(m.Aliases) > 0 && !chained[r] && !allowed(allow, r) {
			bad("models."+string(r)+".aliases", "%s has aliases but nobody can choose it: add selectable: true (or name it in a chain)", r)
		}
	}
}

// allowed reports whether ref matches one of the allow patterns.
func allowed(patterns []string, ref failover.ModelRef) bool {
	for _, p := range patterns {
		if commands.MatchPattern(p, string(ref)) {
			return true
		}
	}
	return false
}
