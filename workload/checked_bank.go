package workload

import (
	"context"
	"errors"
	"math/rand/v2"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/history"
)

// checkedBank is the bank as a checked history: transfers between
// accounts (balances may go negative, so every transfer moves money) and
// reads of every balance in one snapshot.
type checkedBank struct {
	keyed
	initial int64
}

func (w *checkedBank) Name() string { return "bank" }

// Setup opens every account with the initial balance, once: a process
// that finds them opened writes nothing.
func (w *checkedBank) Setup(ctx context.Context, db *percolator.DB) error {
	return db.Update(ctx, func(tx *percolator.Txn) error {
		for _, k := range w.keys {
			_, err := tx.Get(ctx, w.row(k), Column)
			if err == nil {
				return nil
			}
			if !errors.Is(err, percolator.ErrNotFound) {
				return err
			}
			if err := tx.Set(w.row(k), Column, formatInts([]int64{w.initial})); err != nil {
				return err
			}
		}
		return nil
	})
}

func (w *checkedBank) Next(rng *rand.Rand) (string, []history.Mop) {
	if rng.IntN(4) == 0 {
		return w.Final()
	}
	from := rng.IntN(len(w.keys))
	to := (from + 1 + rng.IntN(len(w.keys)-1)) % len(w.keys)
	return "transfer", []history.Mop{{F: history.Transfer, Key: w.keys[from], To: w.keys[to], Arg: 1 + rng.Int64N(10)}}
}

func (w *checkedBank) Apply(ctx context.Context, db *percolator.DB, f string, in []history.Mop) ([]history.Mop, error) {
	mops := cloneMops(in)
	if f == "read" {
		return mops, db.View(ctx, func(tx *percolator.Txn) error { return w.readAll(ctx, tx, mops) })
	}
	m := mops[0]
	return mops, update(ctx, db, func(tx *percolator.Txn) error {
		if err := w.add(ctx, tx, m.Key, -m.Arg); err != nil {
			return err
		}
		return w.add(ctx, tx, m.To, m.Arg)
	})
}

func (w *checkedBank) readAll(ctx context.Context, tx *percolator.Txn, mops []history.Mop) error {
	for i := range mops {
		l, err := getInts(ctx, tx, w.row(mops[i].Key))
		if err != nil {
			return err
		}
		mops[i].Read = l
	}
	return nil
}

func (w *checkedBank) add(ctx context.Context, tx *percolator.Txn, k string, d int64) error {
	l, err := getInts(ctx, tx, w.row(k))
	if err != nil {
		return err
	}
	if len(l) != 1 {
		return errors.New("workload: account " + k + " is not open")
	}
	return tx.Set(w.row(k), Column, formatInts([]int64{l[0] + d}))
}

func (w *checkedBank) Final() (string, []history.Mop) { return "read", w.readEvery() }

func (w *checkedBank) Check(h []history.Op) history.Result {
	return history.CheckBank(h, history.BankOptions{Accounts: w.keys, Initial: w.initial})
}
