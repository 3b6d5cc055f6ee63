package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

const canary = "sk-CANARY-7f3a9c1e5b2d4f60"

func testLogger(t testing.TB) (*slog.Logger, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	var mu sync.Mutex
	h := slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(h), &buf
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func openT(t testing.TB, path string) *gorm.DB {
	t.Helper()
	log, _ := testLogger(t)
	db, err := Open(context.Background(), path, log)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() { _ = Close(db) })
	return db
}

func newStoreT(t testing.TB, db *gorm.DB) *StateStore {
	t.Helper()
	s, err := NewStateStore(db)
	if err != nil {
		t.Fatalf("NewStateStore: %v", err)
	}
	return s
}

// modes are the two Update paths: prepared statements (SQLite fast path) and the
// generic gorm path (used for other databases).
var modes = []string{"sqlite", "gorm"}

func newStoreMode(t testing.TB, db *gorm.DB, mode string) *StateStore {
	t.Helper()
	s := newStoreT(t, db)
	if mode == "gorm" {
		s.sqlDB = nil
	}
	return s
}

func TestDSN(t *testing.T) {
	const defaults = "_journal_mode=WAL&_busy_timeout=5000&_txlock=immediate&_foreign_keys=on&_synchronous=NORMAL"
	tests := []struct {
		in, dsn, path string
	}{
		{"detour.db", "file:detour.db?" + defaults, "detour.db"},
		{"/var/lib/detour/detour.db", "file:/var/lib/detour/detour.db?" + defaults, "/var/lib/detour/detour.db"},
		{"odd?#%.db", "file:odd%3F%23%25.db?" + defaults, "odd?#%.db"},
		{":memory:", "file::memory:?" + defaults, ""},
		{"file:x.db", "file:x.db?" + defaults, "x.db"},
		{"file:x.db?_busy_timeout=100", "file:x.db?_busy_timeout=100&_journal_mode=WAL&_txlock=immediate&_foreign_keys=on&_synchronous=NORMAL", "x.db"},
		{"file:x.db?_fk=1&_sync=FULL&_journal=DELETE&_timeout=9&_txlock=deferred", "file:x.db?_fk=1&_sync=FULL&_journal=DELETE&_timeout=9&_txlock=deferred", "x.db"},
		{"file:///tmp/a%20b/x.db?mode=rwc", "file:///tmp/a%20b/x.db?mode=rwc&" + defaults, "/tmp/a b/x.db"},
		{"file://localhost/tmp/x.db", "file://localhost/tmp/x.db?" + defaults, "/tmp/x.db"},
		{"file:mem1?mode=memory&cache=shared", "file:mem1?mode=memory&cache=shared&" + defaults, ""},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			dsn, path, err := DSN(tc.in)
			if err != nil {
				t.Fatalf("DSN(%q): %v", tc.in, err)
			}
			if dsn != tc.dsn || path != tc.path {
				t.Errorf("DSN(%q) = %q, %q; want %q, %q", tc.in, dsn, path, tc.dsn, tc.path)
			}
		})
	}
	for _, bad := range []string{"", "  ", "file://hostonly", "file:x.db?a=%zz"} {
		if _, _, err := DSN(bad); err == nil {
			t.Errorf("DSN(%q): want error", bad)
		}
	}
}

// TestOpen_Settings checks that every handle gets the platforms.md 4.3 settings
// and that the parent directory is created.
func TestOpen_Settings(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, in, file string
	}{
		{"plain nested path", filepath.Join(dir, "a", "b", "detour.db"), filepath.Join(dir, "a", "b", "detour.db")},
		{"file dsn without params", "file:" + filepath.Join(dir, "c", "x.db"), filepath.Join(dir, "c", "x.db")},
		{"path with odd characters", filepath.Join(dir, "d?#%", "y.db"), filepath.Join(dir, "d?#%", "y.db")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := openT(t, tc.in)
			if _, err := os.Stat(tc.file); err != nil {
				t.Fatalf("database file not created: %v", err)
			}
			pragma := func(name string) string {
				var v string
				if err := db.Raw("PRAGMA " + name).Scan(&v).Error; err != nil {
					t.Fatalf("PRAGMA %s: %v", name, err)
				}
				return strings.ToLower(v)
			}
			for name, want := range map[string]string{
				"journal_mode": "wal",
				"busy_timeout": "5000",
				"foreign_keys": "1",
				"synchronous":  "1", // NORMAL
			} {
				if got := pragma(name); got != want {
					t.Errorf("PRAGMA %s = %q, want %q", name, got, want)
				}
			}
			sqlDB, err := db.DB()
			if err != nil {
				t.Fatal(err)
			}
			if got := sqlDB.Stats().MaxOpenConnections; got != 1 {
				t.Errorf("MaxOpenConnections = %d, want 1", got)
			}
			if !db.Migrator().HasTable("profile_states") {
				t.Error("Open did not migrate profile_states")
			}
			if !db.Config.TranslateError {
				t.Error("TranslateError is off")
			}
		})
	}
}

