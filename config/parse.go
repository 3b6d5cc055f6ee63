package config

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/suggest"
)

// Parse parses a configuration. name is used in error messages (usually the file
// path); getenv resolves ${VAR} references (os.LookupEnv in production). Every
// problem found is returned, joined; each one is a *Error naming file, line and key.
func Parse(name string, data []byte, getenv func(string) (string, bool)) (cfg *Config, err error) {
	if getenv == nil {
		getenv = func(string) (string, bool) { return "", false }
	}
	defer func() {
		// The node walker is written not to panic; this keeps that promise even
		// for a YAML library surprise.
		if r := recover(); r != nil {
			cfg, err = nil, &Error{File: name, Msg: fmt.Sprintf("cannot parse: %v", r)}
		}
	}()
	d := &decoder{file: name, getenv: getenv, cfg: Default(), lines: map[string]int{}}
	d.cfg.File = name
	var doc yaml.Node
	text := d.protect(data)
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, d.yamlError(err, text)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			root = nil
		} else {
			root = root.Content[0]
		}
	}
	if root == nil || root.Kind == 0 || (root.Kind == yaml.ScalarNode && root.Tag == "!!null") {
		d.errAt(1, "", "the file is empty: start from config.example.yaml (cp config.example.yaml config.yaml), or set at least agents.defaults.model.primary")
		return nil, errors.Join(d.errs...)
	}
	if root.Kind != yaml.MappingNode {
		d.errAt(root.Line, "", "the file must hold settings as key: value lines, like config.example.yaml, not %s", kindName(root))
		return nil, errors.Join(d.errs...)
	}
	d.root(root)
	if len(d.errs) == 0 {
		d.validate()
	}
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	d.cfg.Lines = d.lines
	return d.cfg, nil
}

type decoder struct {
	file   string
	getenv func(string) (string, bool)
	cfg    *Config
	errs   []error
	lines  map[string]int // key path -> line, for cross-reference checks
	// envErrs collects missing-variable errors instead of errs while a disabled
	// channel section is decoded: an unused token need not be set.
	envErrs *[]error
	// quiet is set while a secret is decoded: messages never quote its text.
	quiet bool
	// envRefs maps the placeholders protect put into the text back to the ${...}
	// references they stand for.
	envRefs map[string]string
	prefix  string
	// hint replaces the "${X:-default}" advice on a missing variable (a secret
	// takes no default, so that advice would only lead to a second error).
	hint string
	// unsetKeys are the profiles whose key comes from variables that are unset
	// or empty: left out when optional, else an error (leaveOutUnsetKeys).
	unsetKeys map[string]unsetKey
	// literals are the secrets written into the file (checkPitfalls).
	literals []literalSecret
	// choices are the keys of entries with an enum, for checkEnums.
	choices []choice
	// droppedFallbacks counts the fallbacks left out with their keys.
	droppedFallbacks []failover.ModelRef
	// fromEnv maps a key whose value came through ${...} to that value and
	// the reference: a message about the key quotes the reference, never what
	// the environment holds, which may be a key put in the wrong place (P4).
	fromEnv map[string][2]string
}

// hideEnv replaces, in a message about key, the value the environment gave
// the key by the ${...} reference written in the file.
func (d *decoder) hideEnv(key, msg string) string {
	if v, ok := d.fromEnv[key]; ok {
		msg = strings.ReplaceAll(msg, v[0], v[1])
	}
	return msg
}

// unsetKey is a profile key whose environment variables gave nothing.
type unsetKey struct {
	line int
	vars []string
}

var yamlLine = regexp.MustCompile(`line (\d+): `)

func (d *decoder) yamlError(err error, data []byte) error {
	if line, msg := indentProblem(data); line > 0 {
		return &Error{File: d.file, Line: line, Msg: msg}
	}
	var errs []error
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	for _, m := range msgs {
		m = strings.TrimPrefix(m, "yaml: ")
		line := 0
		if loc := yamlLine.FindStringSubmatchIndex(m); loc != nil {
			line, _ = strconv.Atoi(m[loc[2]:loc[3]])
			m = m[:loc[0]] + m[loc[1]:]
		}
		errs = append(errs, &Error{File: d.file, Line: line, Msg: "invalid YAML: " + plainYAML(m)})
	}
	return errors.Join(errs...)
}

func (d *decoder) errAt(line int, key, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Key: key, Msg: d.hideEnv(key, fmt.Sprintf(format, args...))})
}

func (d *decoder) errorf(n *yaml.Node, key, format string, args ...any) {
	d.errAt(n.Line, key, format, args...)
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	case yaml.AliasNode:
		return "an alias"
	}
	return "something else"
}

