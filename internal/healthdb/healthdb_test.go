package healthdb

import (
	"slices"
	"testing"

	"github.com/detourbot/detour/config"
	"github.com/detourbot/detour/failover"
)

// TestProviders_Issue38: the board lists the configured providers in file
// order, each with its models (the chains first, then models: entries) and
// its keys by id, never a secret.
// covers issue 38
func TestProviders_Issue38(t *testing.T) {
	yaml := `providers:
  zeta: {base_url: "http://127.0.0.1:1/v1"}
  alpha: {base_url: "http://127.0.0.1:2/v1"}
  local: {base_url: "http://127.0.0.1:3/v1"}
auth:
  profiles:
    zeta:main: {provider: zeta, key: "sk-CANARY-zeta"}
    alpha:main: {provider: alpha, key: "sk-CANARY-alpha"}
agents:
  defaults:
    model: {primary: zeta/big, fallbacks: [alpha/small, local/llama]}
models:
  zeta/extra: {selectable: true}
  alpha/unlisted: {}
`
	cfg, err := config.Parse("t.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := Providers(cfg)
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"zeta", "alpha", "local"}) {
		t.Fatalf("providers %v, want file order", names)
	}
	if want := []failover.ModelRef{"zeta/big", "zeta/extra"}; !slices.Equal(got[0].Models, want) {
		t.Errorf("zeta's models %v, want %v", got[0].Models, want)
	}
	if want := []failover.ModelRef{"alpha/small", "alpha/unlisted"}; !slices.Equal(got[1].Models, want) {
		t.Errorf("alpha's models %v, want %v", got[1].Models, want)
	}
	if len(got[0].Profiles) != 1 || got[0].Profiles[0].ID != "zeta:main" || len(got[2].Profiles) != 0 {
		t.Errorf("keys: %+v / %+v", got[0].Profiles, got[2].Profiles)
	}
}
