package slack_test

import (
	"bytes"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters/slack"
	"github.com/detourbot/detour/internal/fakeprovider"
	"github.com/detourbot/detour/internal/testkit/fakeslack"
)

// firstWords records when the fake provider writes the first words of each
// answer (the first chunk with content), by request order.
type firstWords struct {
	mu  sync.Mutex
	got []time.Time
}

func (f *firstWords) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&firstWriter{ResponseWriter: w, f: f}, r)
	})
}

func (f *firstWords) all() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.got...)
}

type firstWriter struct {
	http.ResponseWriter
	f    *firstWords
	seen bool
}

func (w *firstWriter) Write(p []byte) (int, error) {
	if !w.seen && bytes.Contains(p, []byte(`"content":"`)) && !bytes.Contains(p, []byte(`"content":""`)) {
		w.seen = true
		w.f.mu.Lock()
		w.f.got = append(w.f.got, time.Now())
		w.f.mu.Unlock()
	}
	return w.ResponseWriter.Write(p)
}

func (w *firstWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// BenchmarkE2E_SlackStream_L2_FirstTokenToFirstText: the whole detour (router,
// failover engine, go-openai against the fake provider, the Slack adapter
// against fakeslack, wall clock). The provider writes its first words 50 ms into
// the answer; reported is the time from that write until chat.startStream
// reaches Slack: what the bot adds to the provider's own latency (median, p95
// and max over the ops).
func BenchmarkE2E_SlackStream_L2_FirstTokenToFirstText(b *testing.B) {
	defer slack.SetMethodLimits(map[string]int{})()
	fw := &firstWords{}
	e := startE2E(b, live, func(st *setup) {
		st.realClock = true
		st.fake.MethodLimits = map[string]int{"chat.startStream": 1 << 20, "chat.stopStream": 1 << 20, "chat.update": 1 << 20}
	}, func(st *setup) { st.wrapLLM = fw.wrap })
	e.llm.Script(fakeprovider.Rule{Provider: "p1", Mode: fakeprovider.ModeSlowStream, Delay: 50 * time.Millisecond, Reply: "first words"})
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		m := e.slack.Mention(fmt.Sprintf("C%d", i), "U1", "hi", "")
		start, err := e.slack.WaitCall(wait, func(c fakeslack.Call) bool {
			return c.Method == "chat.startStream" && c.Arg("thread_ts") == m.TS
		})
		if err != nil {
			b.Fatal(err)
		}
		e.drain()
		firsts := fw.all()
		lat = append(lat, start.Wall.Sub(firsts[len(firsts)-1]))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "ms-median")
	b.ReportMetric(ms(lat[len(lat)*95/100]), "ms-p95")
	b.ReportMetric(ms(lat[len(lat)-1]), "ms-max")
}
