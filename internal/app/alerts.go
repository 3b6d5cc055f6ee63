package app

import (
	"context"
	"log/slog"

	"gorm.io/gorm"

	"github.com/detourbot/detour/alerts"
	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/failover"
)

// newAlerts builds the webhooks' dispatcher of alerts.webhooks (issue 38),
// with its claims in the shared database; nil when none is configured. The
// caller starts and closes it.
func newAlerts(ctx context.Context, cfg *config.Config, db *gorm.DB, clock failover.Clock, log *slog.Logger) (*alerts.Dispatcher, error) {
	if len(cfg.Alerts.Webhooks) == 0 {
		return nil, nil
	}
	hooks := make([]alerts.Hook, len(cfg.Alerts.Webhooks))
	for i, w := range cfg.Alerts.Webhooks {
		hooks[i] = alerts.Hook{URL: w.URL, Secret: []byte(w.Secret.Reveal())}
		for _, e := range w.Events {
			hooks[i].Events = append(hooks[i].Events, alerts.Type(e))
		}
	}
	d, err := alerts.New(ctx, alerts.Options{Hooks: hooks, DB: db, Clock: clock, Log: log})
	if err != nil {
		return nil, err
	}
	return d, nil
}
