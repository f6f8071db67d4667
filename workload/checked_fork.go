package workload

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/history"
)

// longFork is Jepsen's long-fork: writes insert a key never written
// before ([w k 1]); reads read every key of a group of forkGroup keys in
// one snapshot. Under snapshot isolation the reads of a group see the
// inserts in one order: no two reads each see an insert the other missed.
// A process's keys come from its own range (ValueBase), its threads share
// them, so reads race the inserts of the process's other threads.
type longFork struct {
	prefix string
	values
	mu struct {
		sync.Mutex
		written int64 // the highest key handed out
	}
}

// forkGroup is how many keys a read reads.
const forkGroup = 4

func (w *longFork) Name() string { return "long-fork" }

func (w *longFork) Setup(context.Context, *percolator.DB) error { return nil }

func (w *longFork) Next(rng *rand.Rand) (string, []history.Mop) {
	if rng.IntN(2) == 0 {
		k := w.value()
		w.mu.Lock()
		w.mu.written = max(w.mu.written, k)
		w.mu.Unlock()
		return "txn", []history.Mop{{F: history.Write, Key: strconv.FormatInt(k, 10), Arg: 1}}
	}
	w.mu.Lock()
	top := w.mu.written
	w.mu.Unlock()
	if top == 0 {
		top = w.base + 1
	}
	// A group among the last few written, or the one being written.
	g := (top - rng.Int64N(3*forkGroup)) / forkGroup
	mops := make([]history.Mop, forkGroup)
	for i := range mops {
		mops[i] = history.Mop{F: history.Read, Key: strconv.FormatInt(g*forkGroup+int64(i), 10)}
	}
	return "txn", mops
}

func (w *longFork) Apply(ctx context.Context, db *percolator.DB, f string, in []history.Mop) ([]history.Mop, error) {
	mops := cloneMops(in)
	if mops[0].F == history.Write {
		return mops, update(ctx, db, func(tx *percolator.Txn) error {
			return tx.Set(w.prefix+mops[0].Key, Column, formatInts([]int64{mops[0].Arg}))
		})
	}
	return mops, db.View(ctx, func(tx *percolator.Txn) error {
		for i := range mops {
			l, err := getInts(ctx, tx, w.prefix+mops[i].Key)
			if err != nil {
				return err
			}
			mops[i].Read = l
		}
		return nil
	})
}

func (w *longFork) Final() (string, []history.Mop) { return "", nil }

func (w *longFork) Check(h []history.Op) history.Result { return history.CheckLongFork(h) }

// monotonic is counters: increments read a key and write one more, in one
// transaction; reads read several keys in one snapshot. Values written
// are never written twice (a lost update), and no process, nor anyone
// after it in real time, reads a counter below what was seen before.
type monotonic struct{ keyed }

func (w *monotonic) Name() string { return "monotonic" }

func (w *monotonic) Setup(context.Context, *percolator.DB) error { return nil }

func (w *monotonic) Next(rng *rand.Rand) (string, []history.Mop) {
	if rng.IntN(2) == 0 {
		k := w.pick(rng)
		return "txn", []history.Mop{{F: history.Read, Key: k}, {F: history.Write, Key: k}}
	}
	var mops []history.Mop
	for _, i := range rng.Perm(len(w.keys))[:min(3, len(w.keys))] {
		mops = append(mops, history.Mop{F: history.Read, Key: w.keys[i]})
	}
	return "txn", mops
}

func (w *monotonic) Apply(ctx context.Context, db *percolator.DB, f string, in []history.Mop) ([]history.Mop, error) {
	mops := cloneMops(in)
	body := func(tx *percolator.Txn) error {
		for i := range mops {
			if mops[i].F == history.Write {
				mops[i].Arg = counter(mops[i-1].Read) + 1
				if err := tx.Set(w.row(mops[i].Key), Column, formatInts([]int64{mops[i].Arg})); err != nil {
					return err
				}
				continue
			}
			l, err := getInts(ctx, tx, w.row(mops[i].Key))
			if err != nil {
				return err
			}
			mops[i].Read = l
		}
		return nil
	}
	if len(mops) == 2 && mops[1].F == history.Write {
		return mops, update(ctx, db, body)
	}
	return mops, db.View(ctx, body)
}

// counter is a counter's value from its read: 0 when absent.
func counter(read []int64) int64 {
	if len(read) == 0 {
		return 0
	}
	return read[0]
}

func (w *monotonic) Final() (string, []history.Mop) { return "", nil }

func (w *monotonic) Check(h []history.Op) history.Result { return history.CheckMonotonic(h) }
