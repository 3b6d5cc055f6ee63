package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/detourbot/detour/config"
)

// covers F15: `bot check` without --config names a config.yml it would not
// read (the demo runs instead), and says nothing once config.yaml is there.
func TestCheck_F15_ConfigYml(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.WriteFile("config.yml", []byte("storage: {driver: sqlite}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"check"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := "warning: config.yml: is not read: without --config the bot reads config.yaml only, so it runs the built-in demo; rename it (mv config.yml config.yaml) or pass --config config.yml"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
	stderr.Reset()
	dispatch(context.Background(), []string{"check", "--config", "config.yml"}, nil, &stdout, &stderr)
	if strings.Contains(stderr.String(), "is not read") {
		t.Errorf("--config config.yml still warned:\n%s", stderr.String())
	}
}

// covers F12: check never says "admins: console only" while the console is
// off, and names the console beside admin.users while it is on.
func TestCheck_F12_AdminsLine(t *testing.T) {
	for _, tc := range []struct {
		console bool
		users   []string
		want    string
	}{
		{true, nil, "console only"},
		{false, nil, "none (admin.users is empty and the console is off)"},
		{true, []string{"slack:U1"}, "slack:U1, the console"},
		{false, []string{"slack:U1", "discord:2"}, "slack:U1, discord:2"},
	} {
		cfg := config.Default()
		cfg.Channels.Console.Enabled = tc.console
		cfg.Admin.Users = tc.users
		if got := adminsLine(cfg); got != tc.want {
			t.Errorf("console %v, users %v: %q, want %q", tc.console, tc.users, got, tc.want)
		}
	}
}
