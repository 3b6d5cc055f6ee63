package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/drills"
)

func drillRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), append([]string{"drill"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestDrill_List(t *testing.T) {
	code, out, _ := drillRun(t, "--list")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, n := range drills.Names() {
		if !strings.Contains(out, n) {
			t.Errorf("--list lacks %s", n)
		}
	}
}

func TestDrill_BadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"--format", "xml"},
		{"--scenario", "no-such-drill"},
		{"extra"},
		{"--config", "testdata/does-not-exist.yaml"},
		{"--log-level", "loud", "--scenario", "no-fault"},
	} {
		if code, _, _ := drillRun(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestDrill_DemoJSON runs a few drills on the embedded demo config (no
// ./config.yaml in this folder) and reads the JSON reports back.
func TestDrill_DemoJSON(t *testing.T) {
	code, out, stderr := drillRun(t, "--fast", "--scenario", "no-fault,a500,flapping-primary", "--format", "json")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	var reps []drills.Report
	if err := json.Unmarshal([]byte(out), &reps); err != nil {
		t.Fatal(err)
	}
	if len(reps) != 3 || reps[0].Config != demoConfigName || reps[1].Primary != "demo/primary" {
		t.Fatalf("reports = %+v", reps)
	}
	for _, r := range reps {
		if !r.Verdict.Pass || r.PaidCalls() == 0 {
			t.Errorf("%s: pass %v calls %d", r.Scenario, r.Verdict.Pass, r.PaidCalls())
		}
	}
}

// TestDrill_AllFast is the bar: every verdict passes on
// config.example.yaml and on the embedded demo. How long a run takes is a
// speed target, measured by BenchmarkDrill_AllFast (under a minute each): a
// wall-clock bound in a test fails on a loaded machine, not on a slow bot
// (issue 36).
func TestDrill_AllFast(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every drill")
	}
	for _, args := range [][]string{
		{"--config", "../../config.example.yaml"},
		{}, // the embedded demo
	} {
		start := time.Now()
		code, out, stderr := drillRun(t, append(args, "--fast", "--scenario", "all")...)
		t.Logf("%v: every drill in %s", args, time.Since(start).Round(time.Millisecond))
		if code != exitOK {
			var failed []string
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, "FAIL") {
					failed = append(failed, strings.TrimSpace(line))
				}
			}
			t.Errorf("%v: exit %d; failing:\n%s\n%s", args, code, strings.Join(failed, "\n"), stderr)
		}
	}
}

// A drill beside the live bot: the configuration's server.listen is held by
// another process, and every drill still runs, because drills never bind the
// operations port.
func TestDrill_LeavesTheOperationsPortAlone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	yaml := fmt.Sprintf("server: {listen: %q}\nproviders:\n  p1: {base_url: \"http://127.0.0.1:1/v1\"}\n  p2: {base_url: \"http://127.0.0.1:1/v1\"}\n"+
		"agents:\n  defaults:\n    model: {primary: p1/primary, fallbacks: [p2/fallback-1]}\n", ln.Addr().String())
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := drillRun(t, "--fast", "--config", cfg, "--scenario", "no-fault,a500")
	if code != exitOK {
		t.Fatalf("exit %d with server.listen busy:\n%s\n%s", code, out, stderr)
	}
}

// BenchmarkDrill_AllFast: every drill with --fast, on config.example.yaml and
// on the embedded demo; the target is under a minute each (s/run).
func BenchmarkDrill_AllFast(b *testing.B) {
	for _, c := range []struct {
		name string
		args []string
	}{{"example", []string{"--config", "../../config.example.yaml"}}, {"demo", nil}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				var out, errb bytes.Buffer
				start := time.Now()
				if code := dispatch(context.Background(), append(append([]string{"drill"}, c.args...), "--fast", "--scenario", "all"), strings.NewReader(""), &out, &errb); code != exitOK {
					b.Fatalf("exit %d\n%s", code, errb.String())
				}
				b.ReportMetric(time.Since(start).Seconds(), "s/run")
			}
		})
	}
}
