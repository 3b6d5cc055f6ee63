package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/detourbot/detour/failover"
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
	// or empty: left out, or an error when the bot cannot do without them.
	unsetKeys map[string]unsetKey
}

// unsetKey is a profile key whose environment variables gave nothing.
type unsetKey struct {
	line int
	vars []string
}

var envRef = regexp.MustCompile(`\$?\$\{[^}\n]*\}`)

// protect replaces every ${...} reference with a plain placeholder word before the
// YAML parser sees the text: "{key: ${X}}" is otherwise a broken flow mapping.
// Lines are unchanged; scalar restores the reference and expands it.
func (d *decoder) protect(data []byte) []byte {
	if !bytes.Contains(data, []byte("${")) {
		return data
	}
	d.prefix = "DETOURxENVx"
	for i := 0; bytes.Contains(data, []byte(d.prefix)); i++ {
		d.prefix = fmt.Sprintf("DETOURxENV%dx", i)
	}
	d.envRefs = map[string]string{}
	return envRef.ReplaceAllFunc(data, func(m []byte) []byte {
		ph := fmt.Sprintf("%s%dx", d.prefix, len(d.envRefs))
		d.envRefs[ph] = string(m)
		return []byte(ph)
	})
}

var placeholder = regexp.MustCompile(`DETOURxENV[0-9]*x[0-9]+x`)

// restore puts the original ${...} references back into s.
func (d *decoder) restore(s string) string {
	if d.envRefs == nil || !strings.Contains(s, d.prefix) {
		return s
	}
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		if r, ok := d.envRefs[m]; ok {
			return r
		}
		return m
	})
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
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
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
			d.errorf(k, key, "unknown key (known: %s)", knownKeys(fs))
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
	s, missing, err := expand(d.restore(n.Value), d.getenv)
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
			e := &Error{File: d.file, Line: n.Line, Key: key, Msg: fmt.Sprintf("environment variable %s is not set (%s)", v, hint)}
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

func (d *decoder) str(dst *string) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		if s, ok := d.scalar(n, key); ok {
			*dst = s
		}
	}
}

func (d *decoder) secret(dst *Secret) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		d.quiet = true
		s, ok := d.scalar(n, key)
		d.quiet = false
		if ok {
			*dst = Secret(s)
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
// empty key, as ${X:-} does) do not fail here: validate leaves the profile out,
// or fails when the bot cannot do without it (leaveOutUnsetKeys).
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

func (d *decoder) strings(dst *[]string) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		out := []string{}
		if d.list(n, key, func(_ int, v *yaml.Node, k string) {
			if s, ok := d.scalar(v, k); ok {
				d.lines[k] = resolve(v).Line
				out = append(out, s)
			}
		}) {
			*dst = out
		}
	}
}

func (d *decoder) refs(dst *[]failover.ModelRef) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		out := []failover.ModelRef{}
		if d.list(n, key, func(_ int, v *yaml.Node, k string) {
			if s, ok := d.scalar(v, k); ok {
				d.lines[k] = resolve(v).Line
				out = append(out, failover.ModelRef(s))
			}
		}) {
			*dst = out
		}
	}
}

