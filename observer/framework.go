package observer

import (
	"context"
	"fmt"
	"log/slog"
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
}

// Framework runs observers over one store. One per process and store.
type Framework struct {
	store  storage.Store
	client *txn.Client
	oracle txn.Oracle
	locker coord.Locker
	opts   Options
	reg    registry
	stats  statsTable
	fails  failures

	// clears counts the notifications cleared since the notify keyspace
	// was last compacted; compacting is set while one scanner compacts it.
	clears     atomic.Int64
	compacting atomic.Bool
}

// New loads the stored registrations and makes client set notifications
// for every observed column from now on.
func New(ctx context.Context, store storage.Store, client *txn.Client, oracle txn.Oracle, locker coord.Locker, opts Options) (*Framework, error) {
	opts.ensureDefaults()
	f := &Framework{store: store, client: client, oracle: oracle, locker: locker, opts: opts}
	f.fails.m = map[string]*failure{}
	if err := f.reg.load(ctx, store); err != nil {
		return nil, err
	}
	client.SetObserved(f.reg.observed)
	return f, nil
}

// Register stores o's registration (if new) and attaches its code. From
// its return every write of o.Column sets a notification, in any process
// that opens the store; cells written before (and prewrites in flight
// while it ran) are notified by a backfill, so no change is missed.
func (f *Framework) Register(ctx context.Context, o Observer) error {
	f.reg.mu.Lock()
	defer f.reg.mu.Unlock()
	m, stored, err := f.reg.with(o)
	if err != nil {
		return err
	}
	if stored {
		f.reg.byCol.Store(&m)
		return nil
	}
	if err := f.store.Mutate(ctx, []byte(o.Column), storage.SetCell(FamilyObservers, o.Name, 0, []byte(kind(o.Weak)))); err != nil {
		return fmt.Errorf("observer: storing %q: %w", o.Name, err)
	}
	f.reg.byCol.Store(&m)
	// Wait out the prewrites that built their writes with the old set.
	f.client.SetObserved(f.reg.observed)
	if o.Weak {
		return nil
	}
	return f.backfill(ctx, o.Column)
}

// backfill notifies every cell of column that has a commit record or a
// lock: writes that no notification announces because they came before
// the registration.
func (f *Framework) backfill(ctx context.Context, column string) error {
	ts, err := f.oracle.Timestamp(ctx)
	if err != nil {
		return err
	}
	wall := txn.EncodeNotify(uint64(time.Now().UnixMilli()))
	filter := storage.Filter{{Family: txn.FamilyWrite, Qualifier: column, Limit: 1}, {Family: txn.FamilyLock, Qualifier: column, Limit: 1}}
	var rows [][]byte
	err = f.store.Scan(ctx, nil, nil, filter, 0, func(r storage.Row) bool {
		rows = append(rows, r.Key)
		return true
	})
	if err != nil {
		return fmt.Errorf("observer: backfill of %q: %w", column, err)
	}
	for _, row := range rows {
		if err := f.store.Mutate(ctx, row, storage.SetCell(txn.FamilyNotify, column, ts, wall)); err != nil {
			return fmt.Errorf("observer: backfill of %q: %w", column, err)
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
	regs := f.reg.columns()[column]
	if len(regs) == 0 || !regs[0].weak {
		return fmt.Errorf("%w: column %q has no weak observer", ErrInvalidArgument, column)
	}
	ts, err := f.oracle.Timestamp(ctx)
	if err != nil {
		return err
	}
	return f.store.Mutate(ctx, []byte(row), storage.SetCell(txn.FamilyNotify, column, ts, txn.EncodeNotify(uint64(time.Now().UnixMilli()))))
}