func TestOpen_Memory(t *testing.T) {
	db := openT(t, ":memory:")
	s := newStoreT(t, db)
	if _, err := s.Update(context.Background(), "k", func(p *failover.ProfileState) { p.ErrorCount = 2 }); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(context.Background(), "k")
	if err != nil || got.ErrorCount != 2 {
		t.Fatalf("Get = %+v, %v; want ErrorCount 2", got, err)
	}
}

func TestOpen_Errors(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	asDir := filepath.Join(dir, "isdir.db")
	if err := os.Mkdir(asDir, 0o750); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      string
		mention string      // the error names this path
		is      error       // errors.Is target, if any
		want    []string    // more substrings
		not     []string    // must not appear (secrets)
		skip    func() bool // skip condition
	}{
		{name: "parent is a file", in: filepath.Join(blocker, "sub", "detour.db"), mention: filepath.Join(blocker, "sub", "detour.db"), is: syscall.ENOTDIR, want: []string{"create directory"}},
		{name: "path is a directory", in: asDir, mention: asDir, want: []string{"open database"}},
		{name: "dsn params never echoed", in: "file:" + filepath.Join(blocker, "x.db") + "?_auth_pass=" + canary, mention: filepath.Join(blocker, "x.db"), not: []string{canary, "_auth_pass"}},
		{name: "empty", in: "", want: []string{"empty database path"}},
		{name: "read-only directory", in: filepath.Join(dir, "ro", "detour.db"), mention: filepath.Join(dir, "ro", "detour.db"),
			skip: func() bool {
				if os.Geteuid() == 0 {
					return true // root writes anywhere
				}
				_ = os.Mkdir(filepath.Join(dir, "ro"), 0o500)
				return false
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip != nil && tc.skip() {
				t.Skip("not applicable for this user")
			}
			log, buf := testLogger(t)
			db, err := Open(context.Background(), tc.in, log)
			if err == nil {
				_ = Close(db)
				t.Fatalf("Open(%q) succeeded, want error", tc.in)
			}
			msg := err.Error()
			if tc.mention != "" && !strings.Contains(msg, fmt.Sprintf("%q", tc.mention)) {
				t.Errorf("error %q does not name path %q", msg, tc.mention)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(msg, n) || strings.Contains(buf.String(), n) {
					t.Errorf("error or log leaks %q: %q / %q", n, msg, buf.String())
				}
			}
		})
	}
}

func TestStateStore_GetMissing(t *testing.T) {
	for _, mode := range modes {
		s := newStoreMode(t, openT(t, filepath.Join(t.TempDir(), mode+".db")), mode)
		got, err := s.Get(context.Background(), "openai:default")
		if err != nil {
			t.Fatal(err)
		}
		if want := (failover.ProfileState{Key: "openai:default"}); got != want {
			t.Fatalf("%s: Get missing = %+v, want %+v", mode, got, want)
		}
	}
}

func fullState(key string, now time.Time) failover.ProfileState {
	return failover.ProfileState{
		Key:            key,
		LastUsed:       now.Add(-time.Minute),
		LastFailure:    now,
		ErrorCount:     3,
		Consecutive:    2,
		CooldownUntil:  now.Add(5*time.Minute + 123456789*time.Nanosecond),
		CooldownReason: classify.ReasonRateLimit,
		CooldownModel:  "openai/gpt-4o-mini",
		DisabledUntil:  now.Add(5 * time.Hour),
		DisabledReason: classify.ReasonBilling,
		DisableCount:   2,
		RecoveryAt:     now.Add(90 * time.Second),
		LastError:      "rate_limit (HTTP 429): Rate limit reached for gpt-4o-mini",
		LastProbe:      now.Add(-30 * time.Second),
	}
}

// TestStateStore_D6_RestartMidCooldown: a restart in the middle of a cooldown
// reloads the state exactly.
// covers D6
func TestStateStore_D6_RestartMidCooldown(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) { testRestartMidCooldown(t, mode) })
	}
}

