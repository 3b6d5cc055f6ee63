package config

import (
	"maps"
	"slices"
	"testing"
)

// The ${VAR} scanners the commands that read a configuration without its
// secrets use (bot drill, bot history, bot status; issue 36).
func TestRefs_PartDSNAndDefaults(t *testing.T) {
	data := []byte(`storage: {driver: postgres, dsn: "postgres://app:${PG_PASS}@db/detour"}
providers:
  az: {base_url: "https://${AZ_HOST}/openai", api: azure}
  p1: {base_url: ${P1_URL}}
  p2: {base_url: "http://127.0.0.1:${PORT:-8080}/v1"}
auth:
  profiles:
    p1:main: {provider: p1, key: "${P1_KEY}"}
    p2:main: {provider: p2, key: ${P2_KEY:-none}}
# dsn: ${COMMENTED}
notes: "$${LITERAL}"
`)
	names := func(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }
	if got := names(PartRefs(data)); !slices.Equal(got, []string{"AZ_HOST", "PG_PASS", "PORT"}) {
		t.Errorf("PartRefs = %v", got)
	}
	if got := names(DSNRefs(data)); !slices.Equal(got, []string{"PG_PASS"}) {
		t.Errorf("DSNRefs = %v", got)
	}
	if got := names(DefaultedRefs(data)); !slices.Equal(got, []string{"P2_KEY", "PORT"}) {
		t.Errorf("DefaultedRefs = %v", got)
	}
}
