// Package peakrss reads a process's peak resident set size, for tests that
// re-execute themselves as a child and check how much memory one operation
// took (test only).
package peakrss

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// VmHWM reads the process's peak resident set size, in KiB, from
// /proc/self/status (Linux only).
func VmHWM() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}

// Require skips t where a peak cannot be measured: off Linux (VmHWM is read
// from /proc), under the race detector (its shadow memory inflates RSS several
// times) or when /proc/self/status has no VmHWM.
func Require(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("peak RSS is read from /proc/self/status (VmHWM), which only Linux has")
	}
	if raceEnabled {
		t.Skip("peak RSS: not measured under the race detector, whose shadow memory inflates RSS several times")
	}
	if _, err := VmHWM(); err != nil {
		t.Skipf("peak RSS: cannot read VmHWM here: %v", err)
	}
}

// Report is a child's last step: it reads the peak into *peak, writes rep as
// JSON on stdout for Child's caller, and returns the child's exit status.
func Report(rep any, peak *int64) int {
	var err error
	if *peak, err = VmHWM(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// Child re-executes the running test binary with env added, running no test
// (the binary's TestMain must see env and do the child's work), and returns
// what the child wrote on stdout.
func Child(t testing.TB, env ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	return out
}
