package database

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/internal/testkit/testdb"
	"gorm.io/gorm"
)

// TestOpen_T7_FilesPrivate: a new database's folder is created 0700 and its
// file, WAL and SHM 0600, whatever the umask; an existing folder keeps its mode.
// covers T7
func TestOpen_T7_FilesPrivate(t *testing.T) {
	old := syscall.Umask(0) // the loosest umask: every mode below is the bot's own doing
	defer syscall.Umask(old)
	base := t.TempDir()
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(base, "state", "detour.db")
	db := openT(t, path)
	s := newStoreT(t, db)
	mustUpdate(t, s, "openai:a", func(p *failover.ProfileState) { p.ErrorCount = 1 })
	for _, tc := range []struct {
		path string
		want os.FileMode
	}{
		{filepath.Join(base, "state"), 0o700 | os.ModeDir},
		{path, 0o600},
		{path + "-wal", 0o600},
		{path + "-shm", 0o600},
		{base, 0o755 | os.ModeDir}, // existing: untouched
	} {
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeDir); got != tc.want {
			t.Errorf("%s: mode %v, want %v", filepath.Base(tc.path), got, tc.want)
		}
	}
}

// TestOpen_T7_ReadOnly: a database whose file, WAL and SHM (or folder) cannot be
// written is refused at start with an error that says so, and the process does
// not crash. As root (who writes anywhere) the folder is a read-only bind mount.
// covers T7
func TestOpen_T7_ReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "detour.db")
	// A database left with its WAL and SHM, as a killed process leaves it.
	db := openT(t, path)
	mustUpdate(t, newStoreT(t, db), "openai:a", func(p *failover.ProfileState) { p.ErrorCount = 1 })
	if _, err := os.Stat(path + "-shm"); err != nil {
		t.Fatalf("no SHM file to test with: %v", err)
	}
	roPath := readOnly(t, dir)
	roPath = filepath.Join(roPath, "detour.db")
	for _, in := range []string{roPath, "file:" + roPath + "?_busy_timeout=100"} {
		got, err := Open(ctx, DriverSQLite, in, nil)
		if err == nil {
			_ = Close(got)
			t.Fatalf("Open(%q) of a read-only database succeeded", in)
		}
		if msg := err.Error(); !strings.Contains(msg, "read-only") || !strings.Contains(msg, roPath) {
			t.Errorf("error %q does not say the database %q is read-only", msg, roPath)
		}
	}
}

// readOnly makes dir and its files read-only for this process and returns the
// path to use: dir itself (mode bits) for an ordinary user, a read-only bind
// mount of it for root. It skips t when that cannot be arranged.
func readOnly(t *testing.T, dir string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			_ = os.Chmod(filepath.Join(dir, e.Name()), 0o400)
		}
		_ = os.Chmod(dir, 0o500)
		t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
		return dir
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "--bind", dir, mnt).CombinedOutput(); err != nil {
		t.Skipf("running as root, and a read-only bind mount is not possible here (%v: %s): skipping the read-only test", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", mnt).CombinedOutput(); err != nil {
		t.Skipf("running as root, and remounting read-only is not possible here (%v: %s): skipping the read-only test", err, out)
	}
	return mnt
}

// TestOpen_T7_Corrupted: a damaged database file is refused at start with an
// error that says so and what to do; nothing is opened.
// covers T7
func TestOpen_T7_Corrupted(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"not a database at all", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(strings.Repeat("this is not SQLite ", 500)), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"a table's pages overwritten", func(t *testing.T, path string) {
			db, err := Open(context.Background(), DriverSQLite, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := newStoreT(t, db)
			for i := range 300 {
				mustUpdate(t, s, fmt.Sprintf("openai:p%03d", i), func(p *failover.ProfileState) {
					p.LastError = strings.Repeat("x", 400)
				})
			}
			if err := Close(db); err != nil { // checkpoints the WAL into the file
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			junk := []byte(strings.Repeat("\xde\xad\xbe\xef", 1024)) // one page
			for _, page := range []int64{2, 3, 5, 8} {
				if _, err := f.WriteAt(junk, page*4096); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "detour.db")
			tc.damage(t, path)
			db, err := Open(context.Background(), DriverSQLite, path, nil)
			if err == nil {
				_ = Close(db)
				t.Fatal("Open of a damaged database succeeded")
			}
			msg := err.Error()
			if !strings.Contains(msg, path) || !strings.Contains(msg, "is damaged") || !strings.Contains(msg, "restore it from a backup") {
				t.Errorf("error %q does not name %q and say it is damaged", msg, path)
			}
		})
	}
}

