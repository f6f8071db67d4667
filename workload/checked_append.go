package workload

import (
	"context"
	"math/rand/v2"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/history"
)

// listAppend is Elle's list-append: transactions of 1–4 micro-operations
// that append a unique value to a key's list or read the list. Each list
// is a cell of comma-separated values.
type listAppend struct {
	keyed
	values
}

func (w *listAppend) Name() string { return "list-append" }

func (w *listAppend) Setup(context.Context, *percolator.DB) error { return nil }

func (w *listAppend) Next(rng *rand.Rand) (string, []history.Mop) {
	n := 1 + rng.IntN(4)
	mops := make([]history.Mop, n)
	for i := range mops {
		k := w.pick(rng)
		if rng.IntN(2) == 0 {
			mops[i] = history.Mop{F: history.Read, Key: k}
		} else {
			mops[i] = history.Mop{F: history.Append, Key: k, Arg: w.value()}
		}
	}
	return "txn", mops
}

func (w *listAppend) Apply(ctx context.Context, db *percolator.DB, f string, in []history.Mop) ([]history.Mop, error) {
	mops := cloneMops(in)
	err := update(ctx, db, func(tx *percolator.Txn) error {
		for i, m := range mops {
			l, err := getInts(ctx, tx, w.row(m.Key))
			if err != nil {
				return err
			}
			if m.F == history.Read {
				mops[i].Read = l
				continue
			}
			if err := tx.Set(w.row(m.Key), Column, formatInts(append(l, m.Arg))); err != nil {
				return err
			}
		}
		return nil
	})
	return mops, err
}

func (w *listAppend) Final() (string, []history.Mop) { return "txn", w.readEvery() }

func (w *listAppend) Check(h []history.Op) history.Result {
	return history.CheckListAppend(h, history.ListAppendOptions{RealTime: true})
}
