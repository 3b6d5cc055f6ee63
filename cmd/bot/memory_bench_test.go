package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/internal/fakeprovider"
)

// BenchmarkConsoleSessionsMemory: one bot process answers 10,000 console
// sessions, one message each (jsonl, piped in at once), on a fresh SQLite
// file; it reports the process's peak resident memory (the kernel's
// VmHWM). DETOUR_BENCH_BINARIES runs an older build beside this one (see
// availability_bench_test.go). Target: < 65 MB (issue 37).
func BenchmarkConsoleSessionsMemory(b *testing.B) {
	const sessions = 10_000
	srv := fakeprovider.New()
	if err := srv.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	var in bytes.Buffer
	for i := range sessions {
		line, _ := json.Marshal(map[string]string{"session": fmt.Sprintf("s%d", i), "user": fmt.Sprintf("u%d", i), "text": fmt.Sprintf("hello %d", i)})
		in.Write(append(line, '\n'))
	}
	for _, bin := range benchBinaries(b) {
		b.Run(bin.name, func(b *testing.B) {
			var peak, replies int64
			n := 0
			for b.Loop() {
				dir := b.TempDir()
				cfg := filepath.Join(dir, "config.yaml")
				yaml := fmt.Sprintf(`storage: {driver: sqlite, dsn: %q}
channels:
  console: {enabled: true, format: jsonl}
providers:
  p1: {base_url: %q}
auth:
  profiles:
    p1:main: {provider: p1, key: "sk-mem-p1-0001"}
agents:
  defaults:
    model: {primary: p1/a}
limits: {max_paid_attempts_per_minute: 1000000}
`, filepath.Join(dir, "detour.db"), srv.BaseURL("p1"))
				if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
					b.Fatal(err)
				}
				cmd := exec.Command(bin.path, "run", "--config", cfg, "--log-level", "error")
				cmd.Stdin = bytes.NewReader(in.Bytes())
				var out bytes.Buffer
				cmd.Stdout = &out
				logf, err := os.Create(filepath.Join(dir, "bot.log"))
				if err != nil {
					b.Fatal(err)
				}
				cmd.Stderr = logf
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				hwm := watchHWM(cmd.Process.Pid)
				err = cmd.Wait()
				_ = logf.Close()
				if err != nil {
					log, _ := os.ReadFile(logf.Name())
					b.Fatalf("%s: %v\n%s", bin.name, err, log)
				}
				if got := bytes.Count(out.Bytes(), []byte(`"type":"reply"`)); got != sessions {
					b.Fatalf("%s: %d replies, want %d", bin.name, got, sessions)
				}
				peak = max(peak, hwm())
				replies += sessions
				n++
			}
			if peak == 0 {
				b.Skip("peak RSS is read from /proc/<pid>/status (VmHWM), which only Linux has")
			}
			b.ReportMetric(float64(peak)/1024, "peak-MiB")
			b.ReportMetric(float64(replies)/float64(n), "replies/op")
		})
	}
}

// watchHWM reads the peak resident memory (VmHWM, KiB) of process pid every
// 10 ms until it exits; the returned func stops and gives the last reading.
// Not the child's rusage: Linux counts in ru_maxrss the parent's memory the
// child shared until its exec, so that grows with the benchmark process.
func watchHWM(pid int) func() int64 {
	var (
		mu   sync.Mutex
		last int64
		done = make(chan struct{})
		quit = make(chan struct{})
	)
	go func() {
		defer close(done)
		path := fmt.Sprintf("/proc/%d/status", pid)
		for {
			if b, err := os.ReadFile(path); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
						if kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
							mu.Lock()
							last = max(last, kb)
							mu.Unlock()
						}
					}
				}
			}
			select {
			case <-quit:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(quit)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}
