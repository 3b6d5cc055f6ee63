package sessions

import (
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/detourbot/detour/failover"
)

// NewRouter fills in no defaults (config owns them): a setting it cannot run
// with is an error that names it. Needs no database: the checks come first.
func TestNewRouter_RefusesMissingSettings(t *testing.T) {
	opts := Options{DB: &gorm.DB{}, Engine: &failover.Engine{}, Clients: func(string, string) (LLM, error) { return nil, nil }}
	good := Config{Primary: "p1/alpha", ProbeInterval: 1, MaxMessageBytes: 1}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no primary", func(c *Config) { c.Primary = "" }, "Config.Primary is required"},
		{"no probe interval", func(c *Config) { c.ProbeInterval = 0 }, "Config.ProbeInterval must be positive"},
		{"no message cap", func(c *Config) { c.MaxMessageBytes = 0 }, "Config.MaxMessageBytes must be positive"},
	} {
		cfg := good
		tc.edit(&cfg)
		r, err := NewRouter(cfg, opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewRouter = %v, %v; want an error saying %q", tc.name, r, err, tc.want)
		}
	}
}
