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
	b.Run("corpus", func(b *testing.B) { // every corpus case in turn: the mean per failure
		var rs []Response
		for _, p := range corpusFiles {
			for _, c := range loadCorpus(b, p) {
				rs = append(rs, c.response())
			}
		}
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		b.ReportAllocs()
		start := threadCPU()
		i := 0
		for b.Loop() {
			sinkVerdict = Classify(rs[i%len(rs)], benchNow)
			i++
		}
		b.ReportMetric(float64(threadCPU()-start)/float64(b.N), "cpu-ns/op")
	})
}

// BenchmarkClassifyCPUSlowestCorpusCase times, in thread CPU, the corpus case
// that takes longest (found first by a quick pass): the per-failure bound is a
// bound on the worst case, not the average. The quick pass takes each case's
// least wall time over five rounds: one round, as it once used, picks whichever
// case another process interrupted and missed a body that took 150 µs; the
// least of five drops the interruptions. (Thread CPU cannot be read over so
// short a round: it moves in steps of up to 2 ms here.)
func BenchmarkClassifyCPUSlowestCorpusCase(b *testing.B) {
	var slowest Response
	var worst time.Duration
	for _, p := range corpusFiles {
		for _, c := range loadCorpus(b, p) {
			r := c.response()
			best := time.Duration(1<<63 - 1)
			for range 5 {
				start := time.Now()
				for range 4 {
					sinkVerdict = Classify(r, benchNow)
				}
				best = min(best, time.Since(start))
			}
			if best > worst {
				worst, slowest = best, r
			}
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	start := threadCPU()
	for b.Loop() {
		sinkVerdict = Classify(slowest, benchNow)
	}
	b.ReportMetric(float64(threadCPU()-start)/float64(b.N), "cpu-ns/op")
}