// fields walks a mapping with a fixed set of keys; unknown keys are errors.
func (d *decoder) fields(n *yaml.Node, path string, fs map[string]func(v *yaml.Node, key string)) {
	d.entries(n, path, func(name string, k, v *yaml.Node, key string) {
		fn, ok := fs[name]
		if !ok {
			d.errorf(k, key, "unknown key%s (known: %s)", didYouMeanKey(name, path, fs), knownKeys(fs))
			return
		}
		fn(v, key)
	})
}

// entries walks a mapping with free-form keys (provider ids, profile ids, models).
func (d *decoder) entries(n *yaml.Node, path string, fn func(name string, k, v *yaml.Node, key string)) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "must be a mapping, not %s", kindName(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode || k.Value == "" {
			d.errorf(n.Content[i], path, "keys must be non-empty plain words")
			continue
		}
		name := d.restore(k.Value)
		key := join(path, name)
		if prev, dup := seen[name]; dup {
			d.errorf(k, key, "duplicate key (first at line %d)", prev)
			continue
		}
		seen[name] = k.Line
		d.lines[key] = k.Line
		fn(name, k, v, key)
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// didYouMeanKey is ": did you mean x?" for the known key of the section at
// path nearest to a misspelt one, else for the key of that name deeper inside
// the section (idle_seconds under agents.defaults is
// agents.defaults.timeouts.idle_seconds; listen at the top is server.listen),
// or "".
func didYouMeanKey(name, path string, fs map[string]func(*yaml.Node, string)) string {
	ks := make([]string, 0, len(fs))
	for k := range fs {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	if k, ok := suggest.Closest(name, ks); ok {
		return ": did you mean " + k + "?"
	}
	var below []string // only one is a suggestion: channels.enabled could be any channel's
	for _, s := range settings {
		if fixed(s.key) && strings.HasSuffix(s.key, "."+name) && (path == "" || strings.HasPrefix(s.key, path+".")) {
			below = append(below, s.key)
		}
	}
	if len(below) == 1 {
		return ": it belongs in a section below: did you mean " + below[0] + "?"
	}
	return ""
}

func knownKeys(fs map[string]func(*yaml.Node, string)) string {
	ks := make([]string, 0, len(fs))
	for k := range fs {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// scalar returns the expanded text of a scalar node; ok is false after an error.
func (d *decoder) scalar(n *yaml.Node, key string) (string, bool) {
	n = resolve(n)
	if isNull(n) {
		return "", true
	}
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, key, "must be a single value, not %s", kindName(n))
		return "", false
	}
	raw := d.restore(n.Value)
	s, missing, err := expand(raw, d.getenv)
	if err == nil && s != "" && s != raw {
		if d.fromEnv == nil {
			d.fromEnv = map[string][2]string{}
		}
		d.fromEnv[key] = [2]string{s, raw}
	}
	if err != nil {
		if d.quiet {
			err = errors.New("bad ${...} reference in value")
		}
		d.errorf(n, key, "%v", err)
		return "", false
	}
	if len(missing) > 0 {
		for _, v := range missing {
			hint := fmt.Sprintf("use ${%s:-default} for an optional value", v)
			if d.hint != "" {
				hint = d.hint
			}
			e := &Error{File: d.file, Line: n.Line, Key: key, Msg: fmt.Sprintf("environment variable %s is not set (%s)%s", v, hint, d.didYouMean(v))}
			if d.envErrs != nil {
				*d.envErrs = append(*d.envErrs, e)
			} else {
				d.errs = append(d.errs, e)
			}
		}
		return "", false
	}
	return s, true
}

func (d *decoder) secret(dst *Secret) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		d.quiet = true
		s, ok := d.scalar(n, key)
		d.quiet = false
		if ok {
			*dst = Secret(s)
		}
		if rn := resolve(n); rn != nil && rn.Kind == yaml.ScalarNode && !isNull(rn) {
			d.noteLiteral(key, rn.Line, d.restore(rn.Value))
		}
	}
}

// hinted decodes with fn, advising hint instead of "${X:-default}" when a
// variable is missing.
func (d *decoder) hinted(hint string, fn func(*yaml.Node, string)) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		outer := d.hint
		d.hint = hint
		fn(n, key)
		d.hint = outer
	}
}

