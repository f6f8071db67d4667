package observer

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// Families of the framework's own records (each its own keyspace).
const (
	// FamilyObservers records registrations: row = observed column,
	// qualifier = observer name, value = "strong" or "weak" (invariant 1).
	FamilyObservers = "observers"
	// FamilyQuarantine holds notifications whose observer kept failing:
	// row = the cell's row, qualifier = column ":" observer.
	FamilyQuarantine = "quarantine"
	// FamilyStats holds per-observer counters: row = observer name.
	FamilyStats = "observer_stats"
)

// Func is an observer: it runs in its own transaction tx after (row,
// column) changed, and may read and write anything through tx. Returning
// an error (or panicking) aborts the run; it is retried with back-off and
// quarantined after Options.MaxFailures failures.
type Func func(ctx context.Context, tx *txn.Txn, row, column string) error

// Observer names code that runs when a column changes.
type Observer struct {
	Name   string // [A-Za-z0-9][A-Za-z0-9_-]{0,63}, unique
	Column string // the observed user column
	// Weak observers run on Notify (the column holds no data, only
	// notifications): no ack, no conflict, may run more than once.
	Weak bool
	Fn   Func
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`) // "_scanners" is the scanners' stats row

// ErrInvalidArgument is txn's: bad registrations and bad cells.
var ErrInvalidArgument = txn.ErrInvalidArgument

// AckColumn is the reserved column holding observer name's ack for column:
// the start_ts of its last committed run on the cell (invariant 3).
func AckColumn(name, column string) string { return txn.ReservedPrefix + "ack:" + name + ":" + column }

// registration is one stored observer, with its code if this process
// registered it.
type registration struct {
	name, column string
	weak         bool
	fn           Func
}

// registry is the observed-column set: loaded from the store, extended by
// Register, read lock-free by every prewrite (through txn.SetObserved).
type registry struct {
	mu    sync.Mutex // serializes changes
	byCol atomic.Pointer[map[string][]*registration]
}

func (r *registry) columns() map[string][]*registration {
	if m := r.byCol.Load(); m != nil {
		return *m
	}
	return nil
}

func (r *registry) observed(col string) bool { return len(r.columns()[col]) > 0 }

// load reads every stored registration.
func (r *registry) load(ctx context.Context, st storage.Store) error {
	m := map[string][]*registration{}
	err := st.Scan(ctx, nil, nil, storage.Filter{{Family: FamilyObservers, AllQualifiers: true}}, 0, func(row storage.Row) bool {
		for _, c := range row.Cells {
			m[string(row.Key)] = append(m[string(row.Key)], &registration{name: c.Qualifier, column: string(row.Key), weak: string(c.Value) == "weak"})
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("observer: loading registrations: %w", err)
	}
	r.byCol.Store(&m)
	return nil
}

// lookup returns the registration named name, if any.
func (r *registry) lookup(name string) *registration {
	for _, regs := range r.columns() {
		for _, g := range regs {
			if g.name == name {
				return g
			}
		}
	}
	return nil
}

// with validates o and returns the observed-column map with it; stored
// reports that o was already stored (same column and kind), so only its
// code is attached.
func (r *registry) with(o Observer) (map[string][]*registration, bool, error) {
	switch {
	case !nameRE.MatchString(o.Name):
		return nil, false, fmt.Errorf("%w: observer name %q must match %s", ErrInvalidArgument, o.Name, nameRE)
	case o.Fn == nil:
		return nil, false, fmt.Errorf("%w: observer %q has no function", ErrInvalidArgument, o.Name)
	}
	if err := txn.ValidateColumn(o.Column); err != nil {
		return nil, false, err
	}
	old := r.columns()
	if g := r.lookup(o.Name); g != nil && (g.column != o.Column || g.weak != o.Weak) {
		return nil, false, fmt.Errorf("%w: observer %q is registered on %q (weak=%v)", ErrInvalidArgument, o.Name, g.column, g.weak)
	}
	for _, g := range old[o.Column] {
		if g.weak != o.Weak {
			return nil, false, fmt.Errorf("%w: column %q mixes weak and strong observers", ErrInvalidArgument, o.Column)
		}
	}
	m := make(map[string][]*registration, len(old)+1)
	stored := false
	for col, regs := range old {
		cp := make([]*registration, 0, len(regs)+1)
		for _, g := range regs {
			if g.name == o.Name {
				stored = true
				g = &registration{name: g.name, column: g.column, weak: g.weak, fn: o.Fn}
			}
			cp = append(cp, g)
		}
		m[col] = cp
	}
	if !stored {
		m[o.Column] = append(m[o.Column], &registration{name: o.Name, column: o.Column, weak: o.Weak, fn: o.Fn})
		sort.Slice(m[o.Column], func(i, j int) bool { return m[o.Column][i].name < m[o.Column][j].name })
	}
	return m, stored, nil
}

func kind(weak bool) string {
	if weak {
		return "weak"
	}
	return "strong"
}
