package alerts

import (
	"context"
	"testing"

	"github.com/detourbot/detour/failover/failovertest"
)

// BenchmarkAlert is what a turn pays to raise an alert: queuing it for a
// hook, and dropping it when the hook's queue is full. The hook's sender is
// held in a hanging receiver, so only the benchmark takes events off the
// queue (with the timer stopped).
func BenchmarkAlert(b *testing.B) {
	for _, full := range []bool{false, true} {
		name := "queued"
		if full {
			name = "queue-full"
		}
		b.Run(name, func(b *testing.B) {
			clock := failovertest.NewClock(t0)
			r := newReceiver(b, "k", clock.Now)
			r.hold = make(chan struct{})
			const size = 256
			d := newTestDispatcher(b, r, clock, Options{QueueSize: size, MaxAttempts: 1})
			d.Alert(sample(0))
			<-r.in // the sender is busy from now on
			q := d.hooks[0].q
			e := sample(1)
			if full {
				for range size {
					d.Alert(e)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if !full && i%size == size-1 {
					b.StopTimer()
					for len(q) > 0 {
						<-q
					}
					b.StartTimer()
				}
				d.Alert(e)
			}
			b.StopTimer()
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			d.Close(ctx)
		})
	}
}
