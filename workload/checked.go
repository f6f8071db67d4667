package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/history"
)

// Checked is a workload whose operations are recorded as a history and
// checked (package history): percolator verify runs them in several
// processes under faults.
//
// Next and Apply may be called concurrently; Next is given each caller's
// own random source.
type Checked interface {
	// Name is the workload's name (--workload).
	Name() string
	// Setup writes what the workload needs before any operation (the
	// bank's opening balances); it may be called again by every process and
	// is idempotent.
	Setup(ctx context.Context, db *percolator.DB) error
	// Next draws the next operation: its function and micro-operations
	// (reads without values).
	Next(rng *rand.Rand) (f string, mops []history.Mop)
	// Apply performs it on db and returns its micro-operations with the
	// values read. Its error says how it ended (Outcome).
	Apply(ctx context.Context, db *percolator.DB, f string, mops []history.Mop) ([]history.Mop, error)
	// Final is the operation a final read makes after the run, or "" if
	// the workload has none.
	Final() (f string, mops []history.Mop)
	// Check checks a history of the workload.
	Check(h []history.Op) history.Result
}

// Worked is a checked workload whose work is also done by workers, apart
// from its operations (the observer workload's observers): percolator
// verify runs Work in processes of their own beside the clients, and in
// the client itself on an embedded store, which has one owner.
type Worked interface {
	Checked
	// Work runs the workers on db until ctx ends or db fails.
	Work(ctx context.Context, db *percolator.DB) error
}

// CheckedOptions shape a checked workload.
type CheckedOptions struct {
	// Prefix is prepended to every row the workload writes: each run of
	// percolator verify writes under a prefix of its own.
	Prefix string
	// Keys is the number of keys (registers, lists, accounts); 0 for the
	// workload's default.
	Keys int
	// ValueBase is where this process's unique values (appended, added)
	// start: each client process of a run is given a range of its own.
	ValueBase int64
}

// Column is the one column the checked workloads write.
const Column = "v"

// ErrUnknownWorkload: NewChecked was given a name it does not know.
var ErrUnknownWorkload = errors.New("workload: unknown workload")

// CheckedNames are the checked workloads' names.
var CheckedNames = []string{"list-append", "register", "set", "bank", "long-fork", "monotonic", "lock", "queue", "graph", "observer"}

// NewChecked returns the checked workload name.
func NewChecked(name string, o CheckedOptions) (Checked, error) {
	switch name {
	case "list-append":
		return &listAppend{keyed: newKeyed(o, 8), values: values{base: o.ValueBase}}, nil
	case "register":
		return &register{keyed: newKeyed(o, 4)}, nil
	case "set":
		return &set{prefix: o.Prefix + "set/", values: values{base: o.ValueBase}}, nil
	case "bank":
		return &checkedBank{keyed: newKeyed(o, 8), initial: 100}, nil
	case "long-fork":
		return &longFork{prefix: o.Prefix + "fork/", values: values{base: o.ValueBase}}, nil
	case "monotonic":
		return &monotonic{keyed: newKeyed(o, 6)}, nil
	case "lock":
		return &lockHolds{prefix: o.Prefix}, nil
	case "graph":
		// Label names hold no "/": the run's prefix with "_" instead.
		return &graphEdges{label: strings.ReplaceAll(strings.TrimSuffix(o.Prefix, "/"), "/", "_") + "_edges", values: values{base: o.ValueBase}}, nil
	case "observer":
		return newObserved(o), nil
	case "queue":
		return &workQueue{name: o.Prefix + "q", values: values{base: o.ValueBase}}, nil
	}
	return nil, fmt.Errorf("%w %q (one of %s)", ErrUnknownWorkload, name, strings.Join(CheckedNames, ", "))
}

// Outcome is what an operation's error says of it: nil happened (ok); a
// conflict or bad input certainly did not (fail: Commit makes nothing
// visible when it returns them); anything else — ErrCommitUnknown, the
// context ending mid-commit, a server or store gone — may have happened
// (info). Read-only operations that fail are fail: they change nothing.
func Outcome(err error, readOnly bool) history.Type {
	switch {
	case err == nil:
		return history.OK
	case readOnly, errors.Is(err, percolator.ErrConflict), errors.Is(err, percolator.ErrInvalidArgument), errors.Is(err, errBeforeCommit):
		return history.Fail
	}
	return history.Info
}

// errBeforeCommit marks an error met before Commit was called: nothing
// was written.
var errBeforeCommit = errors.New("workload: failed before commit")

// keyed is a workload over a fixed set of keys.
type keyed struct {
	prefix string
	keys   []string
}

func newKeyed(o CheckedOptions, def int) keyed {
	n := o.Keys
	if n <= 0 {
		n = def
	}
	k := keyed{prefix: o.Prefix}
	for i := range n {
		k.keys = append(k.keys, strconv.Itoa(i))
	}
	return k
}

func (k keyed) row(key string) string { return k.prefix + key }

func (k keyed) pick(rng *rand.Rand) string { return k.keys[rng.IntN(len(k.keys))] }

// readEvery is a read of every key, values unknown.
func (k keyed) readEvery() []history.Mop {
	mops := make([]history.Mop, len(k.keys))
	for i, key := range k.keys {
		mops[i] = history.Mop{F: history.Read, Key: key}
	}
	return mops
}

// update runs fn in one transaction, no retry: a conflict is the
// operation's outcome. Errors before Commit are marked errBeforeCommit.
func update(ctx context.Context, db *percolator.DB, fn func(tx *percolator.Txn) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return errors.Join(errBeforeCommit, err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback(ctx)
		return errors.Join(errBeforeCommit, err)
	}
	return tx.Commit(ctx)
}

// getInts reads row's Column, a cell of comma-separated integers: []
// when absent.
func getInts(ctx context.Context, tx *percolator.Txn, row string) ([]int64, error) {
	return getIntsAt(ctx, tx, row, Column)
}

// getIntsAt reads a cell of comma-separated integers: [] when absent.
func getIntsAt(ctx context.Context, tx *percolator.Txn, row, column string) ([]int64, error) {
	v, err := tx.Get(ctx, row, column)
	if errors.Is(err, percolator.ErrNotFound) {
		return []int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	return parseInts(v)
}

func parseInts(v []byte) ([]int64, error) {
	out := []int64{}
	if len(v) == 0 {
		return out, nil
	}
	for _, f := range strings.Split(string(v), ",") {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("workload: cell holds %q: %w", v, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func formatInts(l []int64) []byte {
	var b []byte
	for i, n := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, n, 10)
	}
	return b
}

// values hands out this process's unique values.
type values struct {
	base int64
	next atomic.Int64
}

func (v *values) value() int64 { return v.base + v.next.Add(1) }

func cloneMops(m []history.Mop) []history.Mop { return slices.Clone(m) }
