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

	"github.com/detourbot/detour/failover"
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
