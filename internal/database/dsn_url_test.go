package database

import (
	"context"
	"os"
	"strings"
	"testing"
)

// covers T8 (issue 37: "a Postgres URL given as a SQLite DSN is printed with
// its password"): a server's URL given to the SQLite driver (storage.dsn, or
// --db) is refused with an error that hides the password and says what to
// do; nothing is created in its name.
func TestOpen_Issue37_AURLAsSQLiteDSNIsRefusedWithoutItsPassword(t *testing.T) {
	t.Chdir(t.TempDir())
	logger, logs := testLogger(t)
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://u:CANARY-pw@127.0.0.1:1/db", "set storage.driver: postgres"},
		{"postgresql://u:CANARY-pw@127.0.0.1:1/db?sslmode=disable", "set storage.driver: postgres"},
		{"mysql://u:CANARY-pw@127.0.0.1:1/db", "give a file path such as detour.db"},
	} {
		db, err := Open(context.Background(), DriverSQLite, tc.dsn, logger)
		if err == nil {
			Close(db)
			t.Errorf("%s: opened as a SQLite file", tc.dsn)
			continue
		}
		if strings.Contains(err.Error(), "CANARY-pw") || !strings.Contains(err.Error(), "[redacted]@127.0.0.1:1") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %q: it shows the password, or not the host and %q", err, tc.want)
		}
		if _, _, err := DSN(tc.dsn); err == nil || strings.Contains(err.Error(), "CANARY-pw") {
			t.Errorf("DSN(%s): %v", tc.dsn, err)
		}
	}
	if entries, _ := os.ReadDir("."); len(entries) != 0 {
		t.Errorf("%d file(s) or folder(s) made in the URL's name", len(entries))
	}
	if strings.Contains(logs.String(), "CANARY-pw") {
		t.Error("T8: the password reached the logs")
	}
	// A file: URI and plain paths stay SQLite's.
	for _, ok := range []string{"file:x.db?_busy_timeout=1", "file:///tmp/x.db", "data/x.db", "c:x.db"} {
		if _, _, err := DSN(ok); err != nil {
			t.Errorf("DSN(%s): %v", ok, err)
		}
	}
}
