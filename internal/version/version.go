// Package version holds the build's version, set by the linker (see the Makefile).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags "-X github.com/trustplane/trustplane/internal/version.Version=..."
// (and ...version.Commit=...), as make build and make run do. Without Commit, the commit
// is Go's own stamp, which go build makes in a checkout unless -buildvcs=false, and go
// run never makes.
var (
	Version = "dev"
	Commit  = ""
)

// String is the one-line version report of `trustplane version`.
func String() string {
	commit := Commit
	if commit == "" {
		commit = vcsRevision()
	}
	return fmt.Sprintf("trustplane %s (commit %s, %s, %s/%s)", Version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func vcsRevision() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
