package config

import (
	"strings"
	"testing"
)

// covers T8 (issue 37: "a Postgres URL given as a SQLite DSN is printed with
// its password"): storage.dsn holding a server's URL under driver sqlite is an
// error that says what to do and never echoes the DSN; SQLite's file: URIs
// and paths stay valid.
func TestParse_Issue37_AServerURLAsSQLiteDSN(t *testing.T) {
	base := "providers:\n  o: {base_url: http://127.0.0.1:1/v1}\nagents: {defaults: {model: {primary: o/m}}}\n"
	env := fakeEnv(map[string]string{"DB_PASSWORD": "CANARY-pw"})
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://u:CANARY-pw@127.0.0.1:1/db", "c.yaml:4: storage.dsn: is a postgres:// URL, not a SQLite database file: set storage.driver: postgres"},
		{"postgresql://u:${DB_PASSWORD}@127.0.0.1:1/db", "storage.dsn: is a postgresql:// URL, not a SQLite database file: set storage.driver: postgres"},
		{"mysql://u:CANARY-pw@h/db", "storage.dsn: is a mysql:// URL, not a SQLite database file: give a file path such as detour.db"},
	} {
		_, err := Parse("c.yaml", []byte(base+"storage: {driver: sqlite, dsn: \""+tc.dsn+"\"}\n"), env)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "CANARY") {
			t.Errorf("%s: err = %v, want %q and no password", tc.dsn, err, tc.want)
		}
	}
	for _, ok := range []string{"detour.db", "file:detour.db?_busy_timeout=1", "file:///var/lib/detour/detour.db", ":memory:"} {
		if _, err := Parse("c.yaml", []byte(base+"storage: {driver: sqlite, dsn: \""+ok+"\"}\n"), env); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