// TestStore_T7_ImmutableWhileRunning: the database, its WAL and its SHM turn
// read-only while the bot runs (chattr +i; the mapped SHM's pages written back
// first, as a busy system does within seconds, so the next write to them
// faults): every statement that would write them fails with the read-only
// problem, the process does not crash (before the write guard, a SIGBUS from
// the mapped SHM killed it inside go-sqlite3), and writes work again once the
// flag is gone. Both locking modes: shared (the write guard) and exclusive (the
// WAL index in memory: no SHM at all). The work runs in a child process, so a
// regression shows as a dead child, not a dead test binary. It needs root and
// a file system with the immutable flag (ext4, xfs, btrfs).
// covers T7
func TestStore_T7_ImmutableWhileRunning(t *testing.T) {
	testdb.RequireChattr(t)
	for _, tc := range []struct {
		name string
		dsn  func(path string) string
	}{
		{"shared", func(path string) string { return path }},
		{"exclusive", func(path string) string { return "file:" + path + "?_locking_mode=EXCLUSIVE" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "detour.db")
			t.Cleanup(func() { chattr(t, "-i", path, path+"-wal", path+"-shm") })
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childFaultEnv+"="+path, childDSNEnv+"="+tc.dsn(path))
			out, err := cmd.CombinedOutput()
			if err != nil {
				if len(out) > 2000 {
					out = out[:2000] // a crash's goroutine dump
				}
				t.Fatalf("the process did not finish cleanly (%v):\n%s", err, out)
			}
			if !strings.Contains(string(out), "fault child: ok") {
				t.Fatalf("child output:\n%s", out)
			}
		})
	}
}

// faultChild is the child of TestStore_T7_ImmutableWhileRunning. It prints what
// went wrong and returns 1, or prints "fault child: ok".
func faultChild(path, dsn string) int {
	ctx := context.Background()
	fail := func(format string, args ...any) int {
		fmt.Printf("fault child: "+format+"\n", args...)
		return 1
	}
	db, err := Open(ctx, DriverSQLite, dsn, nil)
	if err != nil {
		return fail("open: %v", err)
	}
	s, err := store.NewStateStore(db)
	if err != nil {
		return fail("state store: %v", err)
	}
	bump := func(key string) error {
		_, err := s.Update(ctx, key, func(p *failover.ProfileState) { p.ErrorCount++ })
		return err
	}
	for i := range 20 {
		if err := bump(fmt.Sprintf("openai:p%02d", i)); err != nil {
			return fail("update before: %v", err)
		}
	}
	exclusive := strings.Contains(dsn, "EXCLUSIVE")
	_, shmErr := os.Stat(path + "-shm")
	switch {
	case exclusive && shmErr == nil:
		return fail("exclusive locking mode, and yet a shared-memory file exists")
	case !exclusive && shmErr != nil:
		return fail("no shared-memory file to make read-only: %v", shmErr)
	}
	files := []string{path, path + "-wal"}
	if !exclusive {
		// Written back, the mapped pages are write-protected again: the next
		// write to one asks the file system, which refuses an immutable file
		// with SIGBUS.
		f, err := os.OpenFile(path+"-shm", os.O_RDWR, 0)
		if err != nil {
			return fail("open shm: %v", err)
		}
		err = f.Sync()
		_ = f.Close()
		if err != nil {
			return fail("sync shm: %v", err)
		}
		files = append(files, path+"-shm")
	}
	if out, err := exec.Command("chattr", append([]string{"+i"}, files...)...).CombinedOutput(); err != nil {
		return fail("chattr +i: %v %s", err, out)
	}
	readOnly := func(what string, err error) string {
		if err == nil {
			return what + " succeeded on read-only files"
		}
		if store.Problem(err) != problemReadOnly {
			return fmt.Sprintf("%s: error %q (problem %q) does not say the database is read-only", what, err, store.Problem(err))
		}
		return ""
	}
	for i := range 3 {
		if msg := readOnly("update", bump(fmt.Sprintf("openai:p%02d", i))); msg != "" {
			return fail("%s", msg)
		}
		_, err := s.Get(ctx, "openai:p00")
		if exclusive {
			// The WAL index is this process's memory: reading needs no write.
			if err != nil {
				return fail("get in exclusive mode: %v", err)
			}
		} else if msg := readOnly("get", err); msg != "" {
			return fail("%s", msg)
		}
		err = store.Transaction(ctx, db, func(tx *gorm.DB) error {
			return tx.Exec("UPDATE profile_states SET error_count = error_count + 1").Error
		})
		if msg := readOnly("transaction", err); msg != "" {
			return fail("%s", msg)
		}
	}
	if out, err := exec.Command("chattr", append([]string{"-i"}, files...)...).CombinedOutput(); err != nil {
		return fail("chattr -i: %v %s", err, out)
	}
	if err := bump("openai:p00"); err != nil {
		return fail("update once writable again: %v", err)
	}
	if got, err := s.Get(ctx, "openai:p00"); err != nil || got.ErrorCount != 2 {
		return fail("after: %+v, %v (want ErrorCount 2: one before, one after, none while read-only)", got, err)
	}
	if err := Close(db); err != nil {
		return fail("close: %v", err)
	}
	fmt.Println("fault child: ok")
	return 0
}

