//go:build cgo

package alerts

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"gorm.io/gorm"

	"github.com/detourbot/detour/failover/failovertest"
	"github.com/detourbot/detour/internal/database"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// openReplica opens dsn as another process would: its own handle.
func openReplica(t *testing.T, driver, dsn string) *gorm.DB {
	t.Helper()
	db, err := database.Open(context.Background(), driver, dsn, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = database.Close(db) })
	return db
}

// Two replicas on one database (a SQLite file opened twice; Postgres under
// .ci/with-postgres) both alert the same events, as when both see one
// change: the receiver gets each event once, retries included (the first
// try of one is answered 500), and the claim rows record the outcome.
func TestDispatcher_OneDeliveryAcrossReplicas(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		dsn := testdb.DSN(t, driver)
		clock := failovertest.NewClock(t0)
		r := newReceiver(t, "shared-secret", clock.Now)
		r.status = func(n int) int {
			if n == 1 {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		}
		dbA, dbB := openReplica(t, driver, dsn), openReplica(t, driver, dsn)
		a := newTestDispatcher(t, r, clock, Options{DB: dbA})
		b := newTestDispatcher(t, r, clock, Options{DB: dbB})
		events := []Event{sample(0), sample(1), NewAllDown(t0, "s", nil), NewRecovered(t0.Add(60e9), t0)}
		for _, e := range events {
			a.Alert(e)
			b.Alert(e)
		}
		a.Close(context.Background())
		b.Close(context.Background())

		perID := map[string]int{}
		for _, g := range r.got() {
			if g.sigErr != nil {
				t.Fatalf("signature: %v", g.sigErr)
			}
			if g.status == http.StatusOK {
				perID[g.id]++
			}
		}
		delivered := 0.0
		dups := 0.0
		for _, d := range []*Dispatcher{a, b} {
			for _, ty := range Types {
				delivered += value(d.deliveries.WithLabelValues(string(ty), OutcomeDelivered))
				dups += value(d.deliveries.WithLabelValues(string(ty), OutcomeDuplicate))
			}
		}
		if delivered != float64(len(events)) || dups != float64(len(events)) {
			t.Fatalf("delivered %v and duplicates %v across both replicas, want %d each", delivered, dups, len(events))
		}
		if n := len(r.got()); n != len(events)+1 {
			t.Fatalf("the receiver got %d requests, want %d (one per event, plus the retry after the 500)", n, len(events)+1)
		}
		for _, e := range events {
			if perID[e.ID] != 1 {
				t.Errorf("%s %s: delivered %d times", e.Type, e.ID, perID[e.ID])
			}
		}
		var rows []deliveryRow
		if err := dbA.Order("id").Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		retried := 0
		for _, row := range rows {
			if row.Outcome != OutcomeDelivered || row.LastStatus != http.StatusOK || row.DoneAt == nil {
				t.Errorf("claim row %+v", row)
			}
			if row.Attempts == 2 {
				retried++
			}
		}
		if len(rows) != len(events) || retried != 1 {
			t.Fatalf("want %d claim rows, one with 2 attempts; got %d rows, %d retried", len(events), len(rows), retried)
		}
	})
}
