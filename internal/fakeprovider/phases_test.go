package fakeprovider

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNow is a settable clock for the server.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// covers A1 drills: a timed script answers each call by the phase playing at
// its time, per provider; after the last phase the scripted rules answer again.
func TestPlay_PhasesByTime(t *testing.T) {
	clk := &fakeNow{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := start(t, WithNow(clk.now), WithRules(Rule{Provider: "c", Mode: ModeOverloaded529}))
	s.Play([]Phase{
		{For: 3 * time.Second, Rules: []Rule{{Provider: "a", Mode: ModeServer500}}},
		{For: 4 * time.Second, Rules: []Rule{{Mode: ModeRateLimit, RetryAfter: time.Second}, {Provider: "b", Mode: ModeOK}}},
	})
	status := func(provider string) int {
		resp := post(t, context.Background(), s.BaseURL(provider)+"/chat/completions", "k",
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		at       time.Duration
		provider string
		want     int
	}{
		{0, "a", 500}, {0, "b", 200}, {2 * time.Second, "c", 529}, // phase 1: a fails; c, left out, by its scripted rule
		{3 * time.Second, "a", 429}, {0, "b", 200}, {0, "c", 429}, // phase 2: every provider 429 but b (more specific)
		{4 * time.Second, "a", 200}, {0, "c", 529}, // after the script: the scripted rules again
	} {
		clk.add(c.at)
		if got := status(c.provider); got != c.want {
			t.Fatalf("at %v provider %s: HTTP %d, want %d", clk.now(), c.provider, got, c.want)
		}
	}
	if s.PhaseAt(clk.now()) != -1 {
		t.Fatal("PhaseAt after the end")
	}
	s.Reset()
	if s.PhaseAt(clk.now().Add(-5*time.Second)) != -1 {
		t.Fatal("Reset kept the timeline")
	}
}

// The same timed script over HTTP, for another process.
func TestPlay_HTTP(t *testing.T) {
	s := start(t)
	body := `[{"for": "2s", "rules": [{"provider": "a", "mode": "server_500"}]}, {"for": 1.5, "rules": []}]`
	resp, err := http.Post(s.URL()+"/_fake/phases", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || s.PhaseAt(time.Now()) != 0 {
		t.Fatalf("HTTP %d, phase %d", resp.StatusCode, s.PhaseAt(time.Now()))
	}
	for _, bad := range []string{`[{"for": "2s", "rules": [{"mode": "nope"}]}]`, `[{"for": 0}]`, `{`} {
		resp, err := http.Post(s.URL()+"/_fake/phases", "application/json", strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("%s: HTTP %d, want 400", bad, resp.StatusCode)
		}
	}
}

// Flapping is deterministic for a seed, keeps its phases within bounds, leaves
// at least one provider healthy except in the all-down phases, and survives a
// JSON round trip.
func TestFlapping(t *testing.T) {
	o := FlapOptions{Providers: []string{"a", "b", "c"}, Phases: 400, Min: 3 * time.Second, Max: 6 * time.Second, Seed: 7}
	p1, p2 := Flapping(o), Flapping(o)
	b1, _ := json.Marshal(p1)
	b2, _ := json.Marshal(p2)
	if string(b1) != string(b2) {
		t.Fatal("not deterministic")
	}
	var back []Phase
	if err := json.Unmarshal(b1, &back); err != nil || len(back) != len(p1) || back[3].For != p1[3].For {
		t.Fatalf("round trip: %v", err)
	}
	all, healthy := 0, 0
	for _, p := range p1 {
		if p.For < o.Min || p.For >= o.Max {
			t.Fatalf("phase of %v", p.For)
		}
		down := 0
		for _, prov := range o.Providers {
			if p.Down(prov) {
				down++
			}
		}
		switch down {
		case 3:
			all++
		case 0:
			healthy++
		}
	}
	if all < 30 || all > 100 || healthy < 100 {
		t.Fatalf("%d all-down and %d healthy phases of 400", all, healthy)
	}
	for _, p := range p1 {
		if n := len(p.Rules); n != 0 && n != 1 && n != 3 {
			t.Fatalf("a phase failing %d providers: flaps hit one or all (Partial 1)", n)
		}
	}
	o.Partial = 2
	two := 0
	for _, p := range Flapping(o) {
		if len(p.Rules) == 2 {
			two++
		}
	}
	if two == 0 {
		t.Fatal("Partial 2 never failed two providers")
	}
}
