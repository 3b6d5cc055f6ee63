//go:build cgo

package sessions

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/alerts"
	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/testkit/testdb"
	"github.com/detourbot/detour/llm"
)

// BenchmarkTurnAlerts measures a turn's overhead when every turn makes an
// alert (a new conversation falling back from a failing primary: one
// fallback_started each), with no webhook, and with a webhook whose
// receiver answers at once (each event is then also a claim and a record
// in the shared database, written beside the turns), hangs (accepts the
// connection, never answers) or is down (nothing listens). The turn only
// queues the event (alerts.Dispatcher.Alert never blocks), so a hanging or
// dead receiver costs a turn nothing; a full queue drops events instead of
// slowing turns. Results in BENCHMARKS.md.
func BenchmarkTurnAlerts(b *testing.B) {
	b.Run("no-webhook", func(b *testing.B) { benchAlertTurns(b, "") })
	b.Run("answering-receiver", func(b *testing.B) {
		ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
		defer ok.Close()
		benchAlertTurns(b, ok.URL)
	})
	b.Run("hanging-receiver", func(b *testing.B) {
		hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // read to the end, so the server sees the client leave
			<-r.Context().Done()
		}))
		defer hang.Close()
		benchAlertTurns(b, hang.URL)
	})
	b.Run("down-receiver", func(b *testing.B) {
		down := httptest.NewServer(http.NotFoundHandler())
		url := down.URL
		down.Close() // nothing listens there now: every try is refused
		benchAlertTurns(b, url)
	})
}

func benchAlertTurns(b *testing.B, hookURL string) {
	mem := map[string]*memLLM{}
	h := newHarnessTB(b, testdb.SQLite, withMem(mem), func(_ *Config, h *harness) { h.logLevel = 100 }) // quiet
	mem["p1"].fail = func(llm.Request) error {
		return &failover.Failure{Reason: classify.ReasonTimeout, Class: classify.ClassTransient, Status: 503, Message: "unavailable"}
	}
	var d *alerts.Dispatcher
	if hookURL != "" {
		var err error
		d, err = alerts.New(context.Background(), alerts.Options{DB: h.db, Timeout: time.Hour,
			Hooks: []alerts.Hook{{URL: hookURL, Secret: []byte("bench")}}})
		if err != nil {
			b.Fatal(err)
		}
		d.Start()
		h.r.alerter = d
		h.r.st.recovered = h.r.alertRecovered
	}
	ctx := context.Background()
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		h.r.Handle(ctx, adapters.Inbound{Channel: "test", SessionKey: fmt.Sprintf("test:alert:%d", i), Text: "hello there"})
		if err := h.r.Drain(ctx); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-µs/turn")
	b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds()), "p99-µs/turn")
	if d != nil {
		cctx, cancel := context.WithCancel(ctx)
		cancel() // the receiver never answers: stop at once
		d.Close(cctx)
	}
	h.rec.take()
}
