package health

import (
	"fmt"
	"testing"
	"time"

	"github.com/detourbot/detour/failover"
)

// bigState is a large deployment's state: 20 providers of 10 models and 5
// keys, a third of them cooling down, 500 sessions on a fallback, 2,000
// notices, 50 incidents and 200 disables in the window.
func bigState() State {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	st := State{Now: now, Policy: failover.DefaultPolicy(), States: map[string]failover.ProfileState{}}
	for i := range 20 {
		p := Provider{Name: fmt.Sprintf("p%d", i)}
		for j := range 10 {
			p.Models = append(p.Models, failover.ModelRef(fmt.Sprintf("p%d/m%d", i, j)))
		}
		for k := range 5 {
			id := fmt.Sprintf("p%d:k%d", i, k)
			p.Profiles = append(p.Profiles, failover.Profile{ID: id, Provider: p.Name, Type: failover.ProfileAPIKey})
			if (i+k)%3 == 0 {
				st.States[id] = failover.ProfileState{Key: id, CooldownUntil: now.Add(time.Minute), CooldownReason: "rate_limit"}
			}
		}
		st.Providers = append(st.Providers, p)
	}
	for i := range 500 {
		st.Records.Fallbacks = append(st.Records.Fallbacks, Fallback{Session: fmt.Sprintf("s%d", i), Origin: "p0/m0", Model: fmt.Sprintf("p%d/m0", 1+i%3), Reason: "rate_limit", Since: now.Add(-time.Hour)})
	}
	for i := range 2000 {
		n := Notice{At: now.Add(-time.Duration(2000-i) * 30 * time.Second), Session: fmt.Sprintf("s%d", i%500), Selected: "p0/m0", Active: "p1/m0", Reason: "overloaded"}
		if i%2 == 1 {
			n.Active = n.Selected
		}
		st.Records.Notices = append(st.Records.Notices, n)
	}
	for i := range 50 {
		at := now.Add(-time.Duration(50-i) * 25 * time.Minute)
		st.Records.Incidents = append(st.Records.Incidents, Incident{Opened: at, Closed: at.Add(3 * time.Minute)})
	}
	for i := range 200 {
		st.Records.Disables = append(st.Records.Disables, Disable{At: now.Add(-time.Duration(i) * time.Minute), Profile: fmt.Sprintf("p%d:k%d", i%20, i%5), Model: fmt.Sprintf("p%d/m0", i%20), Reason: "billing"})
	}
	return st
}

// BenchmarkBuild_Issue38: computing a large deployment's board, as the app
// does at most every 2 s and every Home tab or /status all does once.
func BenchmarkBuild_Issue38(b *testing.B) {
	st := bigState()
	b.ReportAllocs()
	for b.Loop() {
		Build(st, true)
	}
}