func (d *decoder) ref(dst *failover.ModelRef) func(*yaml.Node, string) {
	return func(n *yaml.Node, key string) {
		if s, ok := d.scalar(n, key); ok {
			*dst = failover.ModelRef(s)
		}
	}
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

// root decodes the top level.
func (d *decoder) root(n *yaml.Node) {
	c := d.cfg
	d.fields(n, "", map[string]func(*yaml.Node, string){
		"storage": func(v *yaml.Node, key string) {
			d.fields(v, key, map[string]func(*yaml.Node, string){
				"driver": d.str(&c.Storage.Driver),
				"dsn":    d.str(&c.Storage.DSN),
			})
		},
		"channels":  d.channels,
		"providers": d.providers,
		"auth":      d.auth,
		"agents":    d.agents,
		"models":    d.models,
		"limits": func(v *yaml.Node, key string) {
			d.fields(v, key, map[string]func(*yaml.Node, string){
				"max_paid_attempts_per_minute": d.integer(&c.Limits.MaxPaidAttemptsPerMinute, 0),
				"max_message_bytes":            d.integer(&c.Limits.MaxMessageBytes, 1),
				"max_response_bytes":           d.integer(&c.Limits.MaxResponseBytes, minResponseBytes),
				"max_answer_bytes":             d.integer(&c.Limits.MaxAnswerBytes, minAnswerBytes),
				"per_user_daily_paid_calls":    d.integer(&c.Limits.PerUserDailyPaidCalls, 0),
				"per_user_daily_usd":           d.number(&c.Limits.PerUserDailyUSD, 0, 1e9),
			})
		},
		"notices": func(v *yaml.Node, key string) {
			d.fields(v, key, map[string]func(*yaml.Node, string){
				"users": d.str(&c.Notices.Users),
			})
		},
		"admin": func(v *yaml.Node, key string) {
			d.fields(v, key, map[string]func(*yaml.Node, string){
				"channel": d.str(&c.Admin.Channel),
				"users":   d.strings(&c.Admin.Users),
			})
		},
		"access": func(v *yaml.Node, key string) {
			d.fields(v, key, map[string]func(*yaml.Node, string){
				"users":           d.strings(&c.Access.Users),
				"channels":        d.strings(&c.Access.Channels),
				"direct_messages": d.boolean(&c.Access.DirectMessages),
			})
		},
		"server": func(v *yaml.Node, key string) {
			d.fields(v, key, map[string]func(*yaml.Node, string){
				"listen": d.str(&c.Server.Listen),
			})
		},
	})
}

// channelSection decodes a channel whose env references matter only when enabled.
func (d *decoder) channelSection(v *yaml.Node, key string, enabled *bool, fs map[string]func(*yaml.Node, string)) {
	var pending []error
	outer := d.envErrs
	d.envErrs = &pending
	fs["enabled"] = d.boolean(enabled)
	d.fields(v, key, fs)
	d.envErrs = outer
	if *enabled {
		d.errs = append(d.errs, pending...)
	}
}

func (d *decoder) channels(v *yaml.Node, key string) {
	ch := &d.cfg.Channels
	d.fields(v, key, map[string]func(*yaml.Node, string){
		"console": func(v *yaml.Node, key string) {
			d.fields(v, key, map[string]func(*yaml.Node, string){
				"enabled":  d.boolean(&ch.Console.Enabled),
				"format":   d.str(&ch.Console.Format),
				"stream":   d.boolean(&ch.Console.Stream),
				"progress": d.boolean(&ch.Console.Progress),
			})
		},
		"slack": func(v *yaml.Node, key string) {
			d.channelSection(v, key, &ch.Slack.Enabled, map[string]func(*yaml.Node, string){
				"app_token":         d.hinted("export it: the xapp-... app-level token; or set channels.slack.enabled: false", d.secret(&ch.Slack.AppToken)),
				"bot_token":         d.hinted("export it: the xoxb-... bot token; or set channels.slack.enabled: false", d.secret(&ch.Slack.BotToken)),
				"api_url":           d.str(&ch.Slack.APIURL),
				"events":            d.str(&ch.Slack.Events),
				"stream":            d.boolean(&ch.Slack.Stream),
				"progress":          d.boolean(&ch.Slack.Progress),
				"suggested_prompts": d.strings(&ch.Slack.SuggestedPrompts),
			})
		},
		"discord": func(v *yaml.Node, key string) {
			d.channelSection(v, key, &ch.Discord.Enabled, map[string]func(*yaml.Node, string){
				"token":           d.hinted("export it: the bot token; or set channels.discord.enabled: false", d.secret(&ch.Discord.Token)),
				"guild_id":        d.str(&ch.Discord.GuildID),
				"api_url":         d.str(&ch.Discord.APIURL),
				"message_content": d.boolean(&ch.Discord.MessageContent),
				"shard_id":        d.integer(&ch.Discord.ShardID, 0),
				"shard_count":     d.integer(&ch.Discord.ShardCount, 1),
				"stream":          d.boolean(&ch.Discord.Stream),
				"progress":        d.boolean(&ch.Discord.Progress),
				"threads":         d.boolean(&ch.Discord.Threads),
			})
		},
	})
}

func (d *decoder) providers(v *yaml.Node, key string) {
	c := d.cfg
	d.entries(v, key, func(name string, _, v *yaml.Node, key string) {
		p := Provider{ID: name}
		d.fields(v, key, map[string]func(*yaml.Node, string){
			"base_url":              d.str(&p.BaseURL),
			"billing_backoff_hours": d.units(&p.BillingBackoff, time.Hour),
		})
		c.Providers[name] = p
		c.ProviderIDs = append(c.ProviderIDs, name)
	})
}

func (d *decoder) auth(v *yaml.Node, key string) {
	a := &d.cfg.Auth
	cd := &a.Cooldowns
	d.fields(v, key, map[string]func(*yaml.Node, string){
		"profiles": func(v *yaml.Node, key string) {
			d.entries(v, key, func(id string, _, v *yaml.Node, key string) {
				p := Profile{ID: id, Type: failover.ProfileAPIKey}
				var typ, expires string
				d.fields(v, key, map[string]func(*yaml.Node, string){
					"provider":   d.str(&p.Provider),
					"type":       d.str(&typ),
					"key":        d.profileKey(id, &p.Key),
					"expires_at": d.str(&expires),
				})
				if typ != "" {
					p.Type = failover.ProfileType(typ)
				}
				if expires != "" {
					t, err := time.Parse(time.RFC3339, expires)
					if err != nil {
						d.errAt(d.lines[key+".expires_at"], key+".expires_at", "bad time %q: want RFC 3339, e.g. 2026-01-31T00:00:00Z", expires)
					}
					p.ExpiresAt = t
				}
				a.Profiles[id] = p
				a.ProfileIDs = append(a.ProfileIDs, id)
			})
		},
		"order": func(v *yaml.Node, key string) {
			d.entries(v, key, func(provider string, _, v *yaml.Node, key string) {
				var ids []string
				d.strings(&ids)(v, key)
				a.Order[provider] = ids
			})
		},
		"cooldowns": func(v *yaml.Node, key string) {
			d.fields(v, key, map[string]func(*yaml.Node, string){
				"billing_backoff_hours":          d.units(&cd.BillingBackoff, time.Hour),
				"billing_max_hours":              d.units(&cd.BillingMax, time.Hour),
				"auth_permanent_backoff_minutes": d.units(&cd.AuthPermanentBackoff, time.Minute),
				"auth_permanent_max_minutes":     d.units(&cd.AuthPermanentMax, time.Minute),
				"failure_window_hours":           d.units(&cd.FailureWindow, time.Hour),
				"overloaded_profile_rotations":   d.integer(&cd.OverloadedProfileRotations, 0),
				"overloaded_backoff_ms":          d.units(&cd.OverloadedBackoff, time.Millisecond),
				"rate_limited_profile_rotations": d.integer(&cd.RateLimitedProfileRotations, 0),
				"ladder":                         d.durations(&cd.Ladder),
				"jitter":                         d.number(&cd.Jitter, 0, 0.5),
			})
		},
	})
}

func (d *decoder) agents(v *yaml.Node, key string) {
	ag := &d.cfg.Agents
	df := &ag.Defaults
	d.fields(v, key, map[string]func(*yaml.Node, string){
		"defaults": func(v *yaml.Node, key string) {
			d.fields(v, key, map[string]func(*yaml.Node, string){
				"model": func(v *yaml.Node, key string) {
					d.fields(v, key, map[string]func(*yaml.Node, string){
						"primary":   d.ref(&df.Model.Primary),
						"fallbacks": d.refs(&df.Model.Fallbacks),
						"allow":     d.strings(&df.Model.Allow),
					})
				},
				"system_prompt": d.str(&df.SystemPrompt),
				"max_tokens":    d.integer(&df.MaxTokens, 0),
				"timeouts": func(v *yaml.Node, key string) {
					d.fields(v, key, map[string]func(*yaml.Node, string){
						"idle_seconds":    d.units(&df.Timeouts.Idle, time.Second),
						"attempt_seconds": d.units(&df.Timeouts.Attempt, time.Second),
						"run_seconds":     d.units(&df.Timeouts.Run, time.Second),
					})
				},
				"budget": func(v *yaml.Node, key string) {
					d.fields(v, key, map[string]func(*yaml.Node, string){
						"max_paid_attempts_per_turn": d.integer(&df.Budget.MaxPaidAttemptsPerTurn, 1),
						"max_turn_cost_usd":          d.number(&df.Budget.MaxTurnCostUSD, 0, 1e9),
					})
				},
				"failover": func(v *yaml.Node, key string) {
					f := &df.Failover
					d.fields(v, key, map[string]func(*yaml.Node, string){
						"retry_after_max_wait":     d.duration(&f.RetryAfterMaxWait),
						"timeout_switch_threshold": d.integer(&f.TimeoutSwitchThreshold, 1),
						"fallback_skip_ttl":        d.duration(&f.FallbackSkipTTL),
						"primary_probe_interval":   d.duration(&f.PrimaryProbeInterval),
						"cooldown_probe_interval":  d.duration(&f.CooldownProbeInterval),
						"cooldown_probe_window":    d.duration(&f.CooldownProbeWindow),
						"billing_probe_interval":   d.duration(&f.BillingProbeInterval),
						"idle_retries":             d.integer(&f.IdleRetries, 0),
						"breaker_trip":             d.integer(&f.BreakerTrip, 1),
						"empty_output_retries":     d.integer(&f.EmptyOutputRetries, 0),
						"min_parsed_wait":          d.duration(&f.MinParsedWait),
						"max_parsed_wait":          d.duration(&f.MaxParsedWait),
						"timeout_compact_ratio":    d.number(&f.TimeoutCompactRatio, 0.05, 1),
					})
				},
			})
		},
		"list": func(v *yaml.Node, key string) {
			d.list(v, key, func(_ int, v *yaml.Node, key string) {
				var a Agent
				d.lines[key] = resolve(v).Line
				d.fields(v, key, map[string]func(*yaml.Node, string){
					"id":    d.str(&a.ID),
					"model": d.ref(&a.Model),
					"fallbacks": func(v *yaml.Node, key string) {
						fb := []failover.ModelRef{}
						d.refs(&fb)(v, key)
						a.Fallbacks = &fb
					},
					"system_prompt": d.str(&a.SystemPrompt),
					"channels":      d.strings(&a.Channels),
				})
				ag.List = append(ag.List, a)
			})
		},
	})
}

func (d *decoder) models(v *yaml.Node, key string) {
	c := d.cfg
	d.entries(v, key, func(name string, _, v *yaml.Node, key string) {
		var m Model
		d.fields(v, key, map[string]func(*yaml.Node, string){
			"context_window":   d.integer(&m.ContextWindow, 0),
			"usd_per_mtok_in":  d.number(&m.USDPerMTokIn, 0, 1e9),
			"usd_per_mtok_out": d.number(&m.USDPerMTokOut, 0, 1e9),
			"selectable":       d.boolean(&m.Selectable),
			"aliases":          d.strings(&m.Aliases),
		})
		c.Models[failover.ModelRef(name)] = m
	})
}

var (
	providerID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	channelID  = regexp.MustCompile(`^(slack|discord):[A-Za-z0-9_.:-]+$`)
)

// validate checks values and cross references once everything is decoded.
// The smallest caps on provider responses (T1) that still leave room for a
// provider's error JSON and a short answer.
const (
	minResponseBytes = 64 << 10
	minAnswerBytes   = 1 << 10
)

func (d *decoder) validate() {
	c := d.cfg
	line := func(key string) int {
		for k := key; k != ""; {
			if l, ok := d.lines[k]; ok {
				return l
			}
			i := strings.LastIndexAny(k, ".[")
			if i < 0 {
				break
			}
			k = k[:i]
		}
		return 1
	}
	bad := func(key, format string, args ...any) { d.errAt(line(key), key, format, args...) }

	switch c.Storage.Driver {
	case "sqlite":
		if c.Storage.DSN == "" {
			bad("storage.dsn", "must name the database file, e.g. detour.db")
		}
	case "postgres":
		if p := postgresDSNProblem(c.Storage.DSN); p != "" {
			bad("storage.dsn", "%s: want postgres://user:password@host:5432/dbname?sslmode=disable or \"host=... dbname=...\"", p)
		}
	default:
		bad("storage.driver", "unknown driver %q: want sqlite or postgres", c.Storage.Driver)
	}

	if l := c.Limits; l.MaxAnswerBytes > l.MaxResponseBytes {
		bad("limits.max_answer_bytes", "%d is more than limits.max_response_bytes (%d): the answer is part of the response", l.MaxAnswerBytes, l.MaxResponseBytes)
	}

	if f := c.Channels.Console.Format; f != "text" && f != "jsonl" {
		bad("channels.console.format", "unknown format %q: want text or jsonl", f)
	}
	if e := c.Channels.Slack.Events; e != "all" && e != "mentions" {
		bad("channels.slack.events", "unknown value %q: want all or mentions", e)
	}
	if s := c.Channels.Slack; s.Enabled {
		if s.AppToken == "" {
			bad("channels.slack.app_token", "is required when slack is enabled (an xapp-... token)")
		}
		if s.BotToken == "" {
			bad("channels.slack.bot_token", "is required when slack is enabled (an xoxb-... token)")
		}
	}
	if dc := c.Channels.Discord; dc.Enabled && dc.Token == "" {
		bad("channels.discord.token", "is required when discord is enabled")
	}
	if dc := c.Channels.Discord; dc.ShardID >= dc.ShardCount {
		bad("channels.discord.shard_id", "shard %d does not exist: want 0 <= shard_id < shard_count (%d)", dc.ShardID, dc.ShardCount)
	}
	for key, u := range map[string]string{"channels.slack.api_url": c.Channels.Slack.APIURL, "channels.discord.api_url": c.Channels.Discord.APIURL} {
		if u != "" && !httpURL(u) {
			bad(key, "bad URL %q: want http:// or https://", u)
		}
	}

	for _, id := range c.ProviderIDs {
		p := c.Providers[id]
		key := "providers." + id
		if !providerID.MatchString(id) {
			bad(key, "bad provider id %q: use letters, digits, '-', '_' or '.'", id)
		}
		if p.BaseURL == "" {
			bad(key+".base_url", "is required")
		} else if !httpURL(p.BaseURL) {
			bad(key+".base_url", "bad URL %q: want http:// or https://", p.BaseURL)
		}
	}

	for _, id := range c.Auth.ProfileIDs {
		p := c.Auth.Profiles[id]
		key := "auth.profiles." + id
		prefix, name, ok := strings.Cut(id, ":")
		if !ok || prefix == "" || name == "" {
			bad(key, "bad profile id %q: want provider:name", id)
		}
		switch {
		case p.Provider == "":
			bad(key+".provider", "is required")
		case !d.hasProvider(p.Provider):
			bad(key+".provider", "unknown provider %q (configured: %s)", p.Provider, d.providerList())
		case ok && prefix != p.Provider:
			bad(key, "profile id %q must start with its provider %q", id, p.Provider+":")
		}
		switch p.Type {
		case failover.ProfileAPIKey, failover.ProfileToken:
		default:
			bad(key+".type", "unknown type %q: want api_key or token", p.Type)
		}
		if _, unset := d.unsetKeys[id]; p.Key == "" && !unset {
			bad(key+".key", "is empty (set it from an environment variable, e.g. key: ${OPENAI_API_KEY})")
		}
	}
	for _, prov := range sortedKeys(c.Auth.Order) {
		key := "auth.order." + prov
		if !d.hasProvider(prov) {
			bad(key, "unknown provider %q (configured: %s)", prov, d.providerList())
			continue
		}
		for i, id := range c.Auth.Order[prov] {
			k := fmt.Sprintf("%s[%d]", key, i)
			p, ok := c.Auth.Profiles[id]
			switch {
			case !ok:
				bad(k, "unknown profile %q", id)
			case p.Provider != prov:
				bad(k, "profile %q belongs to provider %q, not %q", id, p.Provider, prov)
			}
		}
	}
	cd := c.Auth.Cooldowns
	if cd.BillingMax < cd.BillingBackoff {
		bad("auth.cooldowns.billing_max_hours", "must be at least billing_backoff_hours")
	}
	if cd.AuthPermanentMax < cd.AuthPermanentBackoff {
		bad("auth.cooldowns.auth_permanent_max_minutes", "must be at least auth_permanent_backoff_minutes")
	}

	df := c.Agents.Defaults
	if df.Model.Primary == "" {
		bad("agents.defaults.model.primary", "is required (a provider/model reference)")
	} else {
		d.checkRef("agents.defaults.model.primary", df.Model.Primary, line)
	}
	for i, r := range df.Model.Fallbacks {
		d.checkRef(fmt.Sprintf("agents.defaults.model.fallbacks[%d]", i), r, line)
	}
	if df.Timeouts.Idle <= 0 {
		bad("agents.defaults.timeouts.idle_seconds", "must be positive")
	}
	if df.Timeouts.Attempt <= 0 {
		bad("agents.defaults.timeouts.attempt_seconds", "must be positive")
	}
	if df.Timeouts.Run < df.Timeouts.Attempt {
		bad("agents.defaults.timeouts.run_seconds", "must be at least attempt_seconds")
	}
	if f := df.Failover; f.MaxParsedWait < f.MinParsedWait {
		bad("agents.defaults.failover.max_parsed_wait", "must be at least min_parsed_wait")
	}
	ids := map[string]bool{}
	for i, a := range c.Agents.List {
		key := fmt.Sprintf("agents.list[%d]", i)
		if a.ID == "" {
			bad(key+".id", "is required")
		} else if ids[a.ID] {
			bad(key+".id", "duplicate agent id %q", a.ID)
		}
		ids[a.ID] = true
		if a.Model != "" {
			d.checkRef(key+".model", a.Model, line)
		}
		if a.Fallbacks != nil {
			for j, r := range *a.Fallbacks {
				d.checkRef(fmt.Sprintf("%s.fallbacks[%d]", key, j), r, line)
			}
		}
	}
	for _, r := range sortedKeys(c.Models) {
		d.checkRef("models."+string(r), r, line)
	}
	d.checkChoices(bad)
	d.leaveOutUnsetKeys()
	d.checkReach(line)

	switch c.Notices.Users {
	case "all", "direct_only", "off":
	default:
		bad("notices.users", "bad value %q: want all, direct_only or off", c.Notices.Users)
	}
	if ch := c.Admin.Channel; ch != "" && ch != "console" && !channelID.MatchString(ch) {
		bad("admin.channel", "bad channel %q: want console, slack:<channel id> or discord:<channel id>", ch)
	}
	for i, u := range c.Admin.Users {
		if !channelID.MatchString(u) {
			bad(fmt.Sprintf("admin.users[%d]", i), "bad user %q: want slack:<user id> or discord:<user id> (console users are always admins)", u)
		}
	}
	for i, u := range c.Access.Users {
		if !accessUser.MatchString(u) {
			bad(fmt.Sprintf("access.users[%d]", i), "bad user %q: want slack:<user id>, discord:<user id> or console:<name>", u)
		}
	}
	for i, ch := range c.Access.Channels {
		if !accessChannel.MatchString(ch) {
			bad(fmt.Sprintf("access.channels[%d]", i), "bad channel %q: want a channel name (slack, discord, console) or a session-key prefix such as slack:T0123:C0456", ch)
		}
	}
	if l := c.Server.Listen; l != "" {
		if _, port, err := net.SplitHostPort(l); err != nil || port == "" {
			bad("server.listen", "bad address %q: want host:port, for example 127.0.0.1:9464", l)
		}
	}
}

var (
	accessUser    = regexp.MustCompile(`^(slack|discord|console):[^\s:]+$`)
	accessChannel = regexp.MustCompile(`^(slack|discord|console)(:[^\s]+)?$`)
)

func (d *decoder) checkRef(key string, r failover.ModelRef, line func(string) int) {
	prov, model := r.Split()
	if prov == "" || model == "" {
		d.errAt(line(key), key, "bad model %q: want provider/model, e.g. openai/gpt-4o-mini", r)
		return
	}
	if !d.hasProvider(prov) {
		d.errAt(line(key), key, "model %q uses provider %q, which is not configured under providers (configured: %s)", r, prov, d.providerList())
	}
}

func (d *decoder) hasProvider(id string) bool {
	_, ok := d.cfg.Providers[id]
	return ok
}

func (d *decoder) providerList() string {
	if len(d.cfg.ProviderIDs) == 0 {
		return "none"
	}
	return strings.Join(d.cfg.ProviderIDs, ", ")
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// expand replaces ${VAR} and ${VAR:-default} in s; "$${" stands for a literal "${".
// It returns the names of unset variables (without a default) in missing.
func expand(s string, getenv func(string) (string, bool)) (out string, missing []string, err error) {
	if !strings.Contains(s, "${") {
		return s, nil, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", nil, fmt.Errorf("unterminated ${ in value")
		}
		expr := s[i+2 : i+end]
		i += end + 1
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validEnvName(name) {
			return "", nil, fmt.Errorf("bad variable reference ${%s}: want ${NAME} or ${NAME:-default}", truncate(expr, 40))
		}
		v, ok := getenv(name)
		switch {
		case ok && (v != "" || !hasDef):
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			missing = append(missing, name)
		}
	}
	return b.String(), missing, nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (i > 0 && r >= '0' && r <= '9') {
			continue
		}
		return false
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// postgresKeyword is the start of a keyword/value connection string ("host=...").
var postgresKeyword = regexp.MustCompile(`^\s*[A-Za-z_]+\s*=`)

// postgresDSNProblem says what is wrong with the shape of a Postgres DSN, "" when
// nothing is. It never quotes the DSN, which may hold a password; the driver
// checks the rest when the bot connects.
func postgresDSNProblem(dsn string) string {
	switch {
	case strings.TrimSpace(dsn) == "":
		return "must name the Postgres database"
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		u, err := url.Parse(dsn)
		if err != nil {
			return "does not parse as a URL"
		}
		if u.Hostname() == "" && u.Query().Get("host") == "" {
			return "names no host"
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return "has a bad port"
			}
		}
		return ""
	case strings.Contains(dsn, "://"):
		return "is a URL of another scheme than postgres://"
	case !postgresKeyword.MatchString(dsn):
		return "is neither a postgres:// URL nor a keyword=value string"
	}
	return ""
}
