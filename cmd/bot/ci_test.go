package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// issue 36: CI runs the README's test command with Go's defaults, as a fresh
// clone has them: no go env file (GOENV=off) and no GOFLAGS, so a -buildvcs=false
// in the runner's go env cannot hide what a clone's build does.
func TestCI_RunsTheReadmeCommandWithGoDefaults(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	for _, want := range []string{"\nexport GOENV=off\n", "\nexport GOFLAGS=\n", "go test -race ./...", "go vet ./..."} {
		if !strings.Contains(script, want) {
			t.Errorf(".ci/run lacks %q", strings.TrimSpace(want))
		}
	}
	// Nothing after the defaults puts a flag back.
	if m := regexp.MustCompile(`(?m)^\s*(export\s+)?GOFLAGS=.+$`).FindString(script); m != "" {
		t.Errorf(".ci/run sets GOFLAGS again: %q", m)
	}
	if !strings.Contains(readme(t), "go test -race ./... && go vet ./...") {
		t.Error("the README no longer shows the test command .ci/run runs")
	}
}
