package failover

import (
	"context"
	"time"
)

// probeKey is the state key of a provider's probe throttle (R11).
func probeKey(key string) string { return "probe:" + key }

// claimProbe claims the right to probe key (a provider, or provider+"#billing")
// now: at most one probe per interval, counted from the later of the last probe
// and since (the billing failure, R11), and never while a shared probe is in
// flight (A1). Only probes count, never the failures that started a cooldown.
// The claim is stored, so new sessions, restarts and replicas share it; when
// the store fails, this process's own memory decides.
func (e *Engine) claimProbe(ctx context.Context, key string, interval time.Duration, since, now time.Time) bool {
	won, wait := false, e.policy().SharedProbeWait
	_, err := e.store().Update(ctx, probeKey(key), func(s *ProfileState) {
		won = false // Update may run fn more than once
		last := s.LastProbe
		if since.After(last) {
			last = since
		}
		if probeStatusOf(*s, now, 0, wait) == probeRunning || !last.IsZero() && now.Sub(last) < interval {
			return
		}
		s.LastProbe = now
		won = true
	})
	if err != nil {
		return e.flightOf(key) == nil && e.throttle(key, interval, since, now)
	}
	return won
}

// throttle is claimProbe's process-local fallback for a store that fails.
func (e *Engine) throttle(key string, interval time.Duration, since, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.probeAt == nil {
		e.probeAt = make(map[string]time.Time)
	}
	last := e.probeAt[key]
	if since.After(last) {
		last = since
	}
	if !last.IsZero() && now.Sub(last) < interval {
		return false
	}
	e.probeAt[key] = now
	return true
}

func skipTTL(p *Policy) time.Duration {
	if p.FallbackSkipTTL <= 0 {
		return 0
	}
	return min(10*time.Minute, max(time.Second, p.FallbackSkipTTL))
}

func (e *Engine) skipCached(session string, ref ModelRef, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	until, ok := e.skips[session+"\x00"+string(ref)]
	return ok && now.Before(until)
}

func (e *Engine) addSkip(session string, ref ModelRef, until time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.skips == nil {
		e.skips = make(map[string]time.Time)
	}
	if len(e.skips) > 4096 {
		for k, t := range e.skips {
			if !t.After(until.Add(-11 * time.Minute)) {
				delete(e.skips, k)
			}
		}
	}
	e.skips[session+"\x00"+string(ref)] = until
}
