package mutant

import (
	"fmt"
	"strings"
)

// EnvVar names the environment variable that selects a process's active
// mutants in a binary built with -tags percolator_mutants: a
// comma-separated list of names, read once at init. Children inherit it,
// so one variable reaches every process a run starts.
const EnvVar = "PERCOLATOR_MUTANT"

// The mutants' names. The hooks use these constants, so a misspelt name
// does not compile.
const (
	SkipLockCheck      = "skip-lock-check"
	SkipRollback       = "skip-rollback"
	SecondariesFirst   = "secondaries-first"
	RepeatTimestamp    = "repeat-timestamp"
	StaleRange         = "stale-range"
	PushSecondary      = "push-secondary"
	OnePhaseEarlyTS    = "one-phase-early-ts"
	AsyncSkipSecondary = "async-skip-secondary"
	CommitStampEarly   = "commit-stamp-early"
	FreshReadStale     = "fresh-read-stale"
	StableUnacked      = "stable-unacked"
)

// Mutant describes one mutant.
type Mutant struct {
	Name string
	// Invariant is the DESIGN.md protocol invariant it breaks.
	Invariant int
	// Description says in one line what the mutant does.
	Description string
}

// Names returns every mutant, in a fixed order, in a new slice.
func Names() []Mutant {
	return []Mutant{
		{SkipLockCheck, 2, "a transactional read reads past a lock older than its start_ts instead of waiting on or resolving it"},
		{SkipRollback, 5, "rolling back a lock erases it without leaving a rollback record at its start_ts, nor a fence at an empty primary or at a cleared notification's prewrite"},
		{SecondariesFirst, 4, "commit writes the secondaries' commit records before the primary's"},
		{RepeatTimestamp, 1, "the oracle client hands out the timestamp before again, about one call in 50"},
		{FreshReadStale, 1, "a server reads a transaction's first reads below a timestamp it handed out to an earlier such read, most of the time, instead of a new one"},
		{StableUnacked, 1, "an embedded commit returns without raising the newest acknowledged commit_ts, so a read-only snapshot taken above that may start below it"},
		{StaleRange, 1, "the oracle client fetches timestamps ahead of its callers and serves later callers from them"},
		{PushSecondary, 2, "a read through locks pushes the lock it met instead of its primary, so the commit point never sees a secondary's push"},
		{OnePhaseEarlyTS, 2, "a one-phase commit takes its commit timestamp from the oracle before its conflict-checking write, with no mark on its row, so a transaction above it may read the row before the write"},
		{CommitStampEarly, 2, "a commit point over a server, stamped as the server stamps (no unless), takes its timestamp before the latches and is held until a reader pushed it, so the push stands above the commit and the reader misses a write below its snapshot"},
		{AsyncSkipSecondary, 4, "a resolver deciding an async-commit transaction does not check its last secondary, so it takes the transaction for committed while that row's prewrite may still fail"},
	}
}

// Known reports whether name is a mutant's name.
func Known(name string) bool {
	for _, m := range Names() {
		if m.Name == name {
			return true
		}
	}
	return false
}

// Parse splits list, EnvVar's format, into the names it holds. Spaces
// around a name and empty entries are ignored. An unknown name is an
// error that lists the known ones.
func Parse(list string) ([]string, error) {
	var names []string
	for _, f := range strings.Split(list, ",") {
		name := strings.TrimSpace(f)
		if name == "" {
			continue
		}
		if !Known(name) {
			return nil, fmt.Errorf("unknown mutant %q; the mutants are:\n%s", name, Usage())
		}
		names = append(names, name)
	}
	return names, nil
}

// Usage lists the mutants, one per line: name, the invariant it breaks,
// and what it does.
func Usage() string {
	var b strings.Builder
	for _, m := range Names() {
		fmt.Fprintf(&b, "  %-18s breaks invariant %d: %s\n", m.Name, m.Invariant, m.Description)
	}
	return b.String()
}
