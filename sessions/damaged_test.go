//go:build cgo

package sessions

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"
	"gorm.io/gorm"

	"github.com/detourbot/detour/internal/testkit/testdb"
)

// covers T7, M8 (issue 37): the database's pages are found damaged mid-run,
// when a turn's answer is written. The answer was paid for, so it is
// delivered, with a notice that it could not be saved (not a promise to keep
// it: a damaged file does not heal); the admin is told once; and every later
// turn stops before any paid call, since its answer could not be stored
// either. Before, each later turn was paid and delivered and never stored.
func TestRouter_T7_DamagedMidRunStopsPaying(t *testing.T) {
	testdb.Each(t, func(t *testing.T, driver string) {
		mem := map[string]*memLLM{}
		h := newHarness(t, driver, withMem(mem))
		expect(t, h.say(key1, "before the damage"), "reply")

		// The error the driver gives for a damaged page, as the real dialect
		// translates it (internal/database marks it).
		var damage error = sqlite3.Error{Code: sqlite3.ErrCorrupt}
		if driver == testdb.Postgres {
			damage = &pgconn.PgError{Code: "XX001", Message: "invalid page in block 7 of relation base/5/16384"}
		}
		err := h.db.Callback().Create().Before("gorm:create").Register("test:damaged", func(tx *gorm.DB) {
			if tx.Statement.Table == (Message{}).TableName() {
				_ = tx.AddError(damage)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.db.Callback().Create().Remove("test:damaged") })

		calls := func() int {
			n := 0
			for _, m := range mem {
				n += len(m.requests())
			}
			return n
		}
		before := calls()
		out := expect(t, h.say(key1, "answered, not stored"), "notice,reply")
		if !strings.Contains(out[0].Text, "could not be saved") || !strings.Contains(out[0].Text, "damaged") {
			t.Errorf("notice = %q, want it to say the answer could not be saved because the database is damaged", out[0].Text)
		}
		if h.r.unsaved.pending() {
			t.Error("the answer is kept in memory for a database that will not take it")
		}
		reports := h.admin.take()
		if len(reports) != 1 || !strings.Contains(reports[0].Text, "damaged") || !strings.Contains(reports[0].Text, "before any paid call") {
			t.Fatalf("admin reports = %s, want one that says the database is damaged and turns stop", dump(reports))
		}
		for _, key := range []string{key1, "test:another"} {
			out = expect(t, h.say(key, "after the damage"), "error")
			if out[0].Text != damagedRefusal {
				t.Errorf("error = %q, want %q", out[0].Text, damagedRefusal)
			}
		}
		if n := calls() - before; n != 1 {
			t.Errorf("%d paid calls, want 1: none after the damage was found", n)
		}
		if r := h.admin.take(); len(r) != 0 {
			t.Errorf("the admin was told again: %s", dump(r))
		}
		if n := len(h.history(key1)); n != 2 {
			t.Errorf("history = %d messages, want the exchange from before the damage", n)
		}
	})
}
