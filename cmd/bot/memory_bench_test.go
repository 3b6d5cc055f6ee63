package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/detourbot/detour/internal/fakeprovider"
)

// BenchmarkConsoleSessionsMemory: one bot process answers 10,000 console
// sessions, one message each (jsonl, piped in at once), on a fresh SQLite
// file; it reports the process's peak resident memory (the kernel's
// ru_maxrss). DETOUR_BENCH_BINARIES runs an older build beside this one (see
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
				out, err := cmd.Output()
				if err != nil {
					b.Fatalf("%s: %v", bin.name, err)
				}
				if got := bytes.Count(out, []byte(`"type":"reply"`)); got != sessions {
					b.Fatalf("%s: %d replies, want %d", bin.name, got, sessions)
				}
				replies += sessions
				peak = max(peak, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) // KiB on Linux
				n++
			}
			b.ReportMetric(float64(peak)/1024, "peak-MiB")
			b.ReportMetric(float64(replies)/float64(n), "replies/op")
		})
	}
}
