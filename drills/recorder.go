package drills

import (
	"context"
	"sync"
	"time"

	"github.com/detourbot/detour/adapters"
)

// channelName is the recorder's adapter name; the admin channel is forced to
// adminTarget so V4 reports are recorded too.
const (
	channelName = "drill"
	adminTarget = channelName + ":admin"
)

// Recorder is an adapters.Adapter that receives nothing and records every
// outbound message with the time it was sent. It is safe for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	out []Sent
}

// Sent is one recorded outbound message.
type Sent struct {
	adapters.Outbound
	At time.Time // wall-clock time of Send
}

var _ adapters.Adapter = (*Recorder)(nil)

// Name returns "drill".
func (r *Recorder) Name() string { return channelName }

// Run sends nothing; it returns when ctx ends.
func (r *Recorder) Run(ctx context.Context, _ chan<- adapters.Inbound) error {
	<-ctx.Done()
	return nil
}

// Send records out.
func (r *Recorder) Send(_ context.Context, out adapters.Outbound) error {
	r.mu.Lock()
	r.out = append(r.out, Sent{Outbound: out, At: time.Now()})
	r.mu.Unlock()
	return nil
}

// Len returns how many messages were recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.out)
}

// Since returns the messages recorded from index i on.
func (r *Recorder) Since(i int) []Sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.out) {
		return nil
	}
	return append([]Sent(nil), r.out[i:]...)
}
