package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// sameRowStore is a Bigtable store that claims locality groups it does not
// have: the notifications stay in the data rows (the layout of a store
// with locality groups), for the figure's comparison only.
type sameRowStore struct{ *bigtable.Store }

func (sameRowStore) SharedRows() bool { return false }

// benchBigtableNotify: the cost of finding notifications on Bigtable, with
// them in their own rows (the layout percolator uses there) and, beside it,
// in the data rows: Bigtable's read statistics count every cell a scan
// passes, whatever its filter, so the second reads the data too. A table
// of rows with data, a trickle of changes to an observed column of a few
// of them, one scanner draining: cells visited per notification found.
func bigtableNotify(ctx context.Context, b *runner, r *Report) error {
	const rows, changed = 2000, 100
	apart, err := b.notifyScanCost(ctx, false, rows, changed)
	if err != nil {
		return err
	}
	same, err := b.notifyScanCost(ctx, true, rows, changed)
	if err != nil {
		return err
	}
	r.printf("bigtable notify: %.1f cells visited per notification found with notifications in their own rows vs %.1f in the data rows (%d rows of 4 columns, %d changed, 1 scanner draining): ratio %.3f",
		apart, same, rows, changed, apart/same)
	return nil
}

// notifyScanCost measures one layout on a table of its own.
func (b *runner) notifyScanCost(ctx context.Context, sameRow bool, rows, changed int) (float64, error) {
	db, closeAll, err := b.openNotifyDB(ctx, sameRow)
	if err != nil {
		return 0, err
	}
	defer closeAll()
	if err := loadNotifyRows(ctx, db, rows); err != nil {
		return 0, err
	}
	// A first drain ends the registration's backfill (nothing to notify).
	if _, err := db.RunWorkers(ctx, percolator.WorkerOptions{Scanners: 1, Drain: true}); err != nil {
		return 0, err
	}
	before, err := db.ObserverStatus(ctx)
	if err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	picked := rng.Perm(rows)[:changed]
	if err := db.Load(ctx, changed, percolator.LoadOptions{}, func(tx *percolator.Txn, i int) error {
		return tx.Set(fmt.Sprintf("row%05d", picked[i]), "in", []byte("changed"))
	}); err != nil {
		return 0, err
	}
	if _, err := db.RunWorkers(ctx, percolator.WorkerOptions{Scanners: 1, Drain: true}); err != nil {
		return 0, err
	}
	after, err := db.ObserverStatus(ctx)
	if err != nil {
		return 0, err
	}
	keys := after.Scanners["scan_keys"] - before.Scanners["scan_keys"]
	found := after.Scanners["scan_rows"] - before.Scanners["scan_rows"]
	if found < int64(changed) {
		return 0, fmt.Errorf("the scanner found %d notified rows of %d", found, changed)
	}
	return float64(keys) / float64(changed), nil
}

// openNotifyDB opens a table of the layout's own (on an emulator of its
// own with BigtableEmulator) and a DB on it with an in-process oracle.
func (b *runner) openNotifyDB(ctx context.Context, sameRow bool) (*percolator.DB, func(), error) {
	opts := b.btOpts
	opts.Table += "-notify"
	if sameRow {
		opts.Table += "-samerow"
	}
	var cl closers
	fail := func(err error) (*percolator.DB, func(), error) { cl.closeAll(); return nil, nil, err }
	if b.opts.BigtableEmulator {
		emu, err := bigtable.StartEmulator("127.0.0.1:0")
		if err != nil {
			return fail(err)
		}
		cl.add(emu.Close)
		opts.Emulator = emu.Addr()
	}
	if err := bigtable.Init(ctx, opts); err != nil {
		return fail(err)
	}
	st, err := bigtable.Open(ctx, opts)
	if err != nil {
		return fail(err)
	}
	cl.add(func() { _ = st.Close() })
	alloc, err := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	if err != nil {
		return fail(err)
	}
	cl.add(func() { _ = alloc.Close() })
	popts := percolator.Options{Store: st, Oracle: oracle.NewClient(alloc)}
	if sameRow {
		popts.Store = sameRowStore{st}
	}
	db, err := percolator.Open(ctx, popts)
	if err != nil {
		return fail(err)
	}
	cl.add(func() { _ = db.Close() })
	return db, cl.closeAll, nil
}

// loadNotifyRows writes the figure's data, 4 columns per row written
// twice (two versions each), and observes column "in" (copied to "out").
func loadNotifyRows(ctx context.Context, db *percolator.DB, rows int) error {
	for round := range 2 {
		err := db.Load(ctx, rows, percolator.LoadOptions{}, func(tx *percolator.Txn, i int) error {
			for c := range 4 {
				if err := tx.Set(fmt.Sprintf("row%05d", i), fmt.Sprint("d", c), fmt.Appendf(nil, "value %d of %d", round, i)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	copyFn := func(ctx context.Context, tx *percolator.Txn, row, col string) error {
		v, err := tx.Get(ctx, row, col)
		if errors.Is(err, percolator.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return tx.Set(row, "out", v)
	}
	return db.Observe(ctx, percolator.Observer{Name: "copy", Column: "in", Fn: copyFn})
}
