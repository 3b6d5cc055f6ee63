// The env file: KEY=value lines that hold the secrets a configuration refers
// to as ${KEY}, in the one format systemd (EnvironmentFile=) and docker
// (--env-file) read too, so one file serves the bot, the unit and the container.

package config

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
)

// ReadEnvFile reads KEY=value lines: blank lines and lines starting with # are
// skipped, an "export " prefix is allowed, spaces around the '=' are dropped (a
// key never starts with one), and a value in matching quotes loses them. A
// malformed line, and a value whose quote is never closed (its quote would
// become part of the key, refused later as an invalid key), is an *Error naming
// the file and the line, never the value. A UTF-8 byte order mark, which some
// editors write, is skipped.
func ReadEnvFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: env file: %w", err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		k = strings.TrimSpace(k)
		if !ok || !validEnvName(k) {
			return nil, &Error{File: path, Line: n, Msg: "want KEY=value (a variable name, '=', then the value)"}
		}
		v = strings.TrimLeft(v, " \t")
		if v != "" && (v[0] == '"' || v[0] == '\'') {
			if len(v) < 2 || v[len(v)-1] != v[0] {
				return nil, &Error{File: path, Line: n, Msg: fmt.Sprintf("the value of %s opens a quote (%c) that the line does not close: close it, or write the value without quotes", k, v[0])}
			}
			v = v[1 : len(v)-1]
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("config: env file %s: %w", path, err)
	}
	return out, nil
}

// LoadWith reads and parses the configuration file at path, resolving ${VAR}
// references with getenv.
func LoadWith(path string, getenv func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data, getenv)
}
