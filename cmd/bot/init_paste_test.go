package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A key pasted at a question that does not take one (the providers, the
// channels, a model) is refused and asked again without being quoted back,
// and never becomes a model's name; a key given as a flag's value is not
// quoted either. covers F9, P4
func TestInit_F9_KeyPastedAtTheWrongQuestion(t *testing.T) {
	dir := t.TempDir()
	const paste, key = "sk-CANARY-paste-0001", "sk-CANARY-typed-0002"
	answers := strings.Join([]string{paste, "openai", paste, "console", paste, "", key, ""}, "\n") + "\n"
	var out, errOut bytes.Buffer
	code := runInit(context.Background(), []string{"--no-check", "--config", filepath.Join(dir, "config.yaml"), "--env-file", filepath.Join(dir, "detour.env")},
		strings.NewReader(answers), &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if n := strings.Count(errOut.String(), "bot init: that looks like an OpenAI API key (sk-...), which this question does not take"); n != 3 {
		t.Errorf("%d refusals, want 3:\n%s", n, errOut.String())
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "primary: openai/gpt-4o-mini\n") {
		t.Errorf("config.yaml:\n%s", cfg)
	}
	if strings.Contains(out.String()+errOut.String()+string(cfg), "CANARY") {
		t.Errorf("a key was shown or written to config.yaml:\n%s\n%s\n%s", out.String(), errOut.String(), cfg)
	}

	errOut.Reset()
	code = runInit(context.Background(), []string{"--non-interactive", "--config", filepath.Join(dir, "c2.yaml"), "--env-file", filepath.Join(dir, "e2.env"), "--provider", paste}, nil, &out, &errOut)
	if code != exitUsage || !strings.Contains(errOut.String(), "unknown provider") || strings.Contains(errOut.String(), "CANARY") {
		t.Errorf("--provider <a key>: exit %d, %q", code, errOut.String())
	}
}
