package classify

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// threadCPU is the CPU time (user + system) of the calling OS thread.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClassifyCPU is BenchmarkClassify that also reports the CPU time of
// the benchmark's thread per call (cpu-ns/op). On a shared machine ns/op counts
// the time other processes hold the core; cpu-ns/op does not.
func BenchmarkClassifyCPU(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			start := threadCPU()
			for b.Loop() {
				sinkVerdict = Classify(c.r, benchNow)
			}
			b.ReportMetric(float64(threadCPU()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}
