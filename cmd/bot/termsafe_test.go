package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

// hostileText is what a hostile provider (or user) writes to reach an operator's
// terminal: an OSC 52 clipboard write, a window title, a C1 CSI, a bidi
// override, and a line feed that would forge a row.
const hostileText = "upstream failed \x1b]52;c;cm0gLXJmIH4=\x07 \x1b]0;pwned\x1b\\ \u009b2J \u202edetour\u202c\nFORGED ROW"

// hostileProvider answers every call with a 500 whose error message is
// hostileText (a server error: the turn falls back, and the message is recorded
// and logged).
func hostileProvider(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": hostileText, "type": "server_error"}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// rawControl returns the first control character in s that a terminal would act
// on (C0 but newline and tab, DEL, C1, bidi), or "".
func rawControl(s string) string {
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0),
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
			return fmt.Sprintf("%U", r)
		}
	}
	return ""
}

// covers T10, T4: a hostile provider's error body and a hostile session name
// reach `bot history` (table and JSON), `bot check --probe` and the JSON logs
// with every terminal control neutralised: visible as \x1b... in the table and
// the probe, escaped in JSON (which still decodes to the original text).
func TestCLI_T10_HostileTextNeutralised(t *testing.T) {
	llm := startFake(t)
	path := testConfig(t, llm, "")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(src), fmt.Sprintf("p1: {base_url: %q}", llm.BaseURL("p1")), fmt.Sprintf("p1: {base_url: %q}", hostileProvider(t)), 1)
	if cfg == string(src) {
		t.Fatal("could not point p1 at the hostile provider")
	}
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(t.TempDir(), "bot.log")
	session := "s\x1b]0;evil\x07\u202e1"
	line, _ := json.Marshal(map[string]string{"session": session, "text": "hello"})
	var stdout, stderr syncbuf.Buffer
	code := dispatch(context.Background(), []string{"--config", path, "--log-format", "json", "--log-file", logFile, "--log-level", "debug"},
		strings.NewReader(string(line)+"\n"), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("bot: exit %d\n%s", code, stderr.String())
	}
	if c := rawControl(strings.TrimSpace(stdout.String())); c != "" {
		t.Errorf("T4: the console's jsonl carries a raw control %s: %q", c, stdout.String())
	}
	replies := parseLines(t, stdout.String())
	if len(replies) == 0 || replies[len(replies)-1].Type != "reply" || replies[len(replies)-1].Session != session {
		t.Fatalf("want the fallback's reply in the hostile session (decoded back to its name): %+v", replies)
	}

	// The JSON log: the provider's message reaches a log line, escaped.
	logs, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if c := rawControl(string(logs)); c != "" {
		t.Errorf("a JSON log line carries a raw control %s:\n%s", c, logs)
	}
	found := false
	for _, l := range strings.Split(strings.TrimSpace(string(logs)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		if d, _ := rec["fallbackStepFromFailureDetail"].(string); strings.Contains(d, "\u202edetour\u202c") {
			found = true
		}
	}
	if !found {
		t.Errorf("no model_fallback_decision line carries the provider's message (decoded):\n%s", logs)
	}

	// bot history, as a table: visible escapes, no raw control, no forged row.
	var out, errw syncbuf.Buffer
	if code := dispatch(context.Background(), []string{"history", "--config", path}, nil, &out, &errw); code != 0 {
		t.Fatalf("history: exit %d\n%s", code, errw.String())
	}
	table := out.String()
	if c := rawControl(table); c != "" {
		t.Errorf("bot history prints a raw control %s:\n%q", c, table)
	}
	for _, want := range []string{`\x1b]52;c;cm0gLXJmIH4=\x07`, `\u202edetour\u202c`, `s\x1b]0;evil\x07\u202e1`} {
		if !strings.Contains(table, want) {
			t.Errorf("bot history does not show %s visibly:\n%s", want, table)
		}
	}
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "FORGED") {
			t.Errorf("the provider's text started a row of its own:\n%s", table)
		}
	}

	// bot history --format json: escaped, and decodes to the original text.
	out.Reset()
	if code := dispatch(context.Background(), []string{"history", "--config", path, "--format", "json"}, nil, &out, &errw); code != 0 {
		t.Fatalf("history --format json: exit %d\n%s", code, errw.String())
	}
	if c := rawControl(strings.TrimSpace(out.String())); c != "" {
		t.Errorf("bot history --format json prints a raw control %s:\n%q", c, out.String())
	}
	sawSession := false
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ev historyLine
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		sawSession = sawSession || ev.Session == "console:"+session
	}
	if !sawSession {
		t.Errorf("the JSON history lost the session's name:\n%s", out.String())
	}

	// bot check --probe: the provider's own words, visibly neutralised.
	out.Reset()
	code = dispatch(context.Background(), []string{"check", "--probe", "--config", path}, nil, &out, &errw)
	if code != exitFailed {
		t.Fatalf("check --probe: exit %d, want %d (p1 fails)\n%s%s", code, exitFailed, out.String(), errw.String())
	}
	probe := out.String()
	if c := rawControl(probe); c != "" {
		t.Errorf("bot check --probe prints a raw control %s:\n%q", c, probe)
	}
	if !strings.Contains(probe, `\u202edetour\u202c`) {
		t.Errorf("the probe table does not show the provider's message visibly:\n%s", probe)
	}
}

// covers T10: `bot classify --explain` prints a provider's body without a raw C1
// or bidi control, and its JSON still decodes to the evidence.
func TestClassify_T10_HostileBody(t *testing.T) {
	body, _ := json.Marshal(map[string]any{"provider": "openai", "http_status": 429,
		"body": `{"error":{"message":"Rate limit reached ` + "\u009b2J\u202eevil\u202c" + `"}}`})
	var out, errw syncbuf.Buffer
	if code := dispatch(context.Background(), []string{"classify", "--explain"}, strings.NewReader(string(body)+"\n"), &out, &errw); code != 0 {
		t.Fatalf("classify: exit %d\n%s", code, errw.String())
	}
	if c := rawControl(strings.TrimSpace(out.String())); c != "" {
		t.Errorf("classify prints a raw control %s: %q", c, out.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(out.String()), &rec); err != nil || rec["reason"] != "rate_limit" {
		t.Errorf("classify output %q: %v", out.String(), err)
	}
}
