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

// Version is the module version, the VCS revision it was built from
// (when known) and the Go version.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "percolator (unknown version)"
	}
	v := "percolator " + bi.Main.Version
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if rev != "" {
		v += " (" + rev + modified + ")"
	}
	return v + " " + bi.GoVersion
}
