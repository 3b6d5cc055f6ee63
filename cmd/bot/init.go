package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/detourbot/detour"
)

// provider is a preset bot init knows: where it answers, a small model to
// start with, and the variable its key goes in.
type provider struct {
	name, baseURL, model, keyVar string
}

var presets = []provider{
	{"openai", "https://api.openai.com/v1", "gpt-4o-mini", "OPENAI_API_KEY"},
	{"anthropic", "https://api.anthropic.com/v1/", "claude-haiku-4-5", "ANTHROPIC_API_KEY"},
	{"openrouter", "https://openrouter.ai/api/v1", "meta-llama/llama-3-70b", "OPENROUTER_API_KEY"},
	{"ollama", "http://127.0.0.1:11434/v1", "llama3.2", ""}, // a local server needs no key
}

// initPlan is what bot init writes: providers in chain order (the first
// answers, the others' models are the fallbacks), channels, and secrets.
type initPlan struct {
	providers []provider
	models    []string // provider/model, primary first
	channels  []string // console, slack, discord
	secrets   [][2]string
}

// repeated is a flag that may be given several times, or once with commas.
type repeated []string

func (r *repeated) String() string { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*r = append(*r, s)
		}
	}
	return nil
}

// runInit is `bot init`: it asks for the providers, their keys and the
// channels (or takes them from flags with --non-interactive), writes
// config.yaml, the env file with the secrets (0600; the configuration refers to
// them as ${VAR}) and, for Slack, the app manifest, then runs bot check on the
// result. It never overwrites a file without --force (F9).
func runInit(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	nonInteractive := fs.Bool("non-interactive", false, "ask nothing: take everything from the flags, and keys from the environment variables --key-env names")
	var provs, models, keyEnvs, chans repeated
	fs.Var(&provs, "provider", "a provider: openai, anthropic, openrouter, ollama, or name=https://host/v1 for any OpenAI-compatible one; repeat it (or use commas) for fallbacks, the first answers first")
	fs.Var(&models, "model", "a model as provider/model; the first is the primary, the others the fallbacks in order (default: one model of each provider)")
	fs.Var(&keyEnvs, "key-env", "the variable that holds a provider's key, provider=VAR (default OPENAI_API_KEY, ANTHROPIC_API_KEY, ...); with --non-interactive its value is read from the environment")
	fs.Var(&chans, "channel", "console, slack or discord; repeat it or use commas (default console)")
	cfgPath := fs.String("config", "config.yaml", "the configuration to write")
	envPath := fs.String("env-file", defaultEnvFile, "the env file to write the secrets to (mode 0600)")
	force := fs.Bool("force", false, "overwrite files that exist")
	noCheck := fs.Bool("no-check", false, "do not run bot check on the result")
	setUsage(fs, "Usage: bot init [--non-interactive] [--provider NAME]... [--model PROVIDER/MODEL]... [--key-env PROVIDER=VAR]... [--channel NAME]... [--config PATH] [--env-file PATH] [--force]\n")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	manifest := filepath.Join(filepath.Dir(*cfgPath), "slack-manifest.yaml")
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "bot init: "+format+"; nothing was written\n", a...)
		return exitUsage
	}

	q := &asker{in: bufio.NewReader(stdin), out: stdout, file: fileOf(stdin)}
	if !*nonInteractive {
		fmt.Fprintf(stdout, "detour init: writes %s, %s (your keys, mode 0600) and, for Slack, %s.\n", *cfgPath, *envPath, manifest)
		var err error
		if len(provs) == 0 {
			provs, err = q.list("Providers (openai, anthropic, openrouter, ollama, or name=https://host/v1), the first answers first", "openai")
		}
		if err == nil && len(chans) == 0 {
			chans, err = q.list("Channels (console, slack, discord)", "console")
		}
		if err != nil {
			return fail("%v", err)
		}
	}
	if len(provs) == 0 {
		provs = repeated{"openai"}
	}
	if len(chans) == 0 {
		chans = repeated{"console"}
	}
	plan, err := planInit(provs, models, keyEnvs, chans)
	if err != nil {
		return fail("%v", err)
	}
	targets := []string{*cfgPath, *envPath}
	if slices.Contains(plan.channels, "slack") {
		targets = append(targets, manifest)
	}
	for _, p := range targets {
		// Lstat: a link, dangling or not, is refused, never followed (H1).
		exists, err := initTarget(p)
		if err != nil {
			return fail("%v", err)
		}
		if exists && !*force {
			return fail("%s exists (bot init --force overwrites it)", p)
		}
	}
	// Models and secrets: asked, or from the environment.
	if err := plan.fill(q, !*nonInteractive); err != nil {
		return fail("%v", err)
	}
	if err := writeInit(plan, *cfgPath, *envPath, manifest); err != nil {
		fmt.Fprintf(stderr, "bot init: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "wrote %s\nwrote %s (mode 0600: it holds the keys; keep it out of version control)\n", *cfgPath, *envPath)
	if slices.Contains(plan.channels, "slack") {
		fmt.Fprintf(stdout, "wrote %s (create the Slack app from it: docs/slack.md)\n", manifest)
	}
	for _, s := range plan.secrets {
		if s[1] == "" {
			fmt.Fprintf(stdout, "to do: put %s=... in %s\n", s[0], *envPath)
		}
	}
	start := "bot"
	if *cfgPath != "config.yaml" || *envPath != defaultEnvFile {
		start = fmt.Sprintf("bot --config %s --env-file %s", *cfgPath, *envPath)
	}
	if *noCheck {
		fmt.Fprintf(stdout, "next: bot check, then %s\n", start)
		return exitOK
	}
	fmt.Fprintln(stdout, "checking it (bot check):")
	code := runCheck(ctx, []string{"--config", *cfgPath, "--env-file", *envPath}, nil, stdout, stderr)
	if code == exitOK {
		fmt.Fprintf(stdout, "next: start it with %s (bot check --probe tries every model and key first)\n", start)
	}
	return code
}

// planInit turns the answers into a plan, or says what is wrong with them.
func planInit(provs, models, keyEnvs, chans []string) (*initPlan, error) {
	p := &initPlan{}
	for _, spec := range provs {
		if err := oneLine("--provider", spec, true); err != nil {
			return nil, err
		}
		name, url, custom := strings.Cut(spec, "=")
		name = strings.TrimSpace(name)
		var pr provider
		if custom {
			pr = provider{name: name, baseURL: strings.TrimSpace(url), keyVar: strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_API_KEY"}
		} else {
			i := slices.IndexFunc(presets, func(x provider) bool { return x.name == name })
			if i < 0 {
				return nil, fmt.Errorf("unknown provider %q: want openai, anthropic, openrouter, ollama, or name=https://host/v1", name)
			}
			pr = presets[i]
		}
		if slices.ContainsFunc(p.providers, func(x provider) bool { return x.name == pr.name }) {
			return nil, fmt.Errorf("provider %s is named twice", pr.name)
		}
		p.providers = append(p.providers, pr)
	}
	for _, kv := range keyEnvs {
		name, v, ok := strings.Cut(kv, "=")
		if !ok && len(p.providers) == 1 {
			name, v, ok = p.providers[0].name, kv, true
		}
		i := slices.IndexFunc(p.providers, func(x provider) bool { return x.name == name })
		if !ok || i < 0 || !validVar(v) {
			return nil, fmt.Errorf("bad --key-env %q: want provider=VARIABLE for one of the providers", kv)
		}
		p.providers[i].keyVar = v
	}
	for _, m := range models {
		if err := oneLine("--model", m, true); err != nil {
			return nil, err
		}
		prov, _, _ := strings.Cut(m, "/")
		if !strings.Contains(m, "/") || !slices.ContainsFunc(p.providers, func(x provider) bool { return x.name == prov }) {
			return nil, fmt.Errorf("bad --model %q: want provider/model for one of the providers", m)
		}
	}
	p.models = append(p.models, models...)
	for _, c := range chans {
		if !slices.Contains([]string{"console", "slack", "discord"}, c) {
			return nil, fmt.Errorf("unknown channel %q: want console, slack or discord", c)
		}
		if !slices.Contains(p.channels, c) {
			p.channels = append(p.channels, c)
		}
	}
	return p, nil
}

// controlIn names the first control character of s (C0, DEL), or "" when it
// has none. A value bot init writes is one line of a file: a line break in
// it would add lines to the env file or the configuration (H1).
func controlIn(s string) string {
	for _, r := range s {
		switch {
		case r == '\n':
			return "a line break (\\n)"
		case r == '\r':
			return "a carriage return (\\r)"
		case r == 0:
			return "a NUL byte"
		case r < 0x20 || r == 0x7f:
			return fmt.Sprintf("a control character (U+%04X)", r)
		}
	}
	return ""
}

// oneLine refuses a value with a control character, naming the field it is
// in; quote shows the value too (never for a secret).
func oneLine(field, v string, quote bool) error {
	c := controlIn(v)
	if c == "" {
		return nil
	}
	if quote {
		return fmt.Errorf("%s %q holds %s: a value must be one line without control characters", field, v, c)
	}
	return fmt.Errorf("%s holds %s: a value must be one line without control characters", field, c)
}

func validVar(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	return strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == ""
}

// fill completes the models and collects the secrets: asked for when ask,
// else read from the environment (left empty, to fill in later, when unset).
func (p *initPlan) fill(q *asker, ask bool) error {
	if len(p.models) == 0 {
		for _, pr := range p.providers {
			m := pr.model
			if ask || m == "" {
				var err error
				if m, err = q.line("Model of "+pr.name, m); err != nil {
					return err
				}
			}
			if m == "" {
				return fmt.Errorf("provider %s needs a model (--model %s/<model>)", pr.name, pr.name)
			}
			if err := oneLine("the model of "+pr.name, m, true); err != nil {
				return err
			}
			p.models = append(p.models, pr.name+"/"+strings.TrimPrefix(m, pr.name+"/"))
		}
	}
	secret := func(v, what string) error {
		val, ok := os.LookupEnv(v)
		if ask {
			var err error
			if val, err = q.secret(fmt.Sprintf("%s (stored in the env file as %s; Enter to fill it in later)", what, v)); err != nil {
				return err
			}
		} else if !ok {
			val = ""
		}
		val = strings.TrimSpace(val)
		// Never written, never shown: a value with a line break would add
		// lines to the env file (H1).
		if err := oneLine("the value of "+v, val, false); err != nil {
			return err
		}
		p.secrets = append(p.secrets, [2]string{v, val})
		return nil
	}
	for _, pr := range p.providers {
		if pr.keyVar == "" {
			continue
		}
		if err := secret(pr.keyVar, "API key of "+pr.name); err != nil {
			return err
		}
	}
	if slices.Contains(p.channels, "slack") {
		if err := secret("SLACK_APP_TOKEN", "Slack app-level token (xapp-...)"); err != nil {
			return err
		}
		if err := secret("SLACK_BOT_TOKEN", "Slack bot token (xoxb-...)"); err != nil {
			return err
		}
	}
	if slices.Contains(p.channels, "discord") {
		if err := secret("DISCORD_BOT_TOKEN", "Discord bot token"); err != nil {
			return err
		}
	}
	return nil
}

// secret is the value given for variable v ("" when none was).
func (p *initPlan) secret(v string) string {
	for _, s := range p.secrets {
		if s[0] == v {
			return s[1]
		}
	}
	return ""
}

// yaml is the configuration the plan makes. Every secret is a ${VAR}
// reference; no value is in it.
func (p *initPlan) yaml(envPath string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by bot init. Every key is documented in config.example.yaml.\n")
	fmt.Fprintf(&b, "# Keys and tokens are in %s (KEY=value lines, mode 0600), never in this file:\n", envPath)
	fmt.Fprintf(&b, "# bot reads ./detour.env by itself (or --env-file), systemd as EnvironmentFile=, docker as --env-file.\n")
	b.WriteString("storage: {driver: sqlite, dsn: detour.db}\nchannels:\n")
	on := func(c string) bool { return slices.Contains(p.channels, c) }
	fmt.Fprintf(&b, "  console: {enabled: %t, format: text}\n", on("console"))
	if on("slack") {
		b.WriteString("  slack: {enabled: true, app_token: \"${SLACK_APP_TOKEN}\", bot_token: \"${SLACK_BOT_TOKEN}\"}\n")
	}
	if on("discord") {
		b.WriteString("  discord: {enabled: true, token: \"${DISCORD_BOT_TOKEN}\"}\n")
	}
	b.WriteString("providers:\n")
	for _, pr := range p.providers {
		fmt.Fprintf(&b, "  %s: {base_url: %q}\n", pr.name, pr.baseURL)
	}
	keyed := slices.ContainsFunc(p.providers, func(x provider) bool { return x.keyVar != "" })
	if keyed {
		b.WriteString("auth:\n  profiles:\n")
		for _, pr := range p.providers {
			if pr.keyVar == "" {
				continue
			}
			// A key left to fill in later makes its profile optional (F11):
			// the bot runs without it until the env file has the key.
			if p.secret(pr.keyVar) == "" {
				fmt.Fprintf(&b, "    %s:main: {provider: %s, key: \"${%s}\", optional: true}   # no key yet: set %s in %s\n", pr.name, pr.name, pr.keyVar, pr.keyVar, envPath)
				continue
			}
			fmt.Fprintf(&b, "    %s:main: {provider: %s, key: \"${%s}\"}\n", pr.name, pr.name, pr.keyVar)
		}
	}
	b.WriteString("agents:\n  defaults:\n    model:\n")
	fmt.Fprintf(&b, "      primary: %s\n", p.models[0])
	if len(p.models) > 1 {
		fmt.Fprintf(&b, "      fallbacks: [%s]\n", strings.Join(p.models[1:], ", "))
	}
	b.WriteString("admin:\n  users: []      # who may run /recover and set a channel's model: slack:U0123, discord:456\n")
	return b.String()
}

// writeInit writes the files, each through writeFileAtomic: the env file
// first, created 0600, so a key is never readable by others, not even for a
// moment, and never lands in a file that existed before (H1). On a failure
// the error says which files were written and which were not.
func writeInit(p *initPlan, cfgPath, envPath, manifest string) error {
	var env strings.Builder
	env.WriteString("# detour's secrets: KEY=value lines, read by bot, systemd (EnvironmentFile=) and docker (--env-file).\n")
	env.WriteString("# Mode 0600; keep it out of version control.\n")
	for _, s := range p.secrets {
		fmt.Fprintf(&env, "%s=%s\n", s[0], s[1])
	}
	type file struct {
		path string
		data []byte
		perm os.FileMode
	}
	files := []file{{envPath, []byte(env.String()), 0o600}, {cfgPath, []byte(p.yaml(envPath)), 0o644}}
	if slices.Contains(p.channels, "slack") {
		files = append(files, file{manifest, detour.SlackManifest, 0o644})
	}
	for i, f := range files {
		if err := writeFileAtomic(f.path, f.data, f.perm); err != nil {
			var done, left []string
			for j, g := range files {
				if j < i {
					done = append(done, g.path)
				} else {
					left = append(left, g.path)
				}
			}
			msg := fmt.Sprintf("%v; not written: %s", err, strings.Join(left, ", "))
			if len(done) > 0 {
				msg += "; written: " + strings.Join(done, ", ")
			}
			return errors.New(msg)
		}
	}
	return nil
}

// initTarget says whether a file bot init is to write exists. A symbolic
// link (dangling or not) or anything but a regular file is an error naming
// it: bot init writes no file through a link (H1).
func initTarget(path string) (bool, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case fi.Mode()&fs.ModeSymlink != 0:
		return true, fmt.Errorf("%s is a symbolic link: bot init does not write through links (remove it, or choose another path)", path)
	case !fi.Mode().IsRegular():
		return true, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	return true, nil
}

// renameFile is os.Rename; the tests make it fail.
var renameFile = os.Rename

// writeFileAtomic is the one way bot init writes a file: data goes to a new
// temporary file in the same folder (O_CREATE|O_EXCL, mode perm from its
// creation), is synced, and is renamed over path. path is therefore either
// what it was or the whole new file, an existing file is replaced (its
// mode, owner and other links keep nothing of the new contents) and never
// written to, and a link at path is refused (initTarget). On a failure the
// temporary file is removed.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	if _, err := initTarget(path); err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	var f *os.File
	for try := 0; ; try++ {
		var rnd [8]byte
		_, _ = rand.Read(rnd[:])
		f, err = os.OpenFile(filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(rnd[:])), os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || try == 10 {
			return fmt.Errorf("%s: creating a temporary file beside it: %w", path, err)
		}
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("%s: writing %s: %w", path, tmp, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("%s: syncing %s: %w", path, tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("%s: closing %s: %w", path, tmp, err)
	}
	if err = renameFile(tmp, path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if d, derr := os.Open(dir); derr == nil { // the rename itself survives a crash
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// asker asks questions on a terminal or reads the answers from a pipe.
type asker struct {
	in   *bufio.Reader
	out  io.Writer
	file *os.File // stdin when it is a file or terminal, to hide typed keys
}

func fileOf(r io.Reader) *os.File {
	f, _ := r.(*os.File)
	return f
}

var errEOF = errors.New("input ended before every question was answered")

func (q *asker) read() (string, error) {
	s, err := q.in.ReadString('\n')
	if err != nil && (s == "" || !errors.Is(err, io.EOF)) {
		return "", errEOF
	}
	return strings.TrimSpace(s), nil
}

// line asks one question; Enter takes def.
func (q *asker) line(prompt, def string) (string, error) {
	if def != "" {
		prompt += " [" + def + "]"
	}
	fmt.Fprint(q.out, prompt+": ")
	s, err := q.read()
	if err != nil {
		return "", err
	}
	if s == "" {
		s = def
	}
	return s, nil
}

// list asks for a comma-separated list.
func (q *asker) list(prompt, def string) ([]string, error) {
	s, err := q.line(prompt, def)
	if err != nil {
		return nil, err
	}
	var r repeated
	_ = r.Set(s)
	return r, nil
}

// secret asks for a key without showing it where the terminal allows.
func (q *asker) secret(prompt string) (string, error) {
	if q.file == nil || !isTerminal(q.file) {
		fmt.Fprint(q.out, prompt+": ")
		return q.read()
	}
	fmt.Fprint(q.out, prompt+": ")
	s, hidden, err := withoutEcho(q.file, q.read)
	if hidden {
		fmt.Fprintln(q.out) // the Enter was not echoed either
	}
	return s, err
}