func testRestartMidCooldown(t *testing.T, mode string) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "detour.db")
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		paris = time.FixedZone("CET", 3600)
	}
	now := time.Date(2026, 11, 29, 22, 14, 5, 987654321, paris) // non-UTC input, nanoseconds
	states := []failover.ProfileState{
		fullState("openai:default", now),
		{Key: "model:openrouter/meta/llama-3", Consecutive: 1, LastFailure: now}, // mostly zero fields
		{Key: "anthropic:work", CooldownUntil: now.Add(time.Minute), CooldownReason: classify.ReasonOverloaded},
	}

	log, _ := testLogger(t)
	db, err := Open(ctx, path, log)
	if err != nil {
		t.Fatal(err)
	}
	s := newStoreMode(t, db, mode)
	for _, st := range states {
		got, err := s.Update(ctx, st.Key, func(p *failover.ProfileState) { *p = st })
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, utcState(st)) {
			t.Errorf("Update returned %+v, want %+v", got, utcState(st))
		}
	}
	if err := Close(db); err != nil {
		t.Fatal(err)
	}

	// "Restart": a new handle on the same file.
	db2 := openT(t, path)
	s2 := newStoreMode(t, db2, mode)
	for _, st := range states {
		got, err := s2.Get(ctx, st.Key)
		if err != nil {
			t.Fatal(err)
		}
		want := utcState(st)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("after restart %q:\n got %+v\nwant %+v", st.Key, got, want)
		}
		if got.CooldownUntil.Location() != time.UTC && !got.CooldownUntil.IsZero() {
			t.Errorf("CooldownUntil not in UTC: %v", got.CooldownUntil.Location())
		}
		if !got.CooldownUntil.Equal(st.CooldownUntil) {
			t.Errorf("CooldownUntil %v != %v", got.CooldownUntil, st.CooldownUntil)
		}
	}
	// Stored as INTEGER Unix nanoseconds.
	var raw struct {
		Typ string
		N   int64
	}
	if err := db2.Raw("SELECT typeof(cooldown_until) AS typ, cooldown_until AS n FROM profile_states WHERE key = ?", "openai:default").Scan(&raw).Error; err != nil {
		t.Fatal(err)
	}
	if want := states[0].CooldownUntil.UnixNano(); raw.Typ != "integer" || raw.N != want {
		t.Errorf("cooldown_until stored as %s %d, want integer %d", raw.Typ, raw.N, want)
	}
}

func utcState(s failover.ProfileState) failover.ProfileState {
	u := func(t time.Time) time.Time {
		if t.IsZero() {
			return time.Time{}
		}
		return t.UTC()
	}
	s.LastUsed, s.LastFailure, s.CooldownUntil = u(s.LastUsed), u(s.LastFailure), u(s.CooldownUntil)
	s.DisabledUntil, s.RecoveryAt, s.LastProbe = u(s.DisabledUntil), u(s.RecoveryAt), u(s.LastProbe)
	return s
}

func TestStateStore_UpdateKeepsKeyAndRejectsNil(t *testing.T) {
	ctx := context.Background()
	s := newStoreT(t, openT(t, filepath.Join(t.TempDir(), "d.db")))
	got, err := s.Update(ctx, "a:1", func(p *failover.ProfileState) { p.Key = "b:2"; p.ErrorCount = 1 })
	if err != nil {
		t.Fatal(err)
	}
	if got.Key != "a:1" {
		t.Errorf("Key = %q, want a:1", got.Key)
	}
	if other, _ := s.Get(ctx, "b:2"); other.ErrorCount != 0 {
		t.Errorf("fn changing Key wrote another row: %+v", other)
	}
	if _, err := s.Update(ctx, "a:1", nil); err == nil {
		t.Error("Update with nil fn: want error")
	}
	if _, err := NewStateStore(nil); err == nil {
		t.Error("NewStateStore(nil): want error")
	}
}

func TestStateStore_CanceledContext(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) { testCanceledContext(t, mode) })
	}
}

func testCanceledContext(t *testing.T, mode string) {
	s := newStoreMode(t, openT(t, filepath.Join(t.TempDir(), "d.db")), mode)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	if _, err := s.Update(ctx, "k", func(p *failover.ProfileState) { called = true; p.ErrorCount = 9 }); !errors.Is(err, context.Canceled) {
		t.Errorf("Update with canceled ctx: err = %v, want context.Canceled", err)
	}
	if called {
		t.Error("fn ran under a canceled context")
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with canceled ctx: err = %v, want context.Canceled", err)
	}
	if got, _ := s.Get(context.Background(), "k"); got.ErrorCount != 0 {
		t.Errorf("canceled update was stored: %+v", got)
	}
}

