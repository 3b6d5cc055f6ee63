// Package health is the provider health board (issue 38): for every provider,
// model and key its state, the fallbacks in force, the last 24 hours as a short
// timeline and today's calls and spend, computed by one pure function (Build)
// from the shared state (State), so every replica shows the same board. The
// platforms only render the Board: Text here for the terminal, Block Kit in
// adapters/slack, a message in adapters/discord; `bot status --json` writes it
// as it is (its JSON is a stable, versioned schema: docs/operations.md).
//
// An admin's board names keys (profile ids), the sessions on a fallback and
// the spend; everyone else's has models and their states only. Neither ever
// holds a secret.
package health

import (
	"cmp"
	"slices"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
)

// Version is the schema version of Board's JSON; it changes only when a field
// is removed or changes meaning (new fields may appear at any version).
const Version = 1

// AdminChannel is the audience of the admin channel (admin.channel), which
// only admins read: a board function asked for it gives the admin's board.
// No user id is ever this word (they are "slack:U…", "discord:…").
const AdminChannel = "admin-channel"

// Window is how far back the timeline goes.
const Window = 24 * time.Hour

// MaxEvents bounds the timeline; older events are counted in Board.Omitted.
const MaxEvents = 20

// maxSessions bounds the sessions an admin's fallback lists.
const maxSessions = 5

// States of providers, models and keys.
const (
	Answering   = "answering"    // usable now
	CoolingDown = "cooling_down" // usable again at Until (D1, D2, R7)
	Disabled    = "disabled"     // a key disabled until Until (D3, D4)
	Expired     = "expired"      // a key past its expires_at
	Down        = "down"         // the provider failed as a down provider fails: only a check goes to it (E1)
)

// Timeline event kinds.
const (
	FallbackStarted = "fallback_started"
	FallbackCleared = "fallback_cleared"
	AllDown         = "all_down"
	KeyDisabled     = "key_disabled"
)

// Provider is what the board knows of one configured provider: no secret.
type Provider struct {
	Name     string
	Models   []failover.ModelRef // the provider's models the configuration names
	Profiles []failover.Profile  // its keys (none: a provider without credentials)
}

// State is everything the board is computed from: the configuration's
// providers and policy, and what the shared database holds now.
type State struct {
	Now       time.Time
	Policy    failover.Policy
	Providers []Provider
	// States are the failover states by key (profile ids, model:, noauth: and
	// probe: keys); a missing key is the zero state.
	States  map[string]failover.ProfileState
	Records Records
}

// Records are the sessions' records the board reads (sessions.BoardRecords).
type Records struct {
	Fallbacks []Fallback // sessions on an automatic fallback now
	Notices   []Notice   // fallback and cleared notices of the window, oldest first
	Incidents []Incident // all-down incidents open in the window, oldest first
	Disables  []Disable  // failed calls that disable a key, oldest first
	Usage     []Usage    // today's usage by model
	Incident  bool       // an all-down incident is open now
	Day       string     // the UTC day of Usage, 2006-01-02
}

// Fallback is one session answered by an automatic fallback.
type Fallback struct {
	Session, Origin, Model, Reason string
	Status                         int
	Since                          time.Time
}

// Notice is one fallback (Selected != Active) or clear (Selected == Active).
type Notice struct {
	At                       time.Time
	Session                  string
	Selected, Active, Reason string
}

// Incident is one all-down period; Closed is zero while it is open.
type Incident struct{ Opened, Closed time.Time }

// Disable is one failed call that disables its key (billing, auth_permanent).
type Disable struct {
	At                     time.Time
	Profile, Model, Reason string
}

// Usage is one model's calls and spend of the day.
type Usage struct {
	Model               string
	Calls               int64
	TokensIn, TokensOut int64
	USD                 float64
}

