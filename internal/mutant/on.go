//go:build percolator_mutants

package mutant

import (
	"fmt"
	"os"
	"sync/atomic"
)

// Compiled reports whether this binary contains the mutants' hooks: true
// here, in a build with -tags percolator_mutants.
const Compiled = true

// active is the set of active mutants, read from EnvVar at init; Set
// replaces it in tests. A package global, as a build tag's switch must
// be, and only in this build.
var active atomic.Pointer[map[string]bool]

// init reads EnvVar. An unknown name ends the process at once, with the
// list of the known ones: a misspelt mutant must not run a check that
// tests nothing.
func init() {
	names, err := Parse(os.Getenv(EnvVar))
	if err != nil {
		fmt.Fprintf(os.Stderr, "percolator: %s: %v", EnvVar, err)
		os.Exit(2)
	}
	store(names)
}

// On reports whether the mutant name is active. Safe for concurrent use.
func On(name string) bool {
	return (*active.Load())[name]
}

// Set makes names the active mutants, in place of those of EnvVar, and
// returns a function that restores the set before. For tests, which
// cannot set the environment before init; it exists only in this build.
// It panics on an unknown name.
func Set(names ...string) (restore func()) {
	for _, n := range names {
		if !Known(n) {
			panic(fmt.Sprintf("mutant.Set: unknown mutant %q; the mutants are:\n%s", n, Usage()))
		}
	}
	old := active.Load()
	store(names)
	return func() { active.Store(old) }
}

func store(names []string) {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	active.Store(&set)
}
