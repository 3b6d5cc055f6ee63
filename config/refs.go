package config

import (
	"bytes"
	"regexp"
	"strings"
)

// Scanners of a configuration's text for its ${VAR} references (envRef), for
// the commands that read a configuration with stand-ins for its variables.

// dsnKey finds the line of storage.dsn (dsn: is a key of storage only).
var dsnKey = regexp.MustCompile(`(^|[\s{,])dsn:`)

// DSNRefs names the variables that a configuration's text refers to on the
// line of its storage.dsn (dsn: is a key of storage only).
func DSNRefs(data []byte) map[string]bool {
	out := map[string]bool{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) || !dsnKey.Match(line) {
			continue
		}
		for _, m := range envRef.FindAll(line, -1) {
			if bytes.HasPrefix(m, []byte("$$")) {
				continue
			}
			name, _, _ := strings.Cut(string(m[2:len(m)-1]), ":-")
			out[name] = true
		}
	}
	return out
}

// PartRefs names the variables that a configuration's text refers to only as
// a part of a value ("https://${X}/v1", "sk-${X}"), never as a whole one: a
// reference is whole when it is all of its scalar (key: ${X}, key: "${X}",
// - ${X}, {key: ${X}, ...}, [${X}]). A stand-in for a part must fit inside a
// URL's host or port (bot drill, bot history and bot status read a
// configuration without its secrets).
func PartRefs(data []byte) map[string]bool {
	part, whole := map[string]bool{}, map[string]bool{}
	for _, m := range envRef.FindAllIndex(data, -1) {
		ref := string(data[m[0]:m[1]])
		if strings.HasPrefix(ref, "$$") {
			continue // a literal "${"
		}
		name, _, _ := strings.Cut(ref[2:len(ref)-1], ":-")
		start := bytes.LastIndexByte(data[:m[0]], '\n') + 1
		end := len(data)
		if i := bytes.IndexByte(data[m[1]:], '\n'); i >= 0 {
			end = m[1] + i
		}
		before, after := string(data[start:m[0]]), string(data[m[1]:end])
		if before != "" && (before[len(before)-1] == '"' || before[len(before)-1] == '\'') && strings.HasPrefix(after, before[len(before)-1:]) {
			before, after = before[:len(before)-1], after[1:] // a quoted scalar
		}
		lead := strings.TrimRight(before, " \t")
		opens := lead == "" || strings.HasSuffix(lead, "[") || strings.HasSuffix(lead, "{") || strings.HasSuffix(lead, ",") ||
			(len(lead) < len(before) && (strings.HasSuffix(lead, ":") || strings.HasSuffix(lead, "-")))
		rest := strings.TrimLeft(after, " \t")
		closes := rest == "" || strings.ContainsAny(rest[:1], ",]}") || (len(rest) < len(after) && rest[0] == '#')
		if opens && closes {
			whole[name] = true
		} else {
			part[name] = true
		}
	}
	for v := range whole {
		delete(part, v) // a whole value wants the URL (a base_url of ${VAR})
	}
	return part
}

// DefaultedRefs names the variables every reference of which in a
// configuration's text gives a default (${X:-default}).
func DefaultedRefs(data []byte) map[string]bool {
	with, without := map[string]bool{}, map[string]bool{}
	for _, m := range envRef.FindAll(data, -1) {
		if bytes.HasPrefix(m, []byte("$$")) {
			continue // a literal "${"
		}
		name, _, hasDef := strings.Cut(string(m[2:len(m)-1]), ":-")
		if hasDef {
			with[name] = true
		} else {
			without[name] = true
		}
	}
	for name := range without {
		delete(with, name)
	}
	return with
}