// Board is the health board as one audience sees it. Its JSON is `bot status
// --json`'s output (schema in docs/operations.md).
type Board struct {
	Version   int            `json:"version"`
	At        time.Time      `json:"at"`
	Admin     bool           `json:"admin"`
	AllDown   *Period        `json:"all_down,omitempty"` // all models unavailable now (V4)
	Providers []ProviderView `json:"providers"`
	Fallbacks []FallbackView `json:"fallbacks"`
	Timeline  []Event        `json:"timeline"`
	Omitted   int            `json:"timeline_omitted,omitempty"` // older events left out (MaxEvents)
	Today     *Today         `json:"today,omitempty"`            // admins only
}

// Period is an all-down period in force.
type Period struct {
	Since time.Time `json:"since,omitzero"`
}

// ProviderView is one provider's state.
type ProviderView struct {
	Name         string      `json:"name"`
	State        string      `json:"state"`
	Reason       string      `json:"reason,omitempty"`
	CheckedAt    time.Time   `json:"checked_at,omitzero"`    // its latest check (A1, E1, R11)
	NextCheckAt  time.Time   `json:"next_check_at,omitzero"` // when down: the next check (E2)
	FailedChecks int         `json:"failed_checks,omitempty"`
	Models       []ModelView `json:"models"`
	Keys         []KeyView   `json:"keys,omitempty"` // admins only
}

// ModelView is one model's state.
type ModelView struct {
	Ref       string    `json:"ref"`
	State     string    `json:"state"`
	Until     time.Time `json:"until,omitzero"`
	Reason    string    `json:"reason,omitempty"`
	CheckedAt time.Time `json:"checked_at,omitzero"` // its latest probe (R11, /recover)
}

