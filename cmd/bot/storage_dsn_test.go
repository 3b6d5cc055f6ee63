package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detourbot/detour/config"
)

// covers T8 (issue 37: "a Postgres URL given as a SQLite DSN is printed with
// its password"): bot check refuses a server's URL as the SQLite DSN without
// printing it, and shows a SQLite file: URI with credentials in it (SQLite
// takes an authority, file://host/path) without them; --probe's storage row
// likewise.
func TestCheck_Issue37_SQLiteDSNPasswordsHidden(t *testing.T) {
	const rest = "providers:\n  o: {base_url: http://127.0.0.1:1/v1}\nagents: {defaults: {model: {primary: o/m}}}\n"
	write := func(dsn string) string {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte("storage: {driver: sqlite, dsn: \""+dsn+"\"}\n"+rest), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), []string{"check", "--config", write("postgres://u:CANARY-pw@127.0.0.1:1/db")}, nil, &stdout, &stderr)
	if all := stdout.String() + stderr.String(); code != exitUsage || strings.Contains(all, "CANARY") || !strings.Contains(all, "set storage.driver: postgres") {
		t.Errorf("a Postgres URL under sqlite: exit %d\n%s", code, all)
	}
	stdout.Reset()
	stderr.Reset()
	db := filepath.Join(t.TempDir(), "x.db")
	code = dispatch(context.Background(), []string{"check", "--config", write("file://u:CANARY-pw@localhost" + db)}, nil, &stdout, &stderr)
	if all := stdout.String() + stderr.String(); code != exitOK || strings.Contains(all, "CANARY") || !strings.Contains(all, "storage: sqlite file://[redacted]@localhost") {
		t.Errorf("a file: URI with credentials: exit %d\n%s", code, all)
	}
	cfg, err := config.LoadWith(write("file://u:CANARY-pw@localhost"+db), nil)
	if err != nil {
		t.Fatal(err)
	}
	if row := probeStorage(context.Background(), cfg); strings.Contains(row.target+row.detail, "CANARY") || !strings.Contains(row.target, "[redacted]") {
		t.Errorf("probe row %+v shows the password", row)
	}
}
