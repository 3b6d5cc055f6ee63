package main

import (
	"runtime/debug"
	"testing"
)

// The version a team can name: the -ldflags release first, then the module
// version Go stamps, then "devel"; the commit, its time and uncommitted changes
// come from the VCS settings.
func TestVersion_FromBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-12-02T12:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name, override, module string
		settings               []debug.BuildSetting
		short                  string
	}{
		{"release", "v1.2.3", "(devel)", vcs, "v1.2.3 (commit 0123456789ab, modified)"},
		{"tagged module", "", "v0.4.0", nil, "v0.4.0"},
		{"a clone", "", "v0.0.0-20261202120000-0123456789ab+dirty", vcs, "v0.0.0-20261202120000-0123456789ab+dirty"},
		{"go run", "", "(devel)", nil, "devel"},
	} {
		b := fromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: tc.module}, Settings: tc.settings}, tc.override)
		if got := b.Short(); got != tc.short {
			t.Errorf("%s: Short() = %q, want %q", tc.name, got, tc.short)
		}
	}
	if b := fromBuildInfo(nil, ""); b.Version != "devel" || b.Revision != "" {
		t.Errorf("no build info: %+v", b)
	}
	full := fromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "v1.2.3").String()
	if want := "v1.2.3 (commit 0123456789ab of 2026-12-02T12:00:00Z, with uncommitted changes; go1.26.0 "; len(full) < len(want) || full[:len(want)] != want {
		t.Errorf("String() = %q", full)
	}
}
