// Command cold measures what classify costs a process that starts: package
// initialisation (run with GODEBUG=inittrace=1), and the first failure's
// Classify against the second.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/detourbot/detour/classify"
)

func hwm() string {
	b, _ := os.ReadFile("/proc/self/status")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(out, " ")
}

func main() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("after init: heap in use %d KiB, total alloc %d KiB, mallocs %d  %s\n", ms.HeapAlloc>>10, ms.TotalAlloc>>10, ms.Mallocs, hwm())
	r := classify.Response{Provider: "openai", Status: 429, Body: `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 14567, Requested 24754. Please try again in 18.642s.","type":"tokens","code":"rate_limit_exceeded"}}`}
	now := time.Now()
	t0 := time.Now()
	v := classify.Classify(r, now)
	d1 := time.Since(t0)
	var ms2 runtime.MemStats
	runtime.ReadMemStats(&ms2)
	t1 := time.Now()
	classify.Classify(r, now)
	d2 := time.Since(t1)
	fmt.Printf("first Classify %v (%s), second %v; first call allocated %d KiB in %d mallocs; heap in use %d KiB  %s\n",
		d1.Round(time.Microsecond), v.Reason, d2.Round(time.Microsecond), (ms2.TotalAlloc-ms.TotalAlloc)>>10, ms2.Mallocs-ms.Mallocs, ms2.HeapAlloc>>10, hwm())
}
