package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/detourbot/detour/failover"
)

// ReadStates returns the profile states of keys by key, as of one moment,
// without creating anything: a database where the table does not exist yet
// has none (the zero state with Key set). Readers that only look, such as the
// health board (issue 38) and `bot status`, use it instead of NewStateStore.
func ReadStates(ctx context.Context, db *gorm.DB, keys []string) (map[string]failover.ProfileState, error) {
	out := make(map[string]failover.ProfileState, len(keys))
	for _, k := range keys {
		out[k] = failover.ProfileState{Key: k}
	}
	if len(keys) == 0 || !db.WithContext(ctx).Migrator().HasTable(&stateRow{}) {
		return out, nil
	}
	cur, err := readStates(db.WithContext(ctx), cleanKeys(keys), false)
	if err != nil {
		return nil, fmt.Errorf("store: read profile states: %w", err)
	}
	for k, c := range cur {
		out[k] = c.ProfileState
	}
	return out, nil
}
