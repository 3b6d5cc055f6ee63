package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// `bot help` names every flag of the commands it spells out (those it shows
// with "..." send people to `bot <command> --help`), so the overview is never
// missing a flag the docs use.
func TestUsage_ListsEveryFlag(t *testing.T) {
	var top bytes.Buffer
	usage(&top)
	flagName := regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`)
	for _, cmd := range []string{"run", "init", "check", "history", "status", "version"} {
		head := "  bot " + cmd
		if cmd == "run" {
			head = "  bot [run]"
		}
		_, section, ok := strings.Cut(top.String(), head)
		if !ok {
			t.Errorf("bot help does not show %q", head)
			continue
		}
		if end := strings.Index(section, "\n  bot "); end >= 0 {
			section = section[:end]
		}
		var help bytes.Buffer
		if code := dispatch(context.Background(), []string{cmd, "--help"}, nil, &help, io.Discard); code != exitOK {
			t.Errorf("bot %s --help: exit %d", cmd, code)
		}
		for _, m := range flagName.FindAllStringSubmatch(help.String(), -1) {
			if !strings.Contains(section, "[--"+m[1]) {
				t.Errorf("bot help shows bot %s without --%s:\n%s", cmd, m[1], section)
			}
		}
	}
}

// `bot version` takes no argument: --help is its usage, anything else a usage
// error, as for every command.
func TestCLI_VersionArguments(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"version", "--help"}, nil, &stdout, &stderr); code != exitOK || !strings.HasPrefix(stdout.String(), "Usage: bot version") {
		t.Errorf("version --help: exit %d, %q", code, stdout.String())
	}
	for _, args := range [][]string{{"version", "--bogus"}, {"version", "extra"}} {
		stdout.Reset()
		stderr.Reset()
		if code := dispatch(context.Background(), args, nil, &stdout, &stderr); code != exitUsage || stdout.Len() != 0 || !strings.HasPrefix(stderr.String(), "bot version: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
}

// The README's list of subcommands, the code map's line for cmd/bot and
// `bot help` name every command the binary has.
func TestUsage_EveryCommandDocumented(t *testing.T) {
	r := readme(t)
	_, list, _ := strings.Cut(r, "Subcommands: ")
	list, _, _ = strings.Cut(list, "\n\n")
	_, codeMap, _ := strings.Cut(r, "| `cmd/bot` |")
	codeMap, _, _ = strings.Cut(codeMap, "\n")
	var top bytes.Buffer
	usage(&top)
	for name := range commands {
		if !strings.Contains(list, "`"+name+"`") {
			t.Errorf("the README's Subcommands do not name %s:\n%s", name, list)
		}
		if !strings.Contains(codeMap, "`"+name+"`") {
			t.Errorf("the README's code map does not name %s for cmd/bot:\n%s", name, codeMap)
		}
		if !strings.Contains(top.String(), "  bot "+name) && name != "run" {
			t.Errorf("bot help does not show bot %s", name)
		}
	}
}

// docs/operations.md shows `bot version` as it prints.
func TestVersion_AsInTheOperationsDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	v := buildInfo{Version: "v1.2.3", Revision: "0123456789ab", Time: "2026-03-01T12:00:00Z", Go: "go1.26.0"}.String()
	v = strings.Replace(v, runtime.GOOS+"/"+runtime.GOARCH, "linux/amd64", 1)
	if want := "./bot version" + strings.Repeat(" ", 33) + "# detour " + v + "\n"; !strings.Contains(string(b), want) {
		t.Errorf("docs/operations.md does not show bot version as it prints:\n%s", want)
	}
}

// Flags typed before the command (bot --config c.yaml check) are refused
// with the command line that works.
func TestCLI_FlagsBeforeTheCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), []string{"--config", "c.yaml", "status", "--json"}, strings.NewReader(""), &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "bot: the command comes first, then its flags: bot status --config c.yaml --json\n") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr.String())
	}
}

// A command with a usage line of its own (bot drill, bot init, bot classify,
// bot version) names every flag in it, above the flags' list.
func TestUsage_OwnLineListsEveryFlag(t *testing.T) {
	flagName := regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`)
	for _, cmd := range []string{"drill", "init", "classify", "version"} {
		var help bytes.Buffer
		dispatch(context.Background(), []string{cmd, "--help"}, nil, &help, io.Discard)
		line, _, _ := strings.Cut(help.String(), "\n  -")
		if !strings.HasPrefix(line, "Usage: bot "+cmd) {
			t.Errorf("bot %s --help starts with %q", cmd, line)
			continue
		}
		for _, m := range flagName.FindAllStringSubmatch(help.String(), -1) {
			if !strings.Contains(line, "[--"+m[1]) {
				t.Errorf("bot %s's usage line lacks --%s:\n%s", cmd, m[1], line)
			}
		}
	}
}
