package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// covers F9, P4: the env file's KEY=value lines, as systemd and docker read
// them; a bad line names the file and the line, never a value.
func TestReadEnvFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "detour.env")
	src := "# keys\n\nOPENAI_API_KEY=sk-CANARY-env-1\nexport ANTHROPIC_API_KEY=\"sk-CANARY-env-2\"\nEMPTY=\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := ReadEnvFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if env["OPENAI_API_KEY"] != "sk-CANARY-env-1" || env["ANTHROPIC_API_KEY"] != "sk-CANARY-env-2" || env["EMPTY"] != "" || len(env) != 3 {
		t.Fatalf("env = %v", env)
	}
	if err := os.WriteFile(path, []byte("OK=1\nsk-CANARY-env-3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ReadEnvFile(path)
	if err == nil || err.Error() != path+":2: want KEY=value (a variable name, '=', then the value)" {
		t.Fatalf("bad line: %v", err)
	}
}

// A value whose quote is never closed is refused with the file, the line and
// the variable, never the value; spaces around '=' and a byte order mark
// (Windows editors) do not end up in a key. covers P4
func TestReadEnvFile_QuotesSpacesAndBOM(t *testing.T) {
	path := filepath.Join(t.TempDir(), "detour.env")
	src := "\xef\xbb\xbfOPENAI_API_KEY = sk-CANARY-env-4\nQ='sk-CANARY-env-5'\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := ReadEnvFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if env["OPENAI_API_KEY"] != "sk-CANARY-env-4" || env["Q"] != "sk-CANARY-env-5" || len(env) != 2 {
		t.Fatalf("env = %q", env)
	}
	for _, line := range []string{`K="sk-CANARY-env-6`, `K='`, `K="sk-CANARY-env-6'`} {
		if err := os.WriteFile(path, []byte("OK=1\n"+line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := ReadEnvFile(path)
		if err == nil || !strings.HasPrefix(err.Error(), path+":2: the value of K opens a quote") || strings.Contains(err.Error(), "CANARY") {
			t.Errorf("%s: %v", line, err)
		}
	}
}