// TestStateStore_NoSecretInRow: a credential that slips into LastError never
// reaches a row, and the SQL log never carries bound values.
func TestStateStore_NoSecretInRow(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) { testNoSecretInRow(t, mode) })
	}
}

func testNoSecretInRow(t *testing.T, mode string) {
	ctx := context.Background()
	dir := t.TempDir()
	log, buf := testLogger(t)
	db, err := Open(ctx, filepath.Join(dir, "d.db"), log)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(db)
	// Log every statement.
	db.Logger = db.Logger.LogMode(logger.Info)
	s := newStoreMode(t, db, mode)
	leaks := []string{
		"invalid api key " + canary,
		"Authorization: Bearer " + canary,
		"GET /v1/models?key=" + canary,
		"slack token xoxb-CANARY-123-456 rejected",
		strings.Repeat("é", 400) + canary,
	}
	for i, msg := range leaks {
		key := fmt.Sprintf("openai:p%d", i)
		got, err := s.Update(ctx, key, func(p *failover.ProfileState) { p.LastError = msg })
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(got.LastError, "CANARY") {
			t.Errorf("returned LastError leaks: %q", got.LastError)
		}
		if len(got.LastError) > maxLastError {
			t.Errorf("LastError not bounded: %d bytes", len(got.LastError))
		}
		if !utf8.ValidString(got.LastError) {
			t.Errorf("LastError cut mid-rune")
		}
	}
	var dump []string
	if err := db.Raw("SELECT COALESCE(last_error,'') || '|' || key || '|' || COALESCE(cooldown_model,'') FROM profile_states").Scan(&dump).Error; err != nil {
		t.Fatal(err)
	}
	if len(dump) != len(leaks) {
		t.Fatalf("rows = %d, want %d", len(dump), len(leaks))
	}
	for _, row := range dump {
		if strings.Contains(row, "CANARY") {
			t.Errorf("row leaks a secret: %q", row)
		}
	}
	if buf.Len() == 0 {
		t.Fatal("info-level SQL log is empty; the check below would prove nothing")
	}
	if strings.Contains(buf.String(), "CANARY") {
		t.Errorf("SQL log leaks a secret: %s", buf.String())
	}
}

// TestStateStore_ConcurrentUpdates: 200 goroutines increment a few shared keys:
// no lost update, no "database is locked".
// covers D6
func TestStateStore_ConcurrentUpdates(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) { testConcurrentUpdates(t, mode) })
	}
}

func testConcurrentUpdates(t *testing.T, mode string) {
	ctx := context.Background()
	s := newStoreMode(t, openT(t, filepath.Join(t.TempDir(), "d.db")), mode)
	keys := []string{"openai:a", "openai:b", "model:openai/gpt-4o"}
	const workers = 200
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := keys[i%len(keys)]
			if _, err := s.Update(ctx, key, func(p *failover.ProfileState) { p.ErrorCount++ }); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Update: %v (busy=%v)", err, IsBusy(err))
	}
	total := 0
	for i, k := range keys {
		got, err := s.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		want := workers / len(keys)
		if i < workers%len(keys) {
			want++
		}
		if got.ErrorCount != want {
			t.Errorf("%s ErrorCount = %d, want %d", k, got.ErrorCount, want)
		}
		total += got.ErrorCount
	}
	if total != workers {
		t.Errorf("total = %d, want %d (lost updates)", total, workers)
	}
}

// TestStateStore_TwoReplicas: two handles on one file (two replicas) update the
// same key concurrently: no lost update.
// covers D6
func TestStateStore_TwoReplicas(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) { testTwoReplicas(t, mode) })
	}
}

