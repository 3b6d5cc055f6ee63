package sessions

import (
	"strings"

	"github.com/detourbot/detour/failover"
)

// Model selection: which model a session uses and why, and the chain its
// turns walk (S1-S5, K1-K5, O1, O5).

// selection is which model a session uses and why.
type selection struct {
	requested  failover.ModelRef // Chain[0]
	source     failover.Source
	selected   failover.ModelRef // what the session selected (the fallback's origin when auto)
	base       failover.ModelRef // configured primary (or the agent's model)
	baseSource failover.Source
	configured []failover.ModelRef
	override   []failover.ModelRef // agent fallbacks; nil = not set
}

func (r *Router) agentFor(key, channel string) *Agent {
	for i := range r.cfg.Agents {
		a := &r.cfg.Agents[i]
		for _, m := range a.Match {
			if m != "" && (m == channel || strings.HasPrefix(key, m)) {
				return a
			}
		}
	}
	return nil
}

// configured is the selection of a conversation of agent a (nil = the
// defaults) that chose nothing itself: the configured model and chain.
func (c *Config) configured(a *Agent) selection {
	s := selection{base: c.Primary, baseSource: failover.SourceDefault, configured: c.Fallbacks}
	if a != nil && a.Model != "" {
		s.base, s.baseSource = a.Model, failover.SourceAgent
		if a.Fallbacks != nil {
			s.override = append([]failover.ModelRef{}, (*a.Fallbacks)...)
		}
	}
	s.requested, s.source, s.selected = s.base, s.baseSource, s.base
	return s
}

// Chain is the chain a new conversation of the agent with id agent walks ("" or
// an unknown id: the defaults), as the router derives it (S1-S5, K1-K5): what
// bot check prints.
func (c *Config) Chain(agent string) []failover.ModelRef {
	for i := range c.Agents {
		if agent != "" && c.Agents[i].ID == agent {
			return chainFor(c.configured(&c.Agents[i]))
		}
	}
	return chainFor(c.configured(nil))
}

func (r *Router) selectionFor(e *Entry, channel string) selection {
	s := r.cfg.configured(r.agentFor(e.Key, channel))
	if ov := e.override(); ov != "" { // O5: the persisted override wins
		s.requested, s.source, s.selected = ov, e.source(), ov
		if s.source == failover.SourceAuto {
			s.selected = s.base
			if e.FallbackOrigin != "" {
				s.selected = failover.ModelRef(e.FallbackOrigin)
			}
		}
	}
	return s
}

// selectedSource is why the selected model is selected. On an auto override the
// session answers from a fallback (source auto) but its selection is still the
// configured model (default or agent).
func (s selection) selectedSource() failover.Source {
	if s.source != failover.SourceAuto {
		return s.source
	}
	if s.selected == s.base {
		return s.baseSource
	}
	return failover.SourceDefault
}

func (r *Router) systemPrompt(key, channel string) string {
	if a := r.agentFor(key, channel); a != nil && a.SystemPrompt != "" {
		return a.SystemPrompt
	}
	return r.cfg.SystemPrompt
}

// chainFor builds the candidate chain of a selection (S1-S5, K1-K5).
func chainFor(s selection) []failover.ModelRef {
	in := failover.ChainInput{Requested: s.requested, Source: s.source, Primary: s.base, Configured: s.configured}
	if s.override != nil {
		in.Override = s.override
	}
	return failover.BuildChain(in)
}

// overrideState is a snapshot of the O1 fields, for compare-and-set writes.
type overrideState struct {
	Provider, Model, Source string
	Profile, ProfileSource  string
	ProfileCompaction       int
	Origin, Reason          string
	Status                  int // HTTP status behind Reason
}

func snapshot(e *Entry) overrideState {
	return overrideState{e.ProviderOverride, e.ModelOverride, e.ModelOverrideSource,
		e.AuthProfileOverride, e.AuthProfileOverrideSource, e.AuthProfileOverrideCompactionCount,
		e.FallbackOrigin, e.FallbackReason, e.FallbackStatus}
}

func (o overrideState) modelMatch() map[string]any {
	return map[string]any{"provider_override": o.Provider, "model_override": o.Model, "model_override_source": o.Source}
}

func (o overrideState) modelFields() map[string]any {
	return map[string]any{"provider_override": o.Provider, "model_override": o.Model, "model_override_source": o.Source,
		"fallback_origin": o.Origin, "fallback_reason": o.Reason, "fallback_status": o.Status}
}

func (o overrideState) profileMatch() map[string]any {
	return map[string]any{"auth_profile_override": o.Profile, "auth_profile_override_source": o.ProfileSource}
}

func (o overrideState) profileFields() map[string]any {
	return map[string]any{"auth_profile_override": o.Profile, "auth_profile_override_source": o.ProfileSource,
		"auth_profile_override_compaction_count": o.ProfileCompaction}
}

func merge(ms ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
