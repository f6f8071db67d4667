package observer

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// Options configures a Framework. The zero value is usable.
type Options struct {
	// MaxFailures is how many failed runs (an error or a panic) of one
	// observer on one cell quarantine its notification. 0 means 5.
	MaxFailures int
	// RetryBackoff is the first wait before a failed run is retried; it
	// doubles per failure. 0 means 100ms.
	RetryBackoff time.Duration
	// Logger receives failures and quarantines. nil means slog.Default().
	Logger *slog.Logger
	// Now is the wall clock: when a failed run may be retried, the time
	// written into quarantine records and published ranges, the ages
	// Status reports (against the times the transaction client's clock
	// wrote into the notifications), the re-sample ticks. nil means
	// time.Now.
	Now func() time.Time
}

func (o *Options) ensureDefaults() {
	if o.MaxFailures <= 0 {
		o.MaxFailures = 5
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 100 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// backfillChunk is how many rows a backfill notifies between two records
// of its progress.
const backfillChunk = 256

// Framework runs observers over one store. One per client.
type Framework struct {
	store storage.Store
	// notify is the store's notify keyspace (txn owns its layout).
	notify txn.NotifySpace
	client *txn.Client
	oracle txn.Oracle
	locker coord.Locker
	opts   Options
	reg    registry
	stats  statsTable
	fails  failures
	loops  failures // consecutive self-triggered commits per cell

	// clears counts the notifications cleared since the notify keyspace
	// was last compacted; compacting is set while one scanner compacts it.
	clears     atomic.Int64
	compacting atomic.Bool

	// part is the partitioner of the Run in progress with a Membership.
	part atomic.Pointer[partitioner]
	// Passes made by the scanners: over the whole keyspace, over this
	// worker's range (tests; Status has them as counters).
	fullPasses, rangePasses atomic.Int64
	// outage tracks the scanners' failing stretches (outage.go).
	outage outage

	backfillChunk int // rows per backfill progress record (test knob)
	// splitHook, if set, replaces the bounds a worker computed (test
	// knob: two workers whose samples disagree).
	splitHook func(splits [][]byte) [][]byte
}

// New loads the stored registrations and makes client set notifications
// for every observed column from now on. On a store client does not own
// (another process may register observers), the registry is reloaded
// whenever its stored version moves.
func New(ctx context.Context, store storage.Store, client *txn.Client, oracle txn.Oracle, locker coord.Locker, opts Options) (*Framework, error) {
	opts.ensureDefaults()
	f := &Framework{store: store, client: client, oracle: oracle, locker: locker, opts: opts, backfillChunk: backfillChunk, notify: client.Notifications()}
	f.fails = failures{now: opts.Now, m: map[string]*failure{}}
	f.loops = failures{now: opts.Now, m: map[string]*failure{}}
	f.reg = registry{store: store, shared: !client.Indexed(), code: map[string]Func{}}
	if err := f.reg.load(ctx); err != nil {
		return nil, err
	}
	client.SetObservers(&f.reg)
	return f, nil
}

// Register stores o's registration (if new) and attaches its code. From
// its return every write of o.Column sets a notification, in any process
// that opens the store; cells written before (and prewrites in flight
// while it ran) are notified by a backfill, so no change is missed. A
// backfill cut short (an error, a crash) is finished by the next Register
// of o or by RunWorkers.
//
// o.Fn nil stores the registration without code (a restore of a backup
// does): the notifications wait for a process that registers the code,
// and code this process attached to the name stays attached.
//
// The order is the registry's contract (txn.Observers): the registration
// is durable, then the version is raised, then existing cells are
// notified.
func (f *Framework) Register(ctx context.Context, o Observer) error {
	f.reg.mu.Lock()
	defer f.reg.mu.Unlock()
	s, err := f.reg.loadLocked(ctx)
	if err != nil {
		return err
	}
	if err := s.validate(o); err != nil {
		return err
	}
	if o.Fn != nil {
		f.reg.code[o.Name] = o.Fn
	}
	if s.lookup(o.Name) == nil {
		if err := f.storeRegistration(ctx, o); err != nil {
			return err
		}
	}
	// Publish what the store holds now, never a set built from the one
	// loaded before: another process may have registered meanwhile, and
	// a set without its observer must never carry the new version.
	if s, err = f.reg.loadLocked(ctx); err != nil {
		return err
	}
	if g := s.lookup(o.Name); g != nil && g.backfill {
		return f.backfill(ctx, g)
	}
	return nil
}

// Registrations returns the registrations stored now, by any process,
// sorted by name, without their code (Fn nil).
func (f *Framework) Registrations(ctx context.Context) ([]Observer, error) {
	f.reg.mu.Lock()
	defer f.reg.mu.Unlock()
	s, err := f.reg.loadLocked(ctx)
	if err != nil {
		return nil, err
	}
	var out []Observer
	for col, regs := range s.byCol {
		for _, g := range regs {
			out = append(out, Observer{Name: g.name, Column: col, Weak: g.weak})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// storeRegistration makes o's registration durable, then raises the
// registry's version.
func (f *Framework) storeRegistration(ctx context.Context, o Observer) error {
	ts, err := f.oracle.Timestamp(ctx)
	if err == nil {
		// A nonce over a server; safe in any order anyway (Bigtable's
		// client may re-send it): a late copy lands under any newer
		// version (a later Unregister's).
		err = f.store.Mutate(ctx, []byte(o.Column), versioned(FamilyObservers, o.Name, ts, regValue(o.Weak, !o.Weak))...)
	}
	if err == nil {
		_, err = f.reg.bumpLocked(ctx)
	}
	if err != nil {
		return fmt.Errorf("observer: storing %q: %w", o.Name, err)
	}
	return nil
}

// Unregister removes the registration named name: from its return no
// write sets a notification for it, in any process, and no scanner runs
// it. Its acks stay: registering the same name again resumes from them
// (cells it processed and that did not change since are not run again);
// register a new name to process every cell afresh. Notifications of a
// column left without observers are cleared by the scanners.
func (f *Framework) Unregister(ctx context.Context, name string) error {
	f.reg.mu.Lock()
	defer f.reg.mu.Unlock()
	s, err := f.reg.loadLocked(ctx)
	if err != nil {
		return err
	}
	g := s.lookup(name)
	if g == nil {
		return fmt.Errorf("%w: no observer named %q", ErrInvalidArgument, name)
	}
	ts, err := f.oracle.Timestamp(ctx)
	if err == nil {
		// A nonce over a server; safe in any order anyway: a late copy
		// lands under a newer registration of the name, and removes only
		// this registration's backfill progress.
		err = f.store.Mutate(ctx, []byte(g.column), append(versioned(FamilyObservers, name, ts, []byte(unregistered)),
			storage.DeleteCell(FamilyBackfill, name, g.version))...)
	}
	if err == nil {
		_, err = f.reg.bumpLocked(ctx)
	}
	if err != nil {
		return fmt.Errorf("observer: unregistering %q: %w", name, err)
	}
	delete(f.reg.code, name)
	_, err = f.reg.loadLocked(ctx)
	return err
}

// backfill notifies every cell of g's column that has a commit record or
// a lock, from where an earlier backfill of g stopped: writes that no
// notification announces because they came before the registration. It
// records its progress after each chunk (a resumed backfill notifies a
// chunk again at worst: a notification of a clean cell is harmless) and
// marks the registration done at the end.
func (f *Framework) backfill(ctx context.Context, g *registration) error {
	ts, err := f.oracle.Timestamp(ctx)
	if err != nil {
		return err
	}
	from, err := f.backfillCursor(ctx, g)
	if err != nil {
		return err
	}
	for {
		rows, err := f.cellsFrom(ctx, g.column, from)
		if err != nil {
			return fmt.Errorf("observer: backfill of %q: %w", g.name, err)
		}
		if len(rows) == 0 {
			return f.backfillDone(ctx, g)
		}
		if err := f.notifyRows(ctx, rows, g.column, ts); err != nil {
			return fmt.Errorf("observer: backfill of %q: %w", g.name, err)
		}
		last := rows[len(rows)-1]
		// A nonce over a server. A late copy moves this backfill's
		// progress back (a chunk notified again: harmless), or leaves it
		// after the backfill ended, where no other registration reads it.
		if err := f.store.Mutate(ctx, []byte(g.column), storage.SetCell(FamilyBackfill, g.name, g.version, last)); err != nil {
			return fmt.Errorf("observer: backfill of %q: %w", g.name, err)
		}
		from = append(last, 0)
	}
}

// backfillCursor is where g's backfill resumes: after the last row an
// earlier run notified, or at the start.
func (f *Framework) backfillCursor(ctx context.Context, g *registration) ([]byte, error) {
	r, err := f.store.ReadRow(ctx, []byte(g.column), storage.Filter{{Family: FamilyBackfill, Qualifier: g.name, Time: storage.At(g.version)}})
	if err != nil || len(r.Cells) == 0 {
		return nil, err
	}
	return append(r.Cells[0].Value, 0), nil
}

// cellsFrom returns up to f.backfillChunk rows from from that hold a commit
// record or a lock of column.
func (f *Framework) cellsFrom(ctx context.Context, column string, from []byte) ([][]byte, error) {
	return f.client.ColumnRows(ctx, column, from, f.backfillChunk)
}

// notifyRows durably sets a notification of column at ts on every row
// (txn.NotifySpace.Set: safe to apply twice in any order).
func (f *Framework) notifyRows(ctx context.Context, rows [][]byte, column string, ts uint64) error {
	return f.notify.Set(ctx, rows, column, ts)
}

// versioned puts value at ts in (family, qualifier) and removes the older
// versions: a late copy of it lands under any newer write.
func versioned(family, qualifier string, ts uint64, value []byte) []storage.Mutation {
	return []storage.Mutation{
		storage.SetCell(family, qualifier, ts, value),
		{Kind: storage.DeleteCells, Family: family, Qualifier: qualifier, Time: storage.Before(ts)},
	}
}

// backfillDone marks g's registration complete and drops its progress.
// f.reg.mu is held.
func (f *Framework) backfillDone(ctx context.Context, g *registration) error {
	// A nonce over a server; safe in any order anyway: it rewrites the
	// registration's own version, under any newer one (an Unregister's).
	if err := f.store.Mutate(ctx, []byte(g.column),
		storage.SetCell(FamilyObservers, g.name, g.version, regValue(g.weak, false)),
		storage.DeleteCell(FamilyBackfill, g.name, g.version)); err != nil {
		return fmt.Errorf("observer: backfill of %q: %w", g.name, err)
	}
	_, err := f.reg.loadLocked(ctx)
	return err
}

// finishBackfills finishes every backfill left unfinished (by a failed
// Register or a crash), whoever started it.
func (f *Framework) finishBackfills(ctx context.Context) error {
	f.reg.mu.Lock()
	defer f.reg.mu.Unlock()
	s, err := f.reg.loadLocked(ctx)
	if err != nil {
		return err
	}
	for _, regs := range s.byCol {
		for _, g := range regs {
			if g.backfill {
				if err := f.backfill(ctx, g); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Notify sets a weak notification on (row, column), whose observers are
// weak: they run once more, with no transactional conflict.
func (f *Framework) Notify(ctx context.Context, row, column string) error {
	if err := txn.ValidateColumn(column); err != nil {
		return err
	}
	if row == "" || len(row) > txn.MaxRowSize {
		return fmt.Errorf("%w: row of %d bytes", ErrInvalidArgument, len(row))
	}
	s, err := f.reg.refresh(ctx)
	if err != nil {
		return err
	}
	regs := s.byCol[column]
	if len(regs) == 0 || !regs[0].weak {
		return fmt.Errorf("%w: column %q has no weak observer", ErrInvalidArgument, column)
	}
	ts, err := f.oracle.Timestamp(ctx)
	if err != nil {
		return err
	}
	// Safe in any order: a version at a fresh timestamp; a late copy after
	// its run brings back a notification, and weak observers may run more
	// than once.
	return f.notify.Set(ctx, [][]byte{[]byte(row)}, column, ts)
}
