package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
)

// FindTestdata finds testdata/name from the working directory up, or in
// the module's source tree this package was built from (go run from
// anywhere): the shipped corpus and graph.
func FindTestdata(name string) (string, error) {
	var candidates []string
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			candidates = append(candidates, filepath.Join(d, "testdata", name))
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok { // cmd/percolator/internal/cli/self.go
		candidates = append(candidates, filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "testdata", name))
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	return "", Usagef("cannot find testdata/%s from here: give FILE", name)
}

// CommandSelf runs this program (the test binary too, through
// PERCOLATOR_AS_MAIN) with args.
func CommandSelf(ctx context.Context, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), "PERCOLATOR_AS_MAIN=1")
	return cmd
}

// Build is what the binary was built from: the module version, the VCS
// revision (when known; Modified if the tree was) and the Go version.
type Build struct {
	Version, Revision string
	Modified          bool
	Go                string
}

// BuildOf reads the binary's build information; ok is false when it has
// none.
func BuildOf() (b Build, ok bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Build{}, false
	}
	b = Build{Version: bi.Main.Version, Go: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b, true
}

// Version is the module version, the VCS revision it was built from
// (when known) and the Go version.
func Version() string {
	b, ok := BuildOf()
	if !ok {
		return "percolator (unknown version)"
	}
	v := "percolator " + b.Version
	if b.Revision != "" {
		dirty := ""
		if b.Modified {
			dirty = "+dirty"
		}
		v += " (" + b.Revision + dirty + ")"
	}
	return v + " " + b.Go
}
