package observer

import (
	"context"
	"encoding/binary"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// Families of the framework's own records (each its own keyspace).
const (
	// FamilyObservers records registrations: row = observed column,
	// qualifier = observer name, value = "strong" or "weak", followed by
	// " backfill" while the backfill of existing cells is unfinished
	// (invariant 1), or "unregistered". The newest version of the cell
	// is the registration: Register and Unregister write at a fresh
	// timestamp and remove only older versions, so a late copy of either
	// (Bigtable's client re-sends a failed write without a nonce) lands
	// under the newer one. The row versionRow holds the registry's
	// version.
	FamilyObservers = "observers"
	// FamilyBackfill holds each unfinished backfill's progress: row =
	// column, qualifier = observer name, version = the registration's,
	// value = the last row notified. A backfill reads only its own
	// registration's version, so a late copy of an older registration's
	// record is never resumed from.
	FamilyBackfill = "observer_backfill"
	// FamilyQuarantine holds notifications whose observer kept failing:
	// row = the cell's row, qualifier = column ":" observer, at the
	// timestamp of the quarantine (the newest version is listed); Retry
	// removes exactly the version it listed.
	FamilyQuarantine = "quarantine"
	// FamilyStats holds per-observer counters: row = observer name.
	FamilyStats = "observer_stats"
)

// versionRow is the registry version's row in FamilyObservers (qualifier
// "v", an 8-byte counter). User columns cannot begin with the reserved
// prefix, so no registration row collides with it.
const versionRow = txn.ReservedPrefix + "version"

// Func is an observer: it runs in its own transaction tx after (row,
// column) changed, and may read and write anything through tx. Returning
// nil commits tx; returning an error (or panicking) rolls it back, and the
// run is retried with back-off and quarantined after Options.MaxFailures
// failures. The framework ends tx: tx.Commit and tx.Rollback fail with
// txn.ErrManaged.
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
	backfill     bool   // its backfill is unfinished
	version      uint64 // the registration cell's version
	fn           Func
}

// regSet is one version of the registry, as loaded from the store.
// Immutable once published: every change is stored, the version raised,
// and a fresh set loaded (a set built in memory could miss another
// process's registration while carrying the new version).
type regSet struct {
	byCol   map[string][]*registration
	version uint64
	obs     txn.Observed // observed, made once: Snapshot runs per commit
}

func newRegSet(byCol map[string][]*registration, version uint64) *regSet {
	s := &regSet{byCol: byCol, version: version}
	s.obs = s.observed
	return s
}

func (s *regSet) observed(col string) bool { return len(s.byCol[col]) > 0 }

// lookup returns the registration named name, if any.
func (s *regSet) lookup(name string) *registration {
	for _, regs := range s.byCol {
		for _, g := range regs {
			if g.name == name {
				return g
			}
		}
	}
	return nil
}

// registry is the observed-column set: loaded from the store, changed by
// Register and Unregister, read lock-free by every commit (txn.Observers)
// and scanner. On a store shared with other processes it is reloaded
// whenever the stored version moved (refresh); on a store this process
// owns every change passes through it, and memory is exact.
type registry struct {
	store  storage.Store
	shared bool
	mu     sync.Mutex      // serializes changes and reloads
	code   map[string]Func // observer name → code registered here; under mu
	cur    atomic.Pointer[regSet]
}

func (r *registry) set() *regSet {
	if s := r.cur.Load(); s != nil {
		return s
	}
	return noRegistrations
}

// noRegistrations is the set of a registry not loaded yet; read only.
var noRegistrations = newRegSet(nil, 0)

func (r *registry) columns() map[string][]*registration { return r.set().byCol }

// Snapshot implements txn.Observers.
func (r *registry) Snapshot() (txn.Observed, uint64) {
	s := r.set()
	return s.obs, s.version
}

// ProcessedPast implements txn.AckReader: every strong observer of column
// (the set as loaded now) holds an ack at or past ts, so its dirty check
// finds the commit at ts processed (invariant 3). Weak observers keep no
// ack and follow notifications alone.
func (r *registry) ProcessedPast(column string, ts uint64, value func(column string) ([]byte, bool)) bool {
	for _, g := range r.columns()[column] {
		if g.weak {
			continue
		}
		v, ok := value(AckColumn(g.name, column))
		if !ok || len(v) != 8 || binary.BigEndian.Uint64(v) < ts {
			return false
		}
	}
	return true
}

var _ txn.AckReader = (*registry)(nil)

// Refresh implements txn.Observers.
func (r *registry) Refresh(ctx context.Context) (txn.Observed, uint64, error) {
	s, err := r.refresh(ctx)
	if err != nil {
		return nil, 0, err
	}
	return s.observed, s.version, nil
}

