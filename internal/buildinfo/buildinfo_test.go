package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	recorded := &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}}
	dirty := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name            string
		version, commit string
		bi              *debug.BuildInfo
		want            Info
	}{
		{"stamped values win over what go build recorded", "0.2.0", "f00d", recorded, Info{"0.2.0", "f00d", runtime.Version()}},
		{"unstamped, go install's module version and the recorded commit", "", "", recorded, Info{"v0.3.0", "abc123", runtime.Version()}},
		{"a build from a changed checkout says so and is not a version", "", "", dirty, Info{"dev", "abc123-dirty", runtime.Version()}},
		{"go run records nothing: dev and dev", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, Info{"dev", "dev", runtime.Version()}},
		{"no build info at all: dev and dev", "", "", nil, Info{"dev", "dev", runtime.Version()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolve(tc.version, tc.commit, tc.bi); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestGetHasNoEmptyField(t *testing.T) {
	i := Get()
	if i.Version == "" || i.Commit == "" || i.GoVersion == "" {
		t.Fatalf("%+v", i)
	}
}
