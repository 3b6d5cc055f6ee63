// The walker: it decodes the file from the settings table (settings.go),
// section by section, with the decoder's primitives (parse.go). Unknown keys
// are errors; each entry section (providers.<id>, agents.list[], ...) says
// what its entries become in entrySections.

package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/detourbot/detour/failover"
	"go.yaml.in/yaml/v3"
)

// keys maps each key of a section to what decodes its value.
type keys = map[string]func(*yaml.Node, string)

// A setting is one key of the file.
type setting struct {
	key string // dotted path; <name> for a mapping's entries, [] for a list's items
	val value
	// def is the default in the file's own words ("" = the zero value, or the
	// engine's default for Config.Policy's numbers). Default applies the
	// defaults of fixed keys; an entry's key left empty takes its default.
	def  string
	doc  string // one line: what it does
	enum []string
	// bad names a value outside enum in errors ("unknown driver"); "" = "bad value".
	bad string
	// sample marks a key whose value in config.example.yaml is an example,
	// not its default (a primary model, a token reference).
	sample bool
}

// A value says how a setting's value is decoded into its owner (the Config,
// or the entry of an entry section) and how it is written in the file.
type value interface {
	decoder(d *decoder, owner any) func(*yaml.Node, string)
	show(owner any) string
	// items lists the value's words for an enum check: a list's items
	// (list true), else the value itself.
	items(owner any) (words []string, list bool)
}

// field is a value read into the field f of an owner of type T.
type field[T, V any] struct {
	f    func(*T) *V
	dec  func(d *decoder, dst *V) func(*yaml.Node, string)
	fmt  func(V) string
	each func(V) []string // a list's items; nil for a single value
}

func (v field[T, V]) decoder(d *decoder, o any) func(*yaml.Node, string) {
	return v.dec(d, v.f(o.(*T)))
}

func (v field[T, V]) show(o any) string { return v.fmt(*v.f(o.(*T))) }

func (v field[T, V]) items(o any) ([]string, bool) {
	if v.each == nil {
		return []string{v.show(o)}, false
	}
	return v.each(*v.f(o.(*T))), true
}

// text is a string, or a string type such as failover.ModelRef.
func text[T any, S ~string](f func(*T) *S) value {
	return field[T, S]{f: f,
		dec: func(d *decoder, dst *S) func(*yaml.Node, string) {
			return func(n *yaml.Node, key string) {
				if s, ok := d.scalar(n, key); ok {
					*dst = S(s)
				}
			}
		},
		fmt: func(s S) string { return string(s) }}
}

// secret is a credential; it is never shown. hint replaces the
// "${X:-default}" advice on a missing variable.
func secret[T any](f func(*T) *Secret, hint string) value {
	return field[T, Secret]{f: f,
		dec: func(d *decoder, dst *Secret) func(*yaml.Node, string) {
			return d.hinted(hint, d.secret(dst))
		},
		fmt: func(Secret) string { return "" }}
}

func boolean[T any](f func(*T) *bool) value {
	return field[T, bool]{f: f, dec: (*decoder).boolean, fmt: strconv.FormatBool}
}

// whole is a whole number >= min.
func whole[T any](f func(*T) *int, min int) value {
	return field[T, int]{f: f,
		dec: func(d *decoder, dst *int) func(*yaml.Node, string) { return d.integer(dst, min) },
		fmt: strconv.Itoa}
}

// num is a decimal in [min, max].
func num[T any](f func(*T) *float64, min, max float64) value {
	return field[T, float64]{f: f,
		dec: func(d *decoder, dst *float64) func(*yaml.Node, string) { return d.number(dst, min, max) },
		fmt: plain}
}

// count is a decimal number of unit (the *_hours, *_minutes, *_seconds and
// *_ms keys).
func count[T any](f func(*T) *time.Duration, unit time.Duration) value {
	return field[T, time.Duration]{f: f,
		dec: func(d *decoder, dst *time.Duration) func(*yaml.Node, string) { return d.units(dst, unit) },
		fmt: func(v time.Duration) string { return plain(float64(v) / float64(unit)) }}
}

