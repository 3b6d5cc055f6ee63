package e2e

import (
	"testing"

	"github.com/detourbot/detour/internal/testkit/testdb"
)

// covers M1: worlds inside OnPostgres use Postgres, every other world SQLite.
func TestOnPostgres_PicksTheDriver(t *testing.T) {
	if d := driverFor(t); d != testdb.SQLite {
		t.Fatalf("outside OnPostgres: %s", d)
	}
	t.Run("outer", func(t *testing.T) {
		OnPostgres(t, func(t *testing.T) {
			t.Run("nested", func(t *testing.T) {
				if d := driverFor(t); d != testdb.Postgres {
					t.Errorf("inside OnPostgres: %s", d)
				}
			})
		})
	})
	if d := driverFor(t); d != testdb.SQLite {
		t.Fatalf("after OnPostgres: %s", d)
	}
}