// KeyView is one key's (auth profile's) state: admins only.
type KeyView struct {
	ID        string    `json:"id"`
	State     string    `json:"state"`
	Until     time.Time `json:"until,omitzero"`
	Reason    string    `json:"reason,omitempty"`
	Model     string    `json:"model,omitempty"` // a cooldown scoped to one model (D2)
	LastUsed  time.Time `json:"last_used,omitzero"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
}

// FallbackView is the sessions moved from one model to another for one reason.
type FallbackView struct {
	From     string    `json:"from"`
	To       string    `json:"to"`
	Reason   string    `json:"reason,omitempty"`
	Count    int       `json:"sessions"`
	Since    time.Time `json:"since,omitzero"`
	Sessions []string  `json:"session_keys,omitempty"` // admins only, at most 5
}

// Event is one line of the timeline: consecutive events alike are one, with
// Count.
type Event struct {
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"`
	From     string    `json:"from,omitempty"`
	To       string    `json:"to,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Provider string    `json:"provider,omitempty"`
	Key      string    `json:"key,omitempty"` // admins only
	Count    int       `json:"count,omitempty"`
	End      time.Time `json:"end,omitzero"` // an all-down period that ended
	Seconds  int64     `json:"seconds,omitempty"`
	Ongoing  bool      `json:"ongoing,omitempty"`
}

// Today is the day's calls and spend: admins only.
type Today struct {
	Day       string       `json:"day"`
	Calls     int64        `json:"calls"`
	TokensIn  int64        `json:"tokens_in"`
	TokensOut int64        `json:"tokens_out"`
	USD       float64      `json:"usd"`
	Models    []ModelUsage `json:"models"`
}

// ModelUsage is one model's share of Today.
type ModelUsage struct {
	Model string  `json:"model"`
	Calls int64   `json:"calls"`
	USD   float64 `json:"usd"`
}

// Build computes the board admin or everyone else sees from st. It is pure.
func Build(st State, admin bool) Board {
	now := st.Now.UTC()
	b := Board{Version: Version, At: now, Admin: admin, Providers: []ProviderView{}, Fallbacks: []FallbackView{}, Timeline: []Event{}}
	get := func(k string) failover.ProfileState {
		s, ok := st.States[k]
		if !ok {
			s.Key = k
		}
		return s
	}
	for _, p := range st.Providers {
		b.Providers = append(b.Providers, provider(&st.Policy, p, get, now, admin))
	}
	b.Fallbacks = fallbacks(st.Records.Fallbacks, admin)
	if st.Records.Incident {
		b.AllDown = &Period{}
		if n := len(st.Records.Incidents); n > 0 && st.Records.Incidents[n-1].Closed.IsZero() {
			b.AllDown.Since = st.Records.Incidents[n-1].Opened.UTC()
		}
	}
	b.Timeline, b.Omitted = timeline(st.Records, now, admin)
	if admin {
		b.Today = today(st.Records)
	}
	return b
}

func provider(pol *failover.Policy, p Provider, get func(string) failover.ProfileState, now time.Time, admin bool) ProviderView {
	row := get(failover.ProbeKey(p.Name))
	v := ProviderView{Name: p.Name, State: Answering, Models: []ModelView{}}
	if !row.LastProbe.IsZero() {
		v.CheckedAt = row.LastProbe.UTC()
	}
	down := failover.ProviderDown(row)
	if down {
		v.State, v.Reason, v.FailedChecks = Down, string(row.CooldownReason), row.Consecutive
		v.NextCheckAt = failover.NextCheckAt(pol, row).UTC()
		if v.NextCheckAt.Before(now) {
			v.NextCheckAt = now // due: the next turn that needs it checks it
		}
	}
	answering := 0
	for _, ref := range p.Models {
		keys := failover.StateKeys(ref, p.Profiles)
		states := make([]failover.ProfileState, len(keys))
		for i, k := range keys {
			states[i] = get(k)
		}
		cs := failover.CandidateStatusOf(ref, p.Profiles, states, now)
		m := ModelView{Ref: string(ref), State: Answering}
		if lp := states[0].LastProbe; !lp.IsZero() { // the model's own state (StateKeys' first)
			m.CheckedAt = lp.UTC()
		}
		switch {
		case down:
			m.State, m.Reason = Down, v.Reason
		case cs.Available:
			answering++
		default:
			m.State, m.Until, m.Reason = CoolingDown, cs.Until.UTC(), string(cs.Reason)
			if cs.Model.State == failover.StateOK && allDisabled(cs.Profiles) {
				m.State = Disabled
			}
		}
		v.Models = append(v.Models, m)
	}
	if !down && len(v.Models) > 0 && answering == 0 {
		// None of its models answers: the provider is as its first model is.
		v.State, v.Reason = v.Models[0].State, v.Models[0].Reason
	}
	if admin {
		for _, pr := range p.Profiles {
			v.Keys = append(v.Keys, key(pr, get(pr.ID), now))
		}
	}
	return v
}

func allDisabled(ps []failover.ProfileStatus) bool {
	for _, p := range ps {
		if p.State != failover.StateDisabled && p.State != failover.StateExpired {
			return false
		}
	}
	return len(ps) > 0
}

// key is a key's own state, whatever model: a disable first (it is longer),
// then a cooldown, with its model scope (D2).
func key(p failover.Profile, s failover.ProfileState, now time.Time) KeyView {
	k := KeyView{ID: p.ID, State: Answering}
	if !s.LastUsed.IsZero() {
		k.LastUsed = s.LastUsed.UTC()
	}
	if !s.LastProbe.IsZero() {
		k.CheckedAt = s.LastProbe.UTC()
	}
	switch {
	case s.DisabledUntil.After(now):
		k.State, k.Until, k.Reason = Disabled, s.DisabledUntil.UTC(), string(s.DisabledReason)
	case s.CooldownUntil.After(now):
		k.State, k.Until, k.Reason, k.Model = CoolingDown, s.CooldownUntil.UTC(), string(s.CooldownReason), s.CooldownModel
	case !p.ExpiresAt.IsZero() && !p.ExpiresAt.After(now):
		k.State, k.Until, k.Reason = Expired, p.ExpiresAt.UTC(), string(classify.ReasonAuth)
	}
	return k
}

func fallbacks(fs []Fallback, admin bool) []FallbackView {
	out := []FallbackView{}
	for _, f := range fs {
		i := slices.IndexFunc(out, func(v FallbackView) bool { return v.From == f.Origin && v.To == f.Model && v.Reason == f.Reason })
		if i < 0 {
			out = append(out, FallbackView{From: f.Origin, To: f.Model, Reason: f.Reason})
			i = len(out) - 1
		}
		v := &out[i]
		v.Count++
		if !f.Since.IsZero() && (v.Since.IsZero() || f.Since.Before(v.Since)) {
			v.Since = f.Since.UTC()
		}
		if admin && len(v.Sessions) < maxSessions {
			v.Sessions = append(v.Sessions, f.Session)
		}
	}
	slices.SortStableFunc(out, func(a, b FallbackView) int {
		return cmp.Or(b.Count-a.Count, cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// timeline is the window's events, newest first, alike neighbours merged, at
// most MaxEvents; it returns how many older ones were left out.
func timeline(r Records, now time.Time, admin bool) ([]Event, int) {
	from := now.Add(-Window)
	evs := make([]Event, 0, len(r.Notices)+len(r.Incidents)+len(r.Disables))
	last := map[string]string{} // session -> the fallback it was on, for the clear's From
	for _, n := range r.Notices {
		if n.Selected == n.Active {
			e := Event{At: n.At.UTC(), Kind: FallbackCleared, From: last[n.Session], To: n.Active}
			delete(last, n.Session)
			evs = append(evs, e)
			continue
		}
		last[n.Session] = n.Active
		evs = append(evs, Event{At: n.At.UTC(), Kind: FallbackStarted, From: n.Selected, To: n.Active, Reason: n.Reason})
	}
	for _, in := range r.Incidents {
		e := Event{At: in.Opened.UTC(), Kind: AllDown}
		end := in.Closed
		if end.IsZero() {
			e.Ongoing, end = true, now
		} else {
			e.End = end.UTC()
		}
		e.Seconds = int64(end.Sub(in.Opened) / time.Second)
		evs = append(evs, e)
	}
	seen := map[string]bool{} // one line per key and reason: the first failure disabled it
	for _, d := range r.Disables {
		if seen[d.Profile+"\x00"+d.Reason] {
			continue
		}
		seen[d.Profile+"\x00"+d.Reason] = true
		prov, _ := failover.ModelRef(d.Model).Split()
		e := Event{At: d.At.UTC(), Kind: KeyDisabled, Provider: prov, Reason: d.Reason}
		if admin {
			e.Key = d.Profile
		}
		evs = append(evs, e)
	}
	evs = slices.DeleteFunc(evs, func(e Event) bool {
		return e.At.Before(from) && (e.Kind != AllDown || (!e.Ongoing && e.End.Before(from)))
	})
	slices.SortStableFunc(evs, func(a, b Event) int { return a.At.Compare(b.At) })
	// Alike neighbours (many sessions falling back at once) are one line;
	// merged in place.
	merged := evs[:0]
	for _, e := range evs {
		if n := len(merged); n > 0 && alike(merged[n-1], e) {
			merged[n-1].Count++
			continue
		}
		e.Count = 1
		merged = append(merged, e)
	}
	slices.Reverse(merged)
	omitted := 0
	if len(merged) > MaxEvents {
		omitted = len(merged) - MaxEvents
		merged = merged[:MaxEvents]
	}
	return slices.Clone(merged), omitted // the board keeps MaxEvents, not the window's backing array
}

func alike(a, b Event) bool {
	return a.Kind != AllDown && a.Kind == b.Kind && a.From == b.From && a.To == b.To && a.Reason == b.Reason &&
		a.Provider == b.Provider && a.Key == b.Key
}

func today(r Records) *Today {
	t := &Today{Day: r.Day, Models: []ModelUsage{}}
	for _, u := range r.Usage {
		t.Calls += u.Calls
		t.TokensIn += u.TokensIn
		t.TokensOut += u.TokensOut
		t.USD += u.USD
		t.Models = append(t.Models, ModelUsage{Model: u.Model, Calls: u.Calls, USD: u.USD})
	}
	return t
}
