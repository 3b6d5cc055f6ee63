package fakeprovider

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"time"
)

// Phase is one period of a timed script, the shape of providers that flap: for
// For, a call is answered by the most specific of Rules that matches it (as
// scripted rules are; Times is ignored), and a call none matches by the
// scripted rules, or ok.
type Phase struct {
	For   time.Duration `json:"-"`
	Rules []Rule        `json:"rules"`
}

// MarshalJSON writes For as a Go duration string.
func (p Phase) MarshalJSON() ([]byte, error) {
	type plain Phase
	return json.Marshal(struct {
		plain
		For string `json:"for"`
	}{plain(p), p.For.String()})
}

// UnmarshalJSON reads a phase; for is a "4s" string or a number of seconds.
func (p *Phase) UnmarshalJSON(b []byte) error {
	type plain Phase
	var aux struct {
		plain
		For json.RawMessage `json:"for"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*p = Phase(aux.plain)
	d, err := parseDuration(aux.For)
	if err != nil {
		return fmt.Errorf("for: %w", err)
	}
	if d <= 0 {
		return fmt.Errorf("for: a phase lasts a positive time, got %s", aux.For)
	}
	p.For = d
	return nil
}

// Down reports whether the phase fails calls of provider (any rule of the
// provider, or of every provider, with a mode other than ok).
func (p Phase) Down(provider string) bool {
	for _, r := range p.Rules {
		if (r.Provider == "" || r.Provider == provider) && r.Mode != "" && r.Mode != ModeOK {
			return true
		}
	}
	return false
}

// timeline is the phases being played and when the first began.
type timeline struct {
	start  time.Time
	phases []Phase
}

// at returns the phase running at t, or -1 before the start and after the end.
func (tl *timeline) at(t time.Time) int {
	if tl == nil || t.Before(tl.start) {
		return -1
	}
	end := tl.start
	for i, p := range tl.phases {
		end = end.Add(p.For)
		if t.Before(end) {
			return i
		}
	}
	return -1
}

// Play starts playing phases now (the server's clock): phase i runs for its
// For after phase i-1 ended. It replaces a timeline already playing; after the
// last phase, calls are answered by the scripted rules again. Play(nil) stops.
// The call log records each call's mode as usual, so a caller can match calls
// to phases by their times (PhaseAt).
func (s *Server) Play(phases []Phase) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(phases) == 0 {
		s.timeline = nil
		return
	}
	s.timeline = &timeline{start: s.now(), phases: slices.Clone(phases)}
}

// PhaseAt returns the index of the phase playing at t, or -1.
func (s *Server) PhaseAt(t time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.timeline.at(t)
}

// phaseRule returns the rule of the phase playing now that answers a call, if
// any. s.mu is held.
func (s *Server) phaseRule(provider, model, keyID string) (Rule, bool) {
	i := s.timeline.at(s.now())
	if i < 0 {
		return Rule{}, false
	}
	var live []Rule
	for _, r := range s.timeline.phases[i].Rules {
		if r.matches(provider, model, keyID) {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return Rule{}, false
	}
	sort.SliceStable(live, func(a, b int) bool { return live[a].specificity() > live[b].specificity() })
	r := live[0]
	if r.Mode == "" {
		r.Mode = ModeOK
	}
	return r, true
}

func (s *Server) handlePhases(w http.ResponseWriter, r *http.Request) {
	var phases []Phase
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20)).Decode(&phases); err != nil {
		http.Error(w, "phases: "+err.Error(), http.StatusBadRequest)
		return
	}
	for i, p := range phases {
		for _, rule := range p.Rules {
			if rule.Mode != "" && !rule.Mode.Valid() {
				http.Error(w, fmt.Sprintf("phase %d: unknown mode %q", i, rule.Mode), http.StatusBadRequest)
				return
			}
		}
	}
	s.Play(phases)
	writeJSON(w, http.StatusOK, map[string]int{"phases": len(phases)})
}

// FlapOptions shape Flapping's script.
type FlapOptions struct {
	Providers []string      // the providers that flap
	Phases    int           // how many phases
	Min, Max  time.Duration // each phase lasts between Min and Max
	// Down are the modes of a failing provider, picked at random per provider
	// and phase (default: rate_limit with a 1 s Retry-After, server_500,
	// stall_after_first_chunk).
	Down []Rule
	// AllDown is the share of phases in which every provider fails at once
	// (default 0.15); in the others, from none up to Partial providers fail
	// (default 1: flaps hit one provider or all of them), each count alike.
	AllDown float64
	Partial int
	Seed    uint64 // the same seed gives the same script
}

// Flapping returns a timed script of providers that flap: phases of Min..Max
// in which none, some or (with probability AllDown) all providers fail, each in
// one of the Down modes. It is deterministic for a seed.
func Flapping(o FlapOptions) []Phase {
	down := o.Down
	if len(down) == 0 {
		down = []Rule{{Mode: ModeRateLimit, RetryAfter: time.Second}, {Mode: ModeServer500}, {Mode: ModeStallAfterFirstChunk}}
	}
	all := o.AllDown
	if all == 0 {
		all = 0.15
	}
	partial := o.Partial
	if partial <= 0 {
		partial = 1
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	out := make([]Phase, 0, o.Phases)
	n := len(o.Providers)
	for range o.Phases {
		d := o.Min
		if o.Max > o.Min {
			d += time.Duration(rng.Int64N(int64(o.Max - o.Min)))
		}
		k := 0 // how many providers fail
		if rng.Float64() < all {
			k = n
		} else if n > 1 {
			k = rng.IntN(min(partial, n-1) + 1) // at least one stays healthy
		}
		failing := rng.Perm(n)[:k]
		p := Phase{For: d}
		for _, i := range failing {
			r := down[rng.IntN(len(down))]
			r.Provider = o.Providers[i]
			p.Rules = append(p.Rules, r)
		}
		out = append(out, p)
	}
	return out
}
