// Package healthdb reads the health board's state (issue 38) from the shared
// database: the failover states of the configured providers, models and keys,
// and the sessions' records of the last 24 hours. Every replica reading the
// same database reads the same state, so health.Build gives the same board
// everywhere. It only reads, and needs no provider key.
package healthdb

import (
	"context"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/health"
	"github.com/detourbot/detour/internal/store"
	"github.com/detourbot/detour/sessions"
)

// Providers lists cfg's providers in file order, each with the models the
// configuration names (chains, then models: entries) and its keys (no secret).
func Providers(cfg *config.Config) []health.Provider {
	refs := cfg.ModelRefs()
	var extra []failover.ModelRef
	for ref := range cfg.Models {
		if !slices.Contains(refs, ref) {
			extra = append(extra, ref)
		}
	}
	slices.Sort(extra)
	refs = append(refs, extra...)
	profiles := cfg.EngineProfiles()
	var out []health.Provider
	for _, id := range cfg.ProviderIDs {
		p := health.Provider{Name: id, Profiles: profiles[id]}
		for _, ref := range refs {
			if prov, _ := ref.Split(); prov == id {
				p.Models = append(p.Models, ref)
			}
		}
		out = append(out, p)
	}
	return out
}

// Read reads the state the board of providers is computed from, at now.
func Read(ctx context.Context, db *gorm.DB, providers []health.Provider, policy failover.Policy, now time.Time) (health.State, error) {
	now = now.UTC()
	st := health.State{Now: now, Policy: policy, Providers: providers}
	var keys []string
	for _, p := range providers {
		keys = append(keys, failover.ProbeKey(p.Name))
		for _, ref := range p.Models {
			keys = append(keys, failover.StateKeys(ref, p.Profiles)...)
		}
		for _, pr := range p.Profiles {
			keys = append(keys, pr.ID)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	var err error
	if st.States, err = store.ReadStates(ctx, db, keys); err != nil {
		return st, err
	}
	day := now.Format(time.DateOnly)
	recs, err := sessions.ReadBoard(ctx, db, now.Add(-health.Window), day)
	if err != nil {
		return st, err
	}
	st.Records = records(recs, day)
	return st, nil
}

func records(r sessions.BoardRecords, day string) health.Records {
	out := health.Records{Incident: r.Incident, Day: day}
	for _, f := range r.Fallbacks {
		out.Fallbacks = append(out.Fallbacks, health.Fallback{Session: f.Session, Origin: f.Origin, Model: f.Model, Reason: f.Reason, Status: f.Status, Since: f.Since})
	}
	for _, n := range r.Notices {
		out.Notices = append(out.Notices, health.Notice{At: n.At, Session: n.Session, Selected: n.Selected, Active: n.Active, Reason: n.Reason})
	}
	for _, in := range r.Incidents {
		out.Incidents = append(out.Incidents, health.Incident{Opened: in.Opened, Closed: in.Closed})
	}
	for _, d := range r.Disables {
		out.Disables = append(out.Disables, health.Disable{At: d.At, Profile: d.Profile, Model: d.Model, Reason: d.Reason})
	}
	for _, u := range r.Usage {
		out.Usage = append(out.Usage, health.Usage{Model: u.Key, Calls: u.Calls, TokensIn: u.TokensIn, TokensOut: u.TokensOut, USD: u.USD})
	}
	return out
}
