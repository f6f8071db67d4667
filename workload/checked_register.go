package workload

import (
	"context"
	"errors"
	"math/rand/v2"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/history"
)

// register is single-key reads, writes and compare-and-sets of small
// integers, each one transaction; checked linearizable per key.
type register struct{ keyed }

// errCASMismatch: a compare-and-set found another value and wrote
// nothing.
var errCASMismatch = errors.New("workload: compare-and-set found another value")

func (w *register) Name() string { return "register" }

func (w *register) Setup(context.Context, *percolator.DB) error { return nil }

func (w *register) Next(rng *rand.Rand) (string, []history.Mop) {
	k := w.pick(rng)
	switch rng.IntN(3) {
	case 0:
		return "read", []history.Mop{{F: history.Read, Key: k}}
	case 1:
		return "write", []history.Mop{{F: history.Write, Key: k, Arg: rng.Int64N(5)}}
	}
	return "cas", []history.Mop{{F: history.CAS, Key: k, Expect: rng.Int64N(5), Arg: rng.Int64N(5)}}
}

func (w *register) Apply(ctx context.Context, db *percolator.DB, f string, in []history.Mop) ([]history.Mop, error) {
	mops := cloneMops(in)
	m := &mops[0]
	row := w.row(m.Key)
	switch m.F {
	case history.Read:
		read := func(tx *percolator.Txn) error {
			l, err := getInts(ctx, tx, row)
			m.Read = l
			return err
		}
		if eagerReads(m.Key) {
			// Its start timestamp from the client's oracle, before the read.
			tx, err := db.BeginReadOnly(ctx)
			if err == nil {
				err = read(tx)
				_ = tx.Rollback(ctx)
			}
			return mops, err
		}
		// Over a server, its start timestamp comes with the read.
		return mops, db.View(ctx, read)
	case history.Write:
		return mops, update(ctx, db, func(tx *percolator.Txn) error { return tx.Set(row, Column, formatInts([]int64{m.Arg})) })
	}
	return mops, update(ctx, db, func(tx *percolator.Txn) error {
		l, err := getInts(ctx, tx, row)
		if err != nil {
			return err
		}
		if len(l) != 1 || l[0] != m.Expect {
			return errCASMismatch
		}
		return tx.Set(row, Column, formatInts([]int64{m.Arg}))
	})
}

// eagerReads reports whether the reads of key begin with a start
// timestamp at Begin (BeginReadOnly: over a server, the client's
// oracle's; on the embedded store, one above the newest commit the
// client acknowledged or returned), as the reads of every key whose name
// ends in an even digit do; the others take theirs with the read (View:
// over a server, the server's). The history checks both: a stale
// timestamp of either source shows.
func eagerReads(key string) bool { return key != "" && (key[len(key)-1]-'0')%2 == 0 }

func (w *register) Final() (string, []history.Mop) { return "", nil }

func (w *register) Check(h []history.Op) history.Result {
	return history.CheckRegister(h, history.RegisterOptions{})
}