// dur is a Go duration such as 30s, 5m or 1h.
func dur[T any](f func(*T) *time.Duration) value {
	return field[T, time.Duration]{f: f, dec: (*decoder).duration, fmt: showDuration}
}

// texts is a list of strings (or of a string type).
func texts[T any, S ~string](f func(*T) *[]S) value {
	return field[T, []S]{f: f,
		dec: func(d *decoder, dst *[]S) func(*yaml.Node, string) {
			return func(n *yaml.Node, key string) {
				out := []S{}
				if d.list(n, key, func(_ int, v *yaml.Node, k string) {
					if s, ok := d.scalar(v, k); ok {
						d.lines[k] = resolve(v).Line
						out = append(out, S(s))
					}
				}) {
					*dst = out
				}
			}
		},
		fmt:  func(l []S) string { return "[" + strings.Join(plainWords(l), ", ") + "]" },
		each: plainWords[S]}
}

// plainWords converts a list of a string type to strings.
func plainWords[S ~string](l []S) []string {
	s := make([]string, len(l))
	for i, x := range l {
		s[i] = string(x)
	}
	return s
}

// ladder is a list of positive durations.
func ladder[T any](f func(*T) *[]time.Duration) value {
	return field[T, []time.Duration]{f: f, dec: (*decoder).durations,
		fmt: func(l []time.Duration) string {
			s := make([]string, len(l))
			for i, x := range l {
				s[i] = showDuration(x)
			}
			return "[" + strings.Join(s, ", ") + "]"
		}}
}

// customValue decodes with its own function; show is nil when it has
// nothing to show.
type customValue[T any] struct {
	dec func(d *decoder, o *T) func(*yaml.Node, string)
	shw func(o *T) string
}

func custom[T any](dec func(d *decoder, o *T) func(*yaml.Node, string), show func(o *T) string) value {
	return customValue[T]{dec: dec, shw: show}
}

func (v customValue[T]) decoder(d *decoder, o any) func(*yaml.Node, string) {
	return v.dec(d, o.(*T))
}

func (v customValue[T]) items(any) ([]string, bool) { return nil, false }

func (v customValue[T]) show(o any) string {
	if v.shw == nil {
		return ""
	}
	return v.shw(o.(*T))
}

