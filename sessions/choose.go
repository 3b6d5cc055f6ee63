package sessions

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/detourbot/detour/commands"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/suggest"
)

// Models people can choose with /model and /new: every model of the configured
// chains (the default primary and fallbacks, each agent's model and fallbacks),
// the models: entries marked selectable, and any model of a configured provider
// that matches a pattern of agents.defaults.model.allow. Anything else is
// refused with a "did you mean" suggestion, so a typo never becomes a model
// that fails on every turn.

// badArgument is a command's answer to an argument it cannot take (a /model, /new
// or /recover target): msg is the text the person reads, and the error matches
// its sentinel (ErrUnknownModel, ErrUnknownProfile), whose own text stays out
// of the answer.
type badArgument struct {
	sentinel error
	msg      string
}

func (e *badArgument) Error() string { return e.msg }

// Is makes errors.Is(err, e.sentinel) hold.
func (e *badArgument) Is(target error) bool { return target == e.sentinel }

// denied is a command's refusal in its own words (a badArgument of no sentinel).
func denied(text string) error { return &badArgument{msg: text} }

// refused is a badArgument matching sentinel, its text formatted.
func refused(sentinel error, format string, args ...any) error {
	return &badArgument{sentinel: sentinel, msg: fmt.Sprintf(format, args...)}
}

// choices is the router's table of models people can choose, built once.
type choices struct {
	models  []failover.ModelRef            // in the order /models lists them
	allowed map[failover.ModelRef]bool     // the same, as a set
	aliases map[string]failover.ModelRef   // lower-case alias -> model
	of      map[failover.ModelRef][]string // model -> its aliases, as configured
	allow   []string                       // agents.defaults.model.allow patterns
}

func newChoices(cfg Config) choices {
	c := choices{allowed: map[failover.ModelRef]bool{}, aliases: map[string]failover.ModelRef{}, of: map[failover.ModelRef][]string{}}
	add := func(refs ...failover.ModelRef) {
		for _, m := range refs {
			if m != "" && !c.allowed[m] {
				c.allowed[m] = true
				c.models = append(c.models, m)
			}
		}
	}
	add(cfg.Primary)
	add(cfg.Fallbacks...)
	for _, a := range cfg.Agents {
		add(a.Model)
		if a.Fallbacks != nil {
			add(*a.Fallbacks...)
		}
	}
	refs := make([]string, 0, len(cfg.Models))
	for m := range cfg.Models {
		refs = append(refs, string(m))
	}
	sort.Strings(refs)
	for _, m := range refs {
		info := cfg.Models[failover.ModelRef(m)]
		if info.Selectable {
			add(failover.ModelRef(m))
		}
	}
	for _, m := range refs {
		ref := failover.ModelRef(m)
		for _, a := range cfg.Models[ref].Aliases {
			if _, dup := c.aliases[strings.ToLower(a)]; a == "" || dup {
				continue // config validation refuses both; first wins here
			}
			c.aliases[strings.ToLower(a)] = ref
			c.of[ref] = append(c.of[ref], a)
		}
	}
	c.allow = cfg.Allow
	return c
}

// may reports whether people may choose ref.
func (c *choices) may(ref failover.ModelRef) bool {
	if c.allowed[ref] {
		return true
	}
	for _, p := range c.allow {
		if commands.MatchPattern(p, string(ref)) {
			return true
		}
	}
	return false
}

// names lists every model and alias, for suggestions.
func (c *choices) names() []string {
	out := make([]string, 0, len(c.models)+len(c.aliases))
	for _, m := range c.models {
		out = append(out, string(m))
	}
	for _, m := range c.models {
		out = append(out, c.of[m]...)
	}
	return out
}

// refuse says msg about typed, which is no model people can choose, with the
// nearest name.
func (c *choices) refuse(msg, typed string) error {
	if s, ok := suggest.Closest(typed, c.names()); ok {
		msg += "; did you mean " + s + "?"
	}
	return &badArgument{sentinel: ErrUnknownModel, msg: msg + " (/models lists the models you can choose)"}
}

// chooseModel resolves what a person typed after /model or /new (a model or an
// alias) to a model they may choose, or says why not.
func (r *Router) chooseModel(typed string) (failover.ModelRef, error) {
	c := &r.choices
	shown := typed // what the answer quotes: a whole pasted page is not echoed back
	if utf8.RuneCountInString(shown) > 80 {
		shown = string([]rune(shown)[:80]) + "…"
	}
	if !strings.Contains(typed, "/") {
		if m, ok := c.aliases[strings.ToLower(typed)]; ok {
			return m, nil
		}
		return "", c.refuse(fmt.Sprintf("unknown model or alias %q", shown), typed)
	}
	if !commands.ValidRef(typed) {
		return "", c.refuse(fmt.Sprintf("%q is not a model (provider/model)", shown), typed)
	}
	ref := failover.ModelRef(typed)
	p, _ := ref.Split()
	if !r.providerKnown(p) {
		return "", c.refuse(fmt.Sprintf("provider %q is not configured", p), typed)
	}
	if !c.may(ref) {
		return "", c.refuse(fmt.Sprintf("%q is not one of the models you can choose here", shown), typed)
	}
	return ref, nil
}

// entries lists the models people can choose with their aliases (/models).
func (c *choices) entries() []commands.ModelEntry {
	out := make([]commands.ModelEntry, len(c.models))
	for i, m := range c.models {
		out[i] = commands.ModelEntry{Ref: string(m), Aliases: c.of[m]}
	}
	return out
}

// aliasMap is the model -> aliases table in the form commands renders.
func (c *choices) aliasMap() map[string][]string {
	out := make(map[string][]string, len(c.of))
	for m, a := range c.of {
		out[string(m)] = a
	}
	return out
}
