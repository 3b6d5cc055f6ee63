package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/detourbot/detour/config"
)

// loadForStorage loads the configuration as run does (--config PATH, else
// ./config.yaml, else the embedded demo; --env-file, else ./detour.env) for a
// command that only reads the database (bot history). A ${VAR} set neither in
// the environment nor in the env file stands in as a placeholder, so an API
// key or a channel token the command never uses need not be there (issue 36:
// `bot history --config` demanded every key); the storage settings must
// resolve, and a storage.dsn that needs an unset variable is named as the
// problem. On failure it has said why, after what, and returns the exit code.
func loadForStorage(what, path, envFile string, stderr io.Writer) (*config.Config, int) {
	src, err := resolveConfig(path)
	if err == nil && !src.demo {
		err = src.withEnvFile(envFile, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", what, err)
		return nil, exitUsage
	}
	if src.demo {
		src.baseURL = "http://127.0.0.1:0" // the demo's models point nowhere: nothing is called
		cfg, err := src.load()
		if err != nil {
			printConfigError(stderr, err)
			return nil, exitUsage
		}
		return cfg, exitOK
	}
	data, err := os.ReadFile(src.path)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", what, err)
		return nil, exitUsage
	}
	file := map[string]string{}
	if src.envFile != "" {
		if file, err = config.ReadEnvFile(src.envFile); err != nil {
			printConfigError(stderr, err)
			return nil, exitUsage
		}
	}
	look := newStandIns(data, func(k string) (string, bool) {
		if v, ok := os.LookupEnv(k); ok {
			return v, true // the environment wins over the file, as in bot run
		}
		v, ok := file[k]
		return v, ok
	})
	cfg, err := config.Parse(src.path, data, look.getenv)
	if err != nil {
		printConfigError(stderr, err)
		return nil, exitUsage
	}
	if unset := look.in(cfg.Storage.DSN); len(unset) > 0 {
		where := "the environment"
		if src.envFile != "" {
			where += " or " + src.envFile
		}
		fmt.Fprintf(stderr, "%s: storage.dsn needs %s, which is not set in %s\n", what, strings.Join(unset, ", "), where)
		return nil, exitUsage
	}
	return cfg, exitOK
}

// standIns resolves ${VAR} references, giving each variable that is not set a
// placeholder of its own (never a value anyone could mistake for a secret).
type standIns struct {
	lookup   func(string) (string, bool)
	part     map[string]bool // variables used inside a value ("https://${X}/v1")
	defaults map[string]bool // variables every reference of which has a default
	storage  map[string]bool // variables of storage.dsn: never stood in for
	token    map[string]string
}

// standIn is the word a placeholder is made of: letters and digits, so that it
// fits in a URL's host, user, password or path alike.
const standIn = "detourunset"

var standInWord = regexp.MustCompile(standIn + `[0-9]+x`)

func newStandIns(data []byte, lookup func(string) (string, bool)) *standIns {
	return &standIns{lookup: lookup, part: config.PartRefs(data), storage: config.DSNRefs(data), defaults: config.DefaultedRefs(data), token: map[string]string{}}
}

// getenv is config.Parse's lookup: the value when set and not empty; else the
// default the file gives (${X:-default}); else, for a variable of storage.dsn,
// unset (the configuration's own error names it); else a placeholder.
func (s *standIns) getenv(k string) (string, bool) {
	// An empty value is unset too (bot init writes "KEY=" for a key to fill in
	// later), except in storage.dsn, where it may be meant.
	if v, ok := s.lookup(k); ok && (v != "" || s.storage[k]) {
		return v, true
	}
	if s.defaults[k] || s.storage[k] {
		return "", false // the default applies, or config names the unset variable of storage.dsn
	}
	tok, ok := s.token[k]
	if !ok {
		tok = fmt.Sprintf("%s%dx", standIn, len(s.token))
		s.token[k] = tok
	}
	if s.part[k] {
		return tok, true
	}
	return "http://" + tok + ".invalid/", true // a whole value: a base URL must still parse
}

// in names the unset variables whose placeholders are in v.
func (s *standIns) in(v string) []string {
	var names []string
	for _, tok := range standInWord.FindAllString(v, -1) {
		for name, t := range s.token {
			if t == tok && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	sort.Strings(names)
	return names
}
