//go:build !percolator_mutants

package mutant

// Compiled reports whether this binary contains the mutants' hooks: false
// here, in a build without -tags percolator_mutants, where EnvVar has no
// effect.
const Compiled = false

// On reports whether the mutant name is active: never, in this build. A
// constant the compiler inlines, so a hook and its branch cost nothing.
func On(string) bool { return false }