// refresh returns the registry as stored now: on a shared store it reads
// the stored version and reloads when it moved.
func (r *registry) refresh(ctx context.Context) (*regSet, error) {
	s := r.set()
	if !r.shared {
		return s, nil
	}
	v, err := r.storedVersion(ctx)
	if err != nil || v == s.version {
		return s, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s = r.set(); s.version == v {
		return s, nil
	}
	return r.loadLocked(ctx)
}

func (r *registry) storedVersion(ctx context.Context) (uint64, error) {
	return StoredVersion(ctx, r.store)
}

// StoredVersion reads the registry's version from st (0 if it has none):
// a server returns it with each commit timestamp (txn.VersionedOracle).
func StoredVersion(ctx context.Context, st storage.Store) (uint64, error) {
	row, err := st.ReadRow(ctx, []byte(versionRow), storage.Filter{{Family: FamilyObservers, Qualifier: "v", Limit: 1}})
	if err != nil || len(row.Cells) == 0 {
		return 0, err
	}
	return decodeCounter(row.Cells[0].Value), nil
}

// RefreshTo implements txn.RefreshedTo: the set at stored version v, read
// by the caller's oracle after its last prewrite. Memory serves while it
// holds v; otherwise the set is loaded again.
func (r *registry) RefreshTo(ctx context.Context, v uint64) (txn.Observed, uint64, error) {
	s := r.set()
	if !r.shared || s.version == v {
		return s.observed, s.version, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s = r.set(); s.version == v {
		return s.observed, s.version, nil
	}
	s, err := r.loadLocked(ctx)
	if err != nil {
		return nil, 0, err
	}
	return s.observed, s.version, nil
}

// bumpLocked raises the stored version (a durable write) and returns it.
// The Increment carries a nonce over a server; elsewhere a re-sent one
// raises it twice, which is harmless: only a change matters.
func (r *registry) bumpLocked(ctx context.Context) (uint64, error) {
	v, err := r.store.Increment(ctx, []byte(versionRow), FamilyObservers, "v", 1)
	return uint64(v), err
}

// load reads every stored registration.
func (r *registry) load(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err := r.loadLocked(ctx)
	return err
}

// loadLocked reads the stored version, then the registrations (in that
// order: a registration is stored before the version is raised, so the
// set read is at least as new as the version), attaches the code
// registered here, and publishes them.
func (r *registry) loadLocked(ctx context.Context) (*regSet, error) {
	v, err := r.storedVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("observer: loading registrations: %w", err)
	}
	m := map[string][]*registration{}
	err = r.store.Scan(ctx, nil, nil, storage.Filter{{Family: FamilyObservers, AllQualifiers: true, Limit: 1}}, 0, func(row storage.Row) bool {
		if strings.HasPrefix(string(row.Key), txn.ReservedPrefix) {
			return true
		}
		for _, c := range row.Cells {
			if string(c.Value) == unregistered {
				continue
			}
			kind, state, _ := strings.Cut(string(c.Value), " ")
			g := &registration{name: c.Qualifier, column: string(row.Key), weak: kind == "weak", backfill: state == "backfill", version: c.TS, fn: r.code[c.Qualifier]}
			m[g.column] = append(m[g.column], g)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("observer: loading registrations: %w", err)
	}
	s := newRegSet(m, v)
	r.cur.Store(s)
	return s, nil
}

// Validate checks o's name and column, as Register does before it
// looks at the registry (Fn is not checked: see Register).
func (o Observer) Validate() error {
	if !nameRE.MatchString(o.Name) {
		return fmt.Errorf("%w: observer name %q must match %s", ErrInvalidArgument, o.Name, nameRE)
	}
	return txn.ValidateColumn(o.Column)
}

// validate checks o against the registry: a stored name keeps its column
// and kind, a column does not mix weak and strong observers.
func (s *regSet) validate(o Observer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if g := s.lookup(o.Name); g != nil && (g.column != o.Column || g.weak != o.Weak) {
		return fmt.Errorf("%w: observer %q is registered on %q (weak=%v)", ErrInvalidArgument, o.Name, g.column, g.weak)
	}
	for _, g := range s.byCol[o.Column] {
		if g.weak != o.Weak {
			return fmt.Errorf("%w: column %q mixes weak and strong observers", ErrInvalidArgument, o.Column)
		}
	}
	return nil
}

func kind(weak bool) string {
	if weak {
		return "weak"
	}
	return "strong"
}

// unregistered is the value of a registration cell that an Unregister
// wrote: no registration.
const unregistered = "unregistered"

// regValue is a registration cell's value.
func regValue(weak, backfill bool) []byte {
	if backfill {
		return []byte(kind(weak) + " backfill")
	}
	return []byte(kind(weak))
}