// showDuration writes a duration as the file would: 5m, 1h30m, 168h, 0.
func showDuration(v time.Duration) string {
	if v == 0 {
		return "0"
	}
	s := v.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// The owners of the entry sections' keys.
type (
	providerEntry struct {
		Provider
		billing time.Duration // 0 = auth.cooldowns.billing_backoff_hours
	}
	profileEntry struct {
		Profile
		expires string
	}
	orderEntry struct{ ids []string }
)

// An entrySection turns each entry of a mapping of names (or each item of a
// list) into part of the Config: start makes the owner its keys are decoded
// into, finish stores it.
type entrySection struct {
	start  func(d *decoder, name string) any
	finish func(d *decoder, name string, owner any)
}

// entrySections holds every entry section, by the path of its mapping or list.
var entrySections = map[string]entrySection{
	"providers": {
		start: func(_ *decoder, name string) any { return &providerEntry{Provider: Provider{ID: name}} },
		finish: func(d *decoder, name string, o any) {
			c, p := d.cfg, o.(*providerEntry)
			if p.billing > 0 {
				if c.Policy.BillingBackoffByProvider == nil {
					c.Policy.BillingBackoffByProvider = map[string]time.Duration{}
				}
				c.Policy.BillingBackoffByProvider[name] = p.billing
			}
			if p.BaseURL == "" {
				p.BaseURL = defaultBaseURLs[p.API]
			}
			c.Providers[name] = p.Provider
			c.ProviderIDs = append(c.ProviderIDs, name)
		},
	},
	"auth.profiles": {
		start: func(_ *decoder, id string) any { return &profileEntry{Profile: Profile{ID: id}} },
		finish: func(d *decoder, id string, o any) {
			p, key := o.(*profileEntry), "auth.profiles."+id
			if p.expires != "" {
				t, err := time.Parse(time.RFC3339, p.expires)
				if err != nil {
					d.errAt(d.lines[key+".expires_at"], key+".expires_at", "bad time %q: want RFC 3339, e.g. 2026-01-31T00:00:00Z", p.expires)
				}
				p.ExpiresAt = t
			}
			d.cfg.Auth.Profiles[id] = p.Profile
			d.cfg.Auth.ProfileIDs = append(d.cfg.Auth.ProfileIDs, id)
		},
	},
	"auth.order": {
		start:  func(*decoder, string) any { return &orderEntry{} },
		finish: func(d *decoder, provider string, o any) { d.cfg.Auth.Order[provider] = o.(*orderEntry).ids },
	},
	"agents.list": {
		start:  func(*decoder, string) any { return &Agent{} },
		finish: func(d *decoder, _ string, o any) { d.cfg.Agents.List = append(d.cfg.Agents.List, *o.(*Agent)) },
	},
	"alerts.webhooks": {
		start: func(*decoder, string) any { return &Webhook{} },
		finish: func(d *decoder, _ string, o any) {
			d.cfg.Alerts.Webhooks = append(d.cfg.Alerts.Webhooks, *o.(*Webhook))
		},
	},
	"models": {
		start:  func(*decoder, string) any { return &Model{} },
		finish: func(d *decoder, ref string, o any) { d.cfg.Models[failover.ModelRef(ref)] = *o.(*Model) },
	},
}

// A node is one key of the schema's tree: a setting, a section of further
// keys, or an entry section whose one child (<name> or []) describes its
// entries.
type node struct {
	seg, path string
	set       *setting
	kids      []*node
}

func (n *node) kid(seg string) *node {
	for _, k := range n.kids {
		if k.seg == seg {
			return k
		}
	}
	return nil
}

// entries returns the child that describes n's entries, or nil when n is no
// entry section.
func (n *node) entries() *node {
	if len(n.kids) == 1 && (n.kids[0].seg == "[]" || strings.HasPrefix(n.kids[0].seg, "<")) {
		return n.kids[0]
	}
	return nil
}

// fixed reports whether a key names one place of the Config, outside any
// entry section.
func fixed(key string) bool { return !strings.ContainsAny(key, "<[") }

// segments splits a key: "agents.list[].id" → agents, list, [], id.
func segments(key string) []string {
	var out []string
	for _, s := range strings.Split(key, ".") {
		if b, ok := strings.CutSuffix(s, "[]"); ok {
			out = append(out, b, "[]")
			continue
		}
		out = append(out, s)
	}
	return out
}

var (
	schemaOnce sync.Once
	schemaRoot *node
)

// schema returns the tree of the settings table.
func schema() *node {
	schemaOnce.Do(func() {
		root := &node{}
		for i := range settings {
			s := &settings[i]
			n := root
			for _, seg := range segments(s.key) {
				k := n.kid(seg)
				if k == nil {
					k = &node{seg: seg, path: join(n.path, seg)}
					if seg == "[]" {
						k.path = n.path + "[]"
					}
					n.kids = append(n.kids, k)
				}
				n = k
			}
			n.set = s
		}
		schemaRoot = root
	})
	return schemaRoot
}

// root decodes the top level.
func (d *decoder) root(n *yaml.Node) {
	d.fields(n, "", d.keysOf(schema(), d.cfg))
}

// keysOf returns the decoders of n's keys, each writing into owner.
func (d *decoder) keysOf(n *node, owner any) keys {
	ks := keys{}
	for _, k := range n.kids {
		switch {
		case k.entries() != nil:
			ks[k.seg] = d.entrySection(k)
		case k.set != nil:
			ks[k.seg] = k.set.val.decoder(d, owner)
		default:
			ks[k.seg] = d.section(k, owner)
		}
	}
	return ks
}

// section decodes the mapping of n's keys. In a section with an enabled key
// (a channel), the ${VAR} references matter only while it is enabled: an
// unused token need not be set.
func (d *decoder) section(n *node, owner any) func(*yaml.Node, string) {
	on := n.kid("enabled")
	if on == nil || on.set == nil {
		return func(v *yaml.Node, key string) { d.fields(v, key, d.keysOf(n, owner)) }
	}
	return func(v *yaml.Node, key string) {
		var pending []error
		outer := d.envErrs
		d.envErrs = &pending
		d.fields(v, key, d.keysOf(n, owner))
		d.envErrs = outer
		if on.set.val.show(owner) == "true" {
			d.errs = append(d.errs, pending...)
		}
	}
}

// entrySection decodes the entries of n, a mapping of names or a list.
func (d *decoder) entrySection(n *node) func(*yaml.Node, string) {
	kind, ok := entrySections[n.path]
	if !ok {
		panic("config: no entrySections entry for " + n.path)
	}
	e := n.entries()
	one := func(name string, v *yaml.Node, key string) {
		o := kind.start(d, name)
		if e.set != nil {
			e.set.val.decoder(d, o)(v, key)
		} else {
			d.fields(v, key, d.keysOf(e, o))
			for _, k := range e.kids {
				if k.set == nil {
					continue
				}
				if k.set.def != "" && k.set.val.show(o) == "" {
					k.set.val.decoder(d, o)(defaultNode(k.set.def), key+"."+k.seg)
				}
				if len(k.set.enum) > 0 {
					d.choices = append(d.choices, choice{k.set, key + "." + k.seg, o})
				}
			}
		}
		kind.finish(d, name, o)
	}
	if e.seg == "[]" {
		return func(v *yaml.Node, key string) {
			d.list(v, key, func(_ int, v *yaml.Node, key string) {
				d.lines[key] = resolve(v).Line
				one("", v, key)
			})
		}
	}
	return func(v *yaml.Node, key string) {
		d.entries(v, key, func(name string, _, v *yaml.Node, key string) { one(name, v, key) })
	}
}

func defaultNode(def string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: def}
}

