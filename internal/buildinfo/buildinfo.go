// Package buildinfo says which lock-agent this is: the version and commit
// stamped in at build time, and the Go that built it. `lock-agent version`,
// HELLO and STATUS, and the lock_agent_build_info metric all read it here.
//
// A release stamps both with the linker (scripts/release does):
//
//	go build -ldflags "-X github.com/lock-agent/lock-agent/internal/buildinfo.version=0.2.0 \
//	    -X github.com/lock-agent/lock-agent/internal/buildinfo.commit=$(git rev-parse HEAD)" ./cmd/lock-agent
//
// Unstamped, the version is the module's (`go install ...@v0.2.0`) or
// "dev", and the commit is the one go build recorded from the checkout
// (with "-dirty" if it had changes) or "dev" (go run records none).
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set with -ldflags -X; empty when not stamped.
var (
	version string
	commit  string
)

// Unknown is the version and commit of a build that was not stamped and
// recorded nothing (go run, go test).
const Unknown = "dev"

// Info is one build's identity.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goversion"`
}

// Get returns this binary's Info: the stamped values, else what the Go
// toolchain recorded, else Unknown. It never returns an empty field.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(version, commit, bi)
}

// resolve picks each field: stamped, then recorded, then Unknown.
func resolve(version, commit string, bi *debug.BuildInfo) Info {
	info := Info{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if bi != nil {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		if info.Commit == "" {
			var revision, modified string
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					revision = s.Value
				case "vcs.modified":
					modified = s.Value
				}
			}
			if revision != "" && modified == "true" {
				revision += "-dirty"
			}
			info.Commit = revision
		}
	}
	if info.Version == "" {
		info.Version = Unknown
	}
	if info.Commit == "" {
		info.Commit = Unknown
	}
	return info
}