// profileKey decodes a profile's key. Variables that are unset (or give an
// empty key, as ${X:-} does) do not fail here: validate leaves an optional
// profile out, and fails on any other (leaveOutUnsetKeys).
func (d *decoder) profileKey(id string, dst *Secret) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		var pending []error
		outer := d.envErrs
		d.envErrs = &pending
		d.secret(dst)(n, key)
		d.envErrs = outer
		rn := resolve(n)
		if rn == nil || rn.Kind != yaml.ScalarNode || *dst != "" {
			return
		}
		raw := d.restore(rn.Value)
		var vars []string
		for _, m := range envRef.FindAllString(raw, -1) {
			if strings.HasPrefix(m, "$$") {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(m, "${"), "}"), ":-")
			if validEnvName(name) && !slices.Contains(vars, name) {
				vars = append(vars, name)
			}
		}
		if len(vars) == 0 {
			return // a literal empty key: validate says it is empty
		}
		if d.unsetKeys == nil {
			d.unsetKeys = map[string]unsetKey{}
		}
		d.unsetKeys[id] = unsetKey{line: rn.Line, vars: vars}
	}
}

func (d *decoder) boolean(dst *bool) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		s, ok := d.scalar(n, key)
		if !ok || s == "" {
			return
		}
		switch strings.ToLower(s) {
		case "true", "yes", "on":
			*dst = true
		case "false", "no", "off":
			*dst = false
		default:
			d.errorf(n, key, "bad boolean %q: want true or false", s)
		}
	}
}

// integer parses a whole number >= min.
func (d *decoder) integer(dst *int, min int) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		s, ok := d.scalar(n, key)
		if !ok || s == "" {
			return
		}
		v, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
		if err != nil {
			d.errorf(n, key, "bad number %q: want a whole number", s)
			return
		}
		if v < min {
			d.errorf(n, key, "bad number %d: %s", v, bounds(float64(v), float64(min), math.Inf(1)))
			return
		}
		*dst = v
	}
}

// number parses a finite decimal in [min, max].
func (d *decoder) number(dst *float64, min, max float64) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		s, ok := d.scalar(n, key)
		if !ok || s == "" {
			return
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			d.errorf(n, key, "bad number %q: want a plain number such as 1.5", s)
			return
		}
		if msg := bounds(v, min, max); msg != "" {
			d.errorf(n, key, "bad number %s: %s", s, msg)
			return
		}
		*dst = v
	}
}

// bounds says what is wrong with v outside [min, max], in plain numbers ("" when
// it is inside).
func bounds(v, min, max float64) string {
	switch {
	case v < min && min == 0:
		return "must not be negative"
	case v < min:
		return "must be at least " + plain(min)
	case v > max:
		return "must be at most " + plain(max)
	}
	return ""
}

// plain writes a bound without exponent: 87600, 0.5.
func plain(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// maxUnits is the longest duration a *_hours, *_minutes, *_seconds or *_ms key
// takes: ten years, far beyond any useful setting and far inside time.Duration.
const maxUnits = 10 * 365 * 24 * time.Hour

// units parses a non-negative decimal count of unit (e.g. hours) into a duration.
func (d *decoder) units(dst *time.Duration, unit time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		var f float64 = -1
		d.number(&f, 0, float64(maxUnits/unit))(n, key)
		if f >= 0 {
			*dst = time.Duration(f * float64(unit))
		}
	}
}

// duration parses a Go duration such as "60s", "5m", "1h30m" (0 allowed).
func (d *decoder) duration(dst *time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		s, ok := d.scalar(n, key)
		if !ok || s == "" {
			return
		}
		v, err := parseDuration(s)
		if err != nil {
			d.errorf(n, key, "%v", err)
			return
		}
		*dst = v
	}
}

func parseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: want a number with a unit, e.g. 30s, 5m or 1h", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("bad duration %q: must not be negative", s)
	}
	return v, nil
}

// list walks a sequence, calling fn for each item with its indexed key.
func (d *decoder) list(n *yaml.Node, path string, fn func(i int, v *yaml.Node, key string)) bool {
	n = resolve(n)
	if isNull(n) {
		return true
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "must be a list, not %s", kindName(n))
		return false
	}
	for i, v := range n.Content {
		fn(i, v, fmt.Sprintf("%s[%d]", path, i))
	}
	return true
}

func (d *decoder) durations(dst *[]time.Duration) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		var out []time.Duration
		bad := false
		d.list(n, key, func(_ int, v *yaml.Node, k string) {
			s, ok := d.scalar(v, k)
			if !ok {
				bad = true
				return
			}
			x, err := parseDuration(s)
			if err != nil || x == 0 {
				if err == nil {
					err = fmt.Errorf("bad duration %q: must be positive", s)
				}
				d.errorf(v, k, "%v", err)
				bad = true
				return
			}
			out = append(out, x)
		})
		if !bad && len(out) > 0 {
			*dst = out
		}
	}
}
