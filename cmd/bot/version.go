package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is set for a release with -ldflags "-X main.version=v1.2.3"; it wins
// over what the build info says.
var version = ""

// buildInfo is what a binary knows of its own build: the version a team can
// name, and the commit it came from.
type buildInfo struct {
	Version  string // v1.2.3, a Go pseudo-version, or "devel"
	Revision string // the VCS commit, shortened to 12 characters; "" = unknown
	Time     string // the commit's time (RFC 3339); "" = unknown
	Modified bool   // built from a work tree with uncommitted changes
	Go       string // the Go toolchain
}

// readBuildInfo reads the version from the -ldflags override, else from the
// module version and VCS settings Go stamps into every binary it builds
// (runtime/debug.ReadBuildInfo). `go run` and builds outside a repository have
// no VCS settings: the version is then "devel".
func readBuildInfo() buildInfo {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, version)
}

// fromBuildInfo is readBuildInfo's pure part: override (the -ldflags version)
// first, then the module version, then "devel"; bi may be nil.
func fromBuildInfo(bi *debug.BuildInfo, override string) buildInfo {
	b := buildInfo{Version: override, Go: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			b.Go = bi.GoVersion
		}
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value[:min(12, len(s.Value))]
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

// Short is the version with the commit when the version does not already
// name it: "v1.2.3", "devel (commit 0123456789ab, modified)".
func (b buildInfo) Short() string {
	var extra []string
	if b.Revision != "" && !strings.Contains(b.Version, b.Revision) {
		extra = append(extra, "commit "+b.Revision)
	}
	if b.Modified && !strings.HasSuffix(b.Version, "+dirty") {
		extra = append(extra, "modified")
	}
	if len(extra) == 0 {
		return b.Version
	}
	return b.Version + " (" + strings.Join(extra, ", ") + ")"
}

// String is what `bot version` prints after "detour ": everything known.
func (b buildInfo) String() string {
	rev := b.Revision
	if rev == "" {
		rev = "unknown commit"
	} else {
		rev = "commit " + rev
	}
	if b.Time != "" {
		rev += " of " + b.Time
	}
	if b.Modified {
		rev += ", with uncommitted changes"
	}
	return fmt.Sprintf("%s (%s; %s %s/%s)", b.Version, rev, b.Go, runtime.GOOS, runtime.GOARCH)
}
