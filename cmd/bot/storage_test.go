package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// withStorage rewrites the storage line of a testConfig file.
func withStorage(t *testing.T, path, storage string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src = regexp.MustCompile(`(?m)^storage: .*$`).ReplaceAll(src, []byte(storage))
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRun_JSONL_M1_Postgres: the whole bot over the console jsonl contract with
// storage.driver postgres: a fallback, its notice, and the session staying on
// the fallback, as with SQLite. Skipped without DETOUR_TEST_POSTGRES_DSN.
// covers M1, N1, O2
func TestRun_JSONL_M1_Postgres(t *testing.T) {
	dsn := testdb.DSN(t, testdb.Postgres)
	srv := startFake(t)
	srv.Script(fakeprovider.Rule{Provider: "p1", Model: "primary", Mode: fakeprovider.ModeInsufficientQuota})
	path := testConfig(t, srv, "")
	withStorage(t, path, `storage: {driver: postgres, dsn: "`+dsn+`"}`)
	in := `{"session": "s1", "text": "hello"}` + "\n" + `{"session": "s1", "text": "and again"}` + "\n"
	var stdout, stderr syncbuf.Buffer
	if code := dispatch(context.Background(), []string{"--config", path}, strings.NewReader(in), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	lines := parseLines(t, stdout.String())
	if len(lines) != 3 || lines[0].Type != "notice" || lines[1].Model != "p2/fallback-1" || lines[2].Model != "p2/fallback-1" {
		t.Fatalf("want notice, reply, reply from the fallback; got:\n%s", stdout.String())
	}
}

// TestRun_T7_UntrustedDatabaseStartsNothing: a damaged or read-only database
// stops the bot at start with an error that names the file and says what is
// wrong; no message is read and no provider is called.
// covers T7
func TestRun_T7_UntrustedDatabaseStartsNothing(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, db string)
		want    string
	}{
		{"damaged", func(t *testing.T, db string) {
			if err := os.WriteFile(db, []byte(strings.Repeat("not a database ", 400)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "is damaged"},
		{"read-only", func(t *testing.T, db string) {
			if os.Geteuid() == 0 {
				t.Skip("root writes any file; the read-only case is covered with a read-only mount in internal/database (TestOpen_T7_ReadOnly)")
			}
			if err := os.WriteFile(db, nil, 0o400); err != nil {
				t.Fatal(err)
			}
		}, "read-only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startFake(t)
			path := testConfig(t, srv, "")
			db := filepath.Join(filepath.Dir(path), "bot.db")
			tc.prepare(t, db)
			var stdout, stderr syncbuf.Buffer
			code := dispatch(context.Background(), []string{"--config", path}, strings.NewReader(`{"session": "s1", "text": "hello"}`+"\n"), &stdout, &stderr)
			if code != exitFailed {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitFailed, stderr.String())
			}
			if s := stderr.String(); !strings.Contains(s, db) || !strings.Contains(s, tc.want) {
				t.Errorf("stderr does not name %s and say %q:\n%s", db, tc.want, s)
			}
			if stdout.String() != "" || len(srv.Calls()) != 0 {
				t.Errorf("the bot answered or called a provider: %q, %d calls", stdout.String(), len(srv.Calls()))
			}
		})
	}
}
