package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/history"
)

// set adds unique elements, each its own row, and reads the set back
// with a scan; the final read must hold every acknowledged add.
type set struct {
	prefix string
	values
}

// setKey is the one set's name in the history.
const setKey = "s"

func (w *set) Name() string { return "set" }

func (w *set) Setup(context.Context, *percolator.DB) error { return nil }

func (w *set) Next(rng *rand.Rand) (string, []history.Mop) {
	if rng.IntN(8) == 0 {
		return "read", []history.Mop{{F: history.Read, Key: setKey}}
	}
	return "add", []history.Mop{{F: history.Add, Key: setKey, Arg: w.value()}}
}

func (w *set) row(e int64) string { return fmt.Sprintf("%s%020d", w.prefix, e) }

func (w *set) Apply(ctx context.Context, db *percolator.DB, f string, in []history.Mop) ([]history.Mop, error) {
	mops := cloneMops(in)
	if mops[0].F == history.Add {
		return mops, update(ctx, db, func(tx *percolator.Txn) error { return tx.Set(w.row(mops[0].Arg), Column, []byte{'1'}) })
	}
	err := db.View(ctx, func(tx *percolator.Txn) error {
		kvs, err := tx.Scan(ctx, w.prefix, w.prefix+"\xff", Column, 0)
		if err != nil {
			return err
		}
		elems := make([]int64, 0, len(kvs))
		for _, kv := range kvs {
			e, err := strconv.ParseInt(string(kv.Row[len(w.prefix):]), 10, 64)
			if err != nil {
				return fmt.Errorf("workload: set row %q: %w", kv.Row, err)
			}
			elems = append(elems, e)
		}
		mops[0].Read = elems
		return nil
	})
	return mops, err
}

func (w *set) Final() (string, []history.Mop) {
	return "read", []history.Mop{{F: history.Read, Key: setKey}}
}

func (w *set) Check(h []history.Op) history.Result { return history.CheckSet(h) }
