package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// covers V1: `bot history` reads the fallback history the bot recorded (the
// failed primary, the fallback that answered, the notice), newest last, as a
// table or JSON lines, on SQLite and Postgres.
func TestHistory_V1_AfterAFallback(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		srv := startFake(t)
		srv.Script(fakeprovider.Rule{Provider: "p1", Model: "primary", Mode: fakeprovider.ModeInsufficientQuota})
		path := testConfig(t, srv, "")
		if driver == testdb.Postgres {
			withStorage(t, path, `storage: {driver: postgres, dsn: "`+testdb.DSN(t, driver)+`"}`)
		}
		in := `{"session": "s1", "text": "hello"}` + "\n" + `{"session": "s2", "text": "hi"}` + "\n"
		var stdout, stderr syncbuf.Buffer
		if code := dispatch(context.Background(), []string{"--config", path}, strings.NewReader(in), &stdout, &stderr); code != 0 {
			t.Fatalf("bot: exit %d\n%s", code, stderr.String())
		}

		run := func(args ...string) (int, string, string) {
			var out, errw syncbuf.Buffer
			code := dispatch(context.Background(), append([]string{"history", "--config", path}, args...), nil, &out, &errw)
			return code, out.String(), errw.String()
		}
		code, out, errs := run()
		if code != 0 {
			t.Fatalf("history: exit %d\n%s", code, errs)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		// s2 is a new session whose primary is parked (billing, D3): it skips
		// it and answers from the fallback, a fallback turn too.
		want := []string{
			"TIME (UTC) SESSION MODEL PROFILE OUTCOME DURATION DETAIL",
			"console:s1 p1/primary p1:main billing (HTTP 429)",
			"console:s1 p2/fallback-1 p2:main ok",
			"console:s1 notice ↪️ model fallback: p2/fallback-1 (selected p1/primary; out of credits)",
			"console:s2 p1/primary p1:main skipped: billing -",
			"console:s2 p2/fallback-1 p2:main ok",
			"console:s2 notice ↪️ model fallback: p2/fallback-1 (selected p1/primary; out of credits)",
		}
		if len(lines) != len(want) {
			t.Fatalf("history has %d lines, want %d:\n%s", len(lines), len(want), out)
		}
		for i, w := range want {
			if !strings.Contains(squeeze(lines[i]), w) {
				t.Errorf("line %d = %q, want it to contain %q", i, lines[i], w)
			}
		}
		if strings.Contains(out, "CANARY") {
			t.Error("P4: a key in the history")
		}

		code, out, _ = run("--session", "console:s1", "--format", "json", "--since", "1h")
		if code != 0 {
			t.Fatalf("history --format json: exit %d", code)
		}
		var types []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var ev historyLine
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("not JSON: %q: %v", l, err)
			}
			if ev.Session != "console:s1" {
				t.Errorf("--session console:s1 printed %q", ev.Session)
			}
			if _, err := time.Parse(time.RFC3339Nano, ev.Time); err != nil {
				t.Errorf("time %q: %v", ev.Time, err)
			}
			types = append(types, ev.Type+":"+ev.Outcome)
		}
		if got := strings.Join(types, ","); got != "attempt:billing,attempt:ok,notice:" {
			t.Errorf("json events = %s", got)
		}

		if code, out, _ := run("--since", "2000-01-01", "--session", "nobody"); code != 0 || !strings.Contains(out, "no fallback history in session nobody since 2000-01-01") {
			t.Errorf("empty history: exit %d %q", code, out)
		}
	})
}

// squeeze collapses runs of spaces, so table columns compare by content.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestHistory_BadArguments(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"bad since", []string{"--db", filepath.Join(dir, "x.db"), "--since", "yesterday"}, exitUsage, "bad --since"},
		{"bad format", []string{"--format", "xml"}, exitUsage, "bad --format"},
		{"missing database", []string{"--db", filepath.Join(dir, "none.db")}, exitFailed, "no database at " + filepath.Join(dir, "none.db")},
		{"extra argument", []string{"now"}, exitUsage, "unexpected arguments"},
	}
	for _, tc := range tests {
		var out, errw syncbuf.Buffer
		code := dispatch(context.Background(), append([]string{"history"}, tc.args...), nil, &out, &errw)
		if code != tc.code || !strings.Contains(errw.String(), tc.err) {
			t.Errorf("%s: exit %d %q, want %d and %q", tc.name, code, errw.String(), tc.code, tc.err)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"1h", now.Add(-time.Hour), true},
		{"90m", now.Add(-90 * time.Minute), true},
		{"7d", now.Add(-7 * 24 * time.Hour), true},
		{"2026-02-28", time.Date(2026, 2, 28, 0, 0, 0, 0, time.UTC), true},
		{"2026-02-28T10:00:00+01:00", time.Date(2026, 2, 28, 9, 0, 0, 0, time.UTC), true},
		{"9999999d", now.AddDate(0, 0, -9999999), true}, // past time.Duration's range: still the past
		{"-1h", time.Time{}, false},
		{"soon", time.Time{}, false},
	}
	for _, tc := range tests {
		got, err := parseSince(tc.in, now)
		if (err == nil) != tc.ok || (tc.ok && !got.Equal(tc.want)) {
			t.Errorf("parseSince(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// covers V1, C6: `bot history` keeps the HTTP status beside the reason: a
// primary answering 500 is "server_error (HTTP 500)" in the table and
// "server_error" with status 500 in JSON, never a timeout.
func TestHistory_V1_ServerErrorIsNotATimeout(t *testing.T) {
	srv := startFake(t)
	srv.Script(fakeprovider.Rule{Provider: "p1", Model: "primary", Mode: fakeprovider.ModeServer500})
	path := testConfig(t, srv, "")
	var stdout, stderr syncbuf.Buffer
	if code := dispatch(context.Background(), []string{"--config", path}, strings.NewReader(`{"session": "s5", "text": "hello"}`+"\n"), &stdout, &stderr); code != 0 {
		t.Fatalf("bot: exit %d\n%s", code, stderr.String())
	}
	var out, errw syncbuf.Buffer
	if code := dispatch(context.Background(), []string{"history", "--config", path}, nil, &out, &errw); code != 0 {
		t.Fatalf("history: exit %d\n%s", code, errw.String())
	}
	if !strings.Contains(squeeze(out.String()), "console:s5 p1/primary p1:main server_error (HTTP 500)") || strings.Contains(out.String(), "timeout") {
		t.Errorf("history:\n%s", out.String())
	}
	out.Reset()
	if code := dispatch(context.Background(), []string{"history", "--config", path, "--format", "json"}, nil, &out, &errw); code != 0 {
		t.Fatal(code)
	}
	var first historyLine
	if err := json.Unmarshal([]byte(strings.SplitN(out.String(), "\n", 2)[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Outcome != "server_error" || first.Status != 500 {
		t.Errorf("json: %+v", first)
	}
}
