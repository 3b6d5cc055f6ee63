package app

import (
	"context"
	"fmt"

	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/opsserver"
)

// OpsAddr is the address the operations endpoint listens on ("" when
// server.listen is not set).
func (s *System) OpsAddr() string {
	if s.ops == nil {
		return ""
	}
	return s.ops.Addr()
}

// startOps serves the operations endpoint until Close; the goroutine is the
// System's. A second Serve finds it running.
func (s *System) startOps() {
	s.opsMu.Lock()
	defer s.opsMu.Unlock()
	if s.ops == nil || s.opsCancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.opsCancel, s.opsDone = cancel, make(chan struct{})
	s.log.Info("operations endpoint", "listen", s.ops.Addr(), "paths", "/healthz /readyz /metrics")
	go func() {
		defer close(s.opsDone)
		if err := s.ops.Serve(ctx); err != nil {
			s.log.Error("operations endpoint stopped", "err", err)
		}
	}()
}

// stopOps stops the operations endpoint (or releases its port when it never
// served) and waits for its goroutine.
func (s *System) stopOps() {
	s.opsMu.Lock()
	defer s.opsMu.Unlock()
	if s.ops == nil {
		return
	}
	if s.opsCancel == nil {
		_ = s.ops.Close()
	} else {
		s.opsCancel()
		<-s.opsDone
	}
	s.ops = nil
}

// ping is /readyz's database check: one round trip on the pool.
func (s *System) ping(ctx context.Context) error {
	sqlDB, err := s.DB.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// availability reads, for /metrics, which configured models and which of their
// profiles are usable now, from the engine's durable state (shared by replicas).
// A profile counts as available when it can serve at least one configured
// model of its provider.
func (s *System) availability(ctx context.Context) (opsserver.Availability, error) {
	a := opsserver.Availability{Profiles: map[string]bool{}, Models: map[string]bool{}}
	profiles := s.Config.EngineProfiles()
	for _, ref := range s.Config.ModelRefs() {
		prov, _ := ref.Split()
		cs, err := s.Engine.CandidateStatus(ctx, ref, profiles[prov])
		if err != nil {
			return a, fmt.Errorf("availability of %s: %w", ref, err)
		}
		a.Models[string(ref)] = cs.Available
		for _, p := range cs.Profiles {
			if p.ID != "" {
				a.Profiles[p.ID] = a.Profiles[p.ID] || p.State == failover.StateOK
			}
		}
	}
	return a, nil
}

// metricNames are the names /metrics labels may carry (M6): the configured
// models (chains, agents, every models: entry) and providers.
func metricNames(cfg *config.Config) opsserver.Names {
	var n opsserver.Names
	for _, ref := range cfg.ModelRefs() {
		n.Models = append(n.Models, string(ref))
	}
	for ref := range cfg.Models {
		n.Models = append(n.Models, string(ref))
	}
	n.Providers = append(n.Providers, cfg.ProviderIDs...)
	return n
}
