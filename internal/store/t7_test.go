package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/internal/testkit/testdb"
)

// TestStateStore_T7_DiskFull: when the disk holding the database fills up, an
// update fails with an error that says so (never a crash), the state read
// before is intact, and writes work again once there is room. It needs root to
// mount a small tmpfs.
// covers T7
func TestStateStore_T7_DiskFull(t *testing.T) {
	dir := testdb.SmallDisk(t, 1<<20)
	path := filepath.Join(dir, "detour.db")
	db := openT(t, path)
	s := newStoreT(t, db)
	mustUpdate(t, s, "openai:a", func(p *failover.ProfileState) { p.ErrorCount = 1 })
	filler := testdb.FillDisk(t, dir)

	var err error
	for i := 0; i < 200 && err == nil; i++ { // until the WAL needs space it cannot get
		_, err = s.Update(context.Background(), fmt.Sprintf("openai:%03d", i), func(p *failover.ProfileState) {
			p.LastError = strings.Repeat("y", 400)
		})
	}
	if err == nil {
		t.Fatal("updates kept succeeding on a full disk")
	}
	if store.Problem(err) != "the disk holding the database is full" || !strings.Contains(err.Error(), "full") {
		t.Errorf("error %q (problem %q) does not say the disk is full", err, store.Problem(err))
	}
	if got := mustGet(t, s, "openai:a"); got.ErrorCount != 1 {
		t.Errorf("state before the disk filled = %+v, want ErrorCount 1", got)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if got := mustUpdate(t, s, "openai:a", func(p *failover.ProfileState) { p.ErrorCount++ }); got.ErrorCount != 2 {
		t.Errorf("after freeing space: %+v", got)
	}
}
