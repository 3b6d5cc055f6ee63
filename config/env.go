// The ${ENV} references of a configuration file: kept out of the YAML parser
// as placeholders, then expanded from the environment where they stood.

package config

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// envRef matches a ${NAME} or ${NAME:-default} reference (and its $${ escape).
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
