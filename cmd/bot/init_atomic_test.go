package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests of this file run bot init in the test process (runInit, with
// --no-check: no provider is called) in a folder of their own.

// initIn runs `bot init --non-interactive --no-check` for one provider p1
// whose key is P1_KEY, writing into dir; stdin answers questions when
// --non-interactive is dropped from the arguments (interactive).
func initIn(t *testing.T, dir, stdin string, interactive bool, extra ...string) (string, string, int) {
	t.Helper()
	args := []string{"--no-check", "--provider", "p1=http://127.0.0.1:9/v1", "--key-env", "p1=P1_KEY", "--channel", "console",
		"--config", filepath.Join(dir, "config.yaml"), "--env-file", filepath.Join(dir, "detour.env")}
	if !interactive {
		args = append(args, "--non-interactive", "--model", "p1/m1")
	}
	var out, errOut bytes.Buffer
	code := runInit(context.Background(), append(args, extra...), strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

// leftovers lists the files of dir that init's temporary files would be.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var tmp []string
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			tmp = append(tmp, e.Name())
		}
	}
	return tmp
}

// covers H1 (issue 37): `bot init --force` over a detour.env that is
// world-readable (another user's 0666 file in a shared folder; here one of
// ours, with a second link to it standing for what the other user keeps)
// never writes the keys into that file: a new 0600 file is renamed over it,
// so the old file, through every link it has, keeps its old contents.
func TestInit_H1_ForceReplacesAWorldReadableEnvFileInsteadOfWritingIntoIt(t *testing.T) {
	const key = "sk-CANARY-h1-force-0001"
	t.Setenv("P1_KEY", key)
	dir := t.TempDir()
	env := filepath.Join(dir, "detour.env")
	if err := os.WriteFile(env, []byte("OLD=1\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(env, 0o666); err != nil { // past the umask
		t.Fatal(err)
	}
	theirs := filepath.Join(dir, "their-link-to-detour.env")
	if err := os.Link(env, theirs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("# old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := initIn(t, dir, "", false, "--force")
	if code != exitOK {
		t.Fatalf("init --force: exit %d\n%s\n%s", code, out, errOut)
	}
	got, _ := os.ReadFile(env)
	if !strings.Contains(string(got), "P1_KEY="+key+"\n") {
		t.Errorf("detour.env:\n%s", got)
	}
	fi, err := os.Lstat(env)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("detour.env mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	old, _ := os.ReadFile(theirs)
	if string(old) != "OLD=1\n" {
		t.Errorf("the old 0666 file received the keys (its other link reads %q)", old)
	}
	if ti, err := os.Stat(theirs); err == nil && os.SameFile(fi, ti) {
		t.Error("detour.env is still the old 0666 file: it was written into, not replaced")
	}
	if cfg, _ := os.ReadFile(filepath.Join(dir, "config.yaml")); !strings.Contains(string(cfg), `key: "${P1_KEY}"`) {
		t.Errorf("config.yaml was not replaced:\n%s", cfg)
	}
	if tmp := leftovers(t, dir); len(tmp) != 0 {
		t.Errorf("temporary files left behind: %v", tmp)
	}
}

// covers H1 (issue 37): a file bot init is to write that is a symbolic link,
// dangling or not, with or without --force, is refused with an error naming
// it; nothing is written, least of all where the link points.
func TestInit_H1_SymlinkTargetsAreRefusedNeverFollowed(t *testing.T) {
	const key = "sk-CANARY-h1-link-0002"
	t.Setenv("P1_KEY", key)
	for _, tc := range []struct {
		name, link string
		pointee    bool // the link points at an existing file
		force      bool
	}{
		{"dangling env file", "detour.env", false, false},
		{"dangling env file, --force", "detour.env", false, true},
		{"env file linked to a file, --force", "detour.env", true, true},
		{"dangling config", "config.yaml", false, false},
		{"config linked to a file, --force", "config.yaml", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			elsewhere := filepath.Join(t.TempDir(), "shared.txt")
			if tc.pointee {
				if err := os.WriteFile(elsewhere, []byte("theirs\n"), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			link := filepath.Join(dir, tc.link)
			if err := os.Symlink(elsewhere, link); err != nil {
				t.Fatal(err)
			}
			var extra []string
			if tc.force {
				extra = []string{"--force"}
			}
			_, errOut, code := initIn(t, dir, "", false, extra...)
			if code != exitUsage || !strings.Contains(errOut, link+" is a symbolic link") || !strings.Contains(errOut, "nothing was written") {
				t.Errorf("exit %d, %q; want %d and an error naming %s as a link", code, errOut, exitUsage, link)
			}
			got, err := os.ReadFile(elsewhere)
			switch {
			case tc.pointee && string(got) != "theirs\n":
				t.Errorf("the file the link points at was written: %q", got)
			case !tc.pointee && !errors.Is(err, os.ErrNotExist):
				t.Errorf("the dangling link was followed: %s now holds %q", elsewhere, got)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("the folder holds %d entries, want the link alone", len(entries))
			}
			if strings.Contains(errOut, "CANARY") {
				t.Error("P4: the error shows the key")
			}
		})
	}
}

// covers H1 (issue 37): a value with a control character (a key read from
// the environment or typed, a model, a provider's URL) is refused with an
// error naming the key or flag, never written: a line break would add lines
// to the env file. A secret's value is never shown.
func TestInit_H1_ControlCharactersInValuesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, key, stdin string
		interactive      bool
		extra            []string
		want             string
	}{
		{name: "newline in a key from the environment", key: "sk-CANARY-a\nEVIL=1", want: "the value of P1_KEY holds a line break"},
		{name: "carriage return in a key", key: "sk-CANARY-a\rEVIL=1", want: "the value of P1_KEY holds a carriage return"},
		{name: "escape in a key", key: "sk-CANARY-\x1b[2J", want: "the value of P1_KEY holds a control character (U+001B)"},
		{name: "NUL in a typed key", interactive: true, stdin: "m1\nsk-CANARY-\x00x\n", want: "the value of P1_KEY holds a NUL byte"},
		{name: "newline in a model", key: "sk-ok", extra: []string{"--model", "p1/m\nx"}, want: `--model "p1/m\nx" holds a line break`},
		{name: "newline in a typed model", interactive: true, stdin: "m\vx\nsk-ok\n", want: `the model of p1 "m\vx" holds a control character (U+000B)`},
		{name: "tab in a provider's URL", key: "sk-ok", extra: []string{"--provider", "p2=http://127.0.0.1:9/v1\t#"}, want: `--provider "p2=http://127.0.0.1:9/v1\t#" holds a control character (U+0009)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("P1_KEY", tc.key)
			dir := t.TempDir()
			_, errOut, code := initIn(t, dir, tc.stdin, tc.interactive, tc.extra...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "nothing was written") {
				t.Errorf("exit %d, %q; want %d and %q", code, errOut, exitUsage, tc.want)
			}
			if strings.Contains(errOut, "CANARY") {
				t.Errorf("P4: the error shows the key: %q", errOut)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a refused init wrote %d file(s)", len(entries))
			}
		})
	}
}

// covers H1 (issue 37): a failure part way leaves nothing half-written: no
// temporary file, the files not yet replaced as they were, and the error
// (exit 1) says which files were written and which were not.
func TestInit_H1_AFailedWriteLeavesNoTemporaryFileAndSaysWhatWasWritten(t *testing.T) {
	t.Setenv("P1_KEY", "sk-CANARY-h1-fail-0003")
	real := renameFile
	t.Cleanup(func() { renameFile = real })
	for _, failing := range []string{"detour.env", "config.yaml"} {
		t.Run(failing, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"detour.env", "config.yaml"} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("old "+f+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			renameFile = func(from, to string) error {
				if filepath.Base(to) == failing {
					return errors.New("injected failure")
				}
				return real(from, to)
			}
			_, errOut, code := initIn(t, dir, "", false, "--force")
			renameFile = real
			want := filepath.Join(dir, failing) + ": injected failure; not written: "
			if code != exitFailed || !strings.Contains(errOut, want) {
				t.Errorf("exit %d, %q; want %d and %q", code, errOut, exitFailed, want)
			}
			if failing == "config.yaml" && !strings.Contains(errOut, "; written: "+filepath.Join(dir, "detour.env")) {
				t.Errorf("the error does not say detour.env was written: %q", errOut)
			}
			if tmp := leftovers(t, dir); len(tmp) != 0 {
				t.Errorf("temporary files left behind: %v", tmp)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, failing)); string(got) != "old "+failing+"\n" {
				t.Errorf("%s is no longer the old file: %q", failing, got)
			}
		})
	}
	// A target that is not a regular file is refused before anything is written.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "config.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := initIn(t, dir, "", false, "--force")
	if code != exitUsage || !strings.Contains(errOut, filepath.Join(dir, "config.yaml")+" is not a regular file") {
		t.Errorf("config.yaml a folder: exit %d, %q", code, errOut)
	}
	if _, err := os.Lstat(filepath.Join(dir, "detour.env")); !errors.Is(err, os.ErrNotExist) {
		t.Error("detour.env was written although config.yaml could not be")
	}
}
