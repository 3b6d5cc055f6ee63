package config

import (
	"os"
	"path/filepath"
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