// chattr runs chattr with flag on the files that exist.
func chattr(t *testing.T, flag string, files ...string) {
	t.Helper()
	var have []string
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			have = append(have, f)
		}
	}
	if len(have) == 0 {
		return
	}
	if out, err := exec.Command("chattr", append([]string{flag}, have...)...).CombinedOutput(); err != nil {
		t.Errorf("chattr %s: %v %s", flag, err, out)
	}
}

// BenchmarkWriteGuard measures what the write guard adds to every SQLite
// statement (one access(2) call), beside one state read for scale.
func BenchmarkWriteGuard(b *testing.B) {
	path := filepath.Join(b.TempDir(), "detour.db")
	db := openT(b, path)
	s := newStoreT(b, db)
	if _, err := s.Update(context.Background(), "openai:a", func(p *failover.ProfileState) { p.ErrorCount = 1 }); err != nil {
		b.Fatal(err)
	}
	b.Run("check", func(b *testing.B) {
		g := &writeGuard{files: []string{path + "-shm"}}
		for b.Loop() {
			if err := g.check(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("state-read", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Get(context.Background(), "openai:a"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestLockingMode: a DSN asking for exclusive locking comes back without its
// journal mode (set after the locking mode, so the WAL index stays in memory);
// any other DSN comes back as it is.
// covers T7
func TestLockingMode(t *testing.T) {
	for _, tc := range []struct {
		in, out, journal string
		exclusive        bool
	}{
		{"file:x.db?_journal_mode=WAL&_busy_timeout=5000", "file:x.db?_journal_mode=WAL&_busy_timeout=5000", "", false},
		{"file:x.db?_locking_mode=NORMAL&_journal_mode=WAL", "file:x.db?_locking_mode=NORMAL&_journal_mode=WAL", "", false},
		{"file:x.db?_locking_mode=EXCLUSIVE&_journal_mode=WAL&_txlock=immediate", "file:x.db?_locking_mode=EXCLUSIVE&_txlock=immediate", "WAL", true},
		{"file:x.db?_locking=exclusive&_journal=delete", "file:x.db?_locking=exclusive", "DELETE", true},
		{"file:x.db?_locking_mode=Exclusive", "file:x.db?_locking_mode=Exclusive", "WAL", true},
		{"file:x.db?_locking_mode=EXCLUSIVE&_journal_mode=WAL;DROP", "file:x.db?_locking_mode=EXCLUSIVE&_journal_mode=WAL;DROP", "", false},
	} {
		out, journal, exclusive := lockingMode(tc.in)
		if out != tc.out || journal != tc.journal || exclusive != tc.exclusive {
			t.Errorf("lockingMode(%q) = %q, %q, %v; want %q, %q, %v", tc.in, out, journal, exclusive, tc.out, tc.journal, tc.exclusive)
		}
	}
}

// TestOpen_T7_ExclusiveOneProcess: with _locking_mode=EXCLUSIVE the database is
// in WAL mode with no shared-memory file, and a second handle (another process)
// is refused at once with an error that says why and what to do.
// covers T7
func TestOpen_T7_ExclusiveOneProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "detour.db")
	dsn := "file:" + path + "?_locking_mode=EXCLUSIVE&_busy_timeout=100"
	db := openT(t, dsn)
	mustUpdate(t, newStoreT(t, db), "openai:a", func(p *failover.ProfileState) { p.ErrorCount = 1 })
	var mode string
	if err := db.Raw("PRAGMA journal_mode").Scan(&mode).Error; err != nil || strings.ToLower(mode) != "wal" {
		t.Errorf("journal_mode = %q (%v), want wal", mode, err)
	}
	if _, err := os.Stat(path + "-shm"); err == nil {
		t.Error("exclusive locking mode made a shared-memory file: the WAL index is mapped after all")
	}
	start := time.Now()
	second, err := Open(context.Background(), DriverSQLite, dsn, nil)
	if err == nil {
		_ = Close(second)
		t.Fatal("a second handle opened a database held in exclusive locking mode")
	}
	if msg := err.Error(); !strings.Contains(msg, "in use by another process") || !strings.Contains(msg, "_locking_mode=EXCLUSIVE") || !strings.Contains(msg, path) {
		t.Errorf("error %q does not say the file is another process's in exclusive mode", msg)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusing the second handle took %v", d)
	}
}