// applyDefaults sets the defaults of the fixed keys on c.
func applyDefaults(c *Config) {
	d := &decoder{file: "(defaults)", cfg: c, lines: map[string]int{}, getenv: func(string) (string, bool) { return "", false }}
	for _, s := range settings {
		if s.def != "" && fixed(s.key) {
			s.val.decoder(d, c)(defaultNode(s.def), s.key)
		}
	}
	if len(d.errs) > 0 {
		panic(fmt.Sprintf("config: a default of the settings table does not parse: %v", d.errs))
	}
}

// A choice is a key of an entry with an enum, for checkEnums.
type choice struct {
	set   *setting
	key   string
	owner any
}

// checkEnums validates the settings with a fixed set of values: the fixed
// keys, and the keys of entries (d.choices, in file order).
func (d *decoder) checkEnums(bad func(key, format string, args ...any)) {
	all := []choice{}
	for i := range settings {
		if s := &settings[i]; len(s.enum) > 0 && fixed(s.key) {
			all = append(all, choice{s, s.key, d.cfg})
		}
	}
	for _, c := range append(all, d.choices...) {
		vals, list := c.set.val.items(c.owner)
		for i, v := range vals {
			if slices.Contains(c.set.enum, v) {
				continue
			}
			what, key := c.set.bad, c.key
			if what == "" {
				what = "bad value"
			}
			if list {
				key = fmt.Sprintf("%s[%d]", key, i)
			}
			bad(key, "%s %q: want %s", what, v, orList(c.set.enum))
		}
	}
}

// orList writes "a", "a or b", "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