func testTwoReplicas(t *testing.T, mode string) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	a := newStoreMode(t, openT(t, path), mode)
	b := newStoreMode(t, openT(t, path), "sqlite") // replicas may run either path
	const perReplica = 100
	var wg sync.WaitGroup
	errs := make(chan error, 2*perReplica)
	for _, s := range []*StateStore{a, b} {
		for range perReplica {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Update(ctx, "openai:shared", func(p *failover.ProfileState) {
					p.ErrorCount++
					p.CooldownReason = classify.ReasonRateLimit
				}); err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Update: %v (busy=%v)", err, IsBusy(err))
	}
	for name, s := range map[string]*StateStore{"a": a, "b": b} {
		got, err := s.Get(ctx, "openai:shared")
		if err != nil {
			t.Fatal(err)
		}
		if got.ErrorCount != 2*perReplica {
			t.Errorf("replica %s sees ErrorCount = %d, want %d", name, got.ErrorCount, 2*perReplica)
		}
	}
	// A write on one replica is visible on the other at once (no cache).
	if _, err := a.Update(ctx, "openai:shared", func(p *failover.ProfileState) { p.CooldownModel = "openai/o3" }); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Get(ctx, "openai:shared"); got.CooldownModel != "openai/o3" {
		t.Errorf("replica b does not see replica a's write: %+v", got)
	}
}

func TestScrub(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"rate_limit (HTTP 429): slow down", "rate_limit (HTTP 429): slow down"},
		{"bad key sk-proj-abcDEF123", "bad key [redacted]"},
		{"Bearer abc.def", "[redacted]"},
		{"url?api_key=zzz&x=1", "url?[redacted]&x=1"},
		{"xapp-1-A-2 and xoxp-9", "[redacted] and [redacted]"},
	}
	for _, tc := range tests {
		if got := scrub(tc.in); got != tc.want {
			t.Errorf("scrub(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// BenchmarkStateStoreUpdate measures one Update (read-modify-write transaction).
func BenchmarkStateStoreUpdate(b *testing.B) {
	ctx := context.Background()
	s := newStoreT(b, openT(b, filepath.Join(b.TempDir(), "bench.db")))
	keys := []string{"openai:a", "openai:b", "anthropic:c"}
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%len(keys)]
		i++
		if _, err := s.Update(ctx, k, func(p *failover.ProfileState) {
			p.ErrorCount++
			p.LastFailure = now
			p.CooldownUntil = now.Add(time.Minute)
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStateStoreGet measures one Get.
func BenchmarkStateStoreGet(b *testing.B) {
	ctx := context.Background()
	s := newStoreT(b, openT(b, filepath.Join(b.TempDir(), "bench.db")))
	if _, err := s.Update(ctx, "openai:a", func(p *failover.ProfileState) { p.ErrorCount = 1 }); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get(ctx, "openai:a"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestStateStore_NoOpUpdateWritesNothing(t *testing.T) {
	ctx := context.Background()
	db := openT(t, filepath.Join(t.TempDir(), "d.db"))
	s := newStoreT(t, db)
	if _, err := s.Update(ctx, "k", func(p *failover.ProfileState) { p.ErrorCount = 1 }); err != nil {
		t.Fatal(err)
	}
	var before int64
	if err := db.Raw("SELECT updated_at FROM profile_states WHERE key = ?", "k").Scan(&before).Error; err != nil {
		t.Fatal(err)
	}
	got, err := s.Update(ctx, "k", func(p *failover.ProfileState) {})
	if err != nil || got.ErrorCount != 1 || got.Key != "k" {
		t.Fatalf("no-op Update = %+v, %v", got, err)
	}
	var after int64
	if err := db.Raw("SELECT updated_at FROM profile_states WHERE key = ?", "k").Scan(&after).Error; err != nil {
		t.Fatal(err)
	}
	if after != before || before == 0 {
		t.Errorf("no-op Update rewrote the row: updated_at %v -> %v", before, after)
	}
	// A missing key with a no-op fn creates no row.
	if _, err := s.Update(ctx, "absent", func(p *failover.ProfileState) {}); err != nil {
		t.Fatal(err)
	}
	var n int64
	db.Raw("SELECT COUNT(*) FROM profile_states").Scan(&n)
	if n != 1 {
		t.Errorf("rows = %d, want 1", n)
	}
}

// TestOpen_ConcurrentReplicasStart: replicas starting together on a fresh file
// all open it (the table is created once, the others see it).
// covers D6
func TestOpen_ConcurrentReplicasStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fresh.db")
	const n = 6
	var wg sync.WaitGroup
	dbs := make([]*gorm.DB, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dbs[i], errs[i] = Open(context.Background(), path, slog.New(slog.DiscardHandler))
			if errs[i] == nil {
				_, errs[i] = NewStateStore(dbs[i])
			}
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("replica %d: %v", i, errs[i])
		}
		_ = Close(dbs[i])
	}
}
