package workload

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/history"
)

// observed is Percolator's incremental processing: transactions append a
// unique value to the list in a key's observed column, and an observer,
// run by workers (Work) in processes of their own, appends the last
// element of the list it reads to the key's Column. The final read waits
// for the observers to catch up, then reads both. Checked
// (history.CheckObserver): every committed change followed by a run, at
// most one run per change, runs in the lists' order, none of a change
// never committed.
type observed struct {
	keyed
	values
	name, column string // the observer and its column: the run's own
}

// observerFinalWait bounds how long the final read waits for the
// observers to follow the last changes (workers restarted after the
// faults find their backlog first).
const observerFinalWait = 60 * time.Second

func newObserved(o CheckedOptions) *observed {
	return &observed{keyed: newKeyed(o, 6), values: values{base: o.ValueBase}, name: ObserverName(o.Prefix), column: ObservedColumn(o.Prefix)}
}

// ObserverName is the observer workload's observer under the row prefix
// of a run: an observer watches its column in every row of the store, so
// each run has its own.
func ObserverName(prefix string) string { return runName(prefix) + "_obs" }

// ObservedColumn is the column the observer workload's observer watches
// under the row prefix of a run.
func ObservedColumn(prefix string) string { return runName(prefix) + "_in" }

// IsObserverUnder reports whether an observer name is the observer
// workload's for a run under prefix or a prefix of its.
func IsObserverUnder(name, prefix string) bool {
	return strings.HasPrefix(name, runName(prefix)+"_") && strings.HasSuffix(name, "_obs")
}

// runName is a row prefix as a name: its "/" as "_".
func runName(prefix string) string {
	n := strings.ReplaceAll(strings.TrimSuffix(prefix, "/"), "/", "_")
	if n == "" {
		return "observed"
	}
	return n
}

func (w *observed) Name() string { return "observer" }

// Setup registers the observer (with its code, which a process that runs
// no workers never uses): a write before the registration is found by its
// backfill.
func (w *observed) Setup(ctx context.Context, db *percolator.DB) error {
	return db.Observe(ctx, percolator.Observer{Name: w.name, Column: w.column, Fn: w.run})
}

// run is the observer's code: it appends the last element of the list it
// reads to the key's processed values.
func (w *observed) run(ctx context.Context, tx *percolator.Txn, row, column string) error {
	in, err := getIntsAt(ctx, tx, row, column)
	if err != nil || len(in) == 0 {
		return err
	}
	out, err := getIntsAt(ctx, tx, row, Column)
	if err != nil {
		return err
	}
	return tx.Set(row, Column, formatInts(append(out, in[len(in)-1])))
}

// Work runs the observer's workers on db until ctx ends.
func (w *observed) Work(ctx context.Context, db *percolator.DB) error {
	if err := w.Setup(ctx, db); err != nil {
		return err
	}
	_, err := db.RunWorkers(ctx, percolator.WorkerOptions{Scanners: 2, MaxIdle: 100 * time.Millisecond})
	return err
}

// Next appends to a hot key (many changes, collapsed into fewer runs)
// or, three times as often, to one of many cold keys (a change or two
// each, so that a lost notification most likely leaves the last change
// of its key unprocessed, which the final read sees).
func (w *observed) Next(rng *rand.Rand) (string, []history.Mop) {
	k := w.pick(rng)
	if rng.IntN(4) != 0 {
		k = "c" + strconv.Itoa(rng.IntN(observerColdKeys))
	}
	return "append", []history.Mop{{F: history.Append, Key: k, Arg: w.value()}}
}

// observerColdKeys is how many cold keys the observer workload writes.
const observerColdKeys = 10_000

func (w *observed) Apply(ctx context.Context, db *percolator.DB, f string, in []history.Mop) ([]history.Mop, error) {
	if f == "final" {
		return w.final(ctx, db)
	}
	mops := cloneMops(in)
	err := update(ctx, db, func(tx *percolator.Txn) error {
		row := w.row(mops[0].Key)
		l, err := getIntsAt(ctx, tx, row, w.column)
		if err != nil {
			return err
		}
		return tx.Set(row, w.column, formatInts(append(l, mops[0].Arg)))
	})
	return mops, err
}

// final reads every key's list and processed values, again until every
// last change was processed, or none is left to process (no notification
// of the column pending before the read), or observerFinalWait has
// passed: the checker judges the last read.
func (w *observed) final(ctx context.Context, db *percolator.DB) ([]history.Mop, error) {
	deadline := time.Now().Add(observerFinalWait)
	for {
		// Pending first: a run commits before it clears its
		// notification, so a read after none is pending sees every run.
		pending, err := w.pending(ctx, db)
		if err != nil {
			return nil, err
		}
		mops, caught, err := w.read(ctx, db)
		if err != nil || caught || pending == 0 || time.Now().After(deadline) {
			return mops, err
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// pending is how many cells of the observed column have notifications
// pending.
func (w *observed) pending(ctx context.Context, db *percolator.DB) (int, error) {
	st, err := db.ObserverStatus(ctx)
	if err != nil {
		return 0, err
	}
	for _, c := range st.Columns {
		if c.Column == w.column {
			return c.Pending, nil
		}
	}
	return 0, nil
}

// read reads, in one snapshot, every key's list and processed values
// (the hot keys always, the cold keys written) and reports whether the
// observer has followed every key's last change.
func (w *observed) read(ctx context.Context, db *percolator.DB) ([]history.Mop, bool, error) {
	var mops []history.Mop
	caught := true
	err := db.View(ctx, func(tx *percolator.Txn) error {
		mops, caught = nil, true
		lists, err := w.scan(ctx, tx, w.column)
		if err != nil {
			return err
		}
		runs, err := w.scan(ctx, tx, Column)
		if err != nil {
			return err
		}
		keys := slices.Clone(w.keys)
		for k := range lists {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			in, out := lists[k], runs[k]
			if in == nil {
				in = []int64{}
			}
			if out == nil {
				out = []int64{}
			}
			mops = append(mops, history.Mop{F: history.Read, Key: k, Read: in}, history.Mop{F: history.Processed, Key: k, Read: out})
			if len(in) > 0 && (len(out) == 0 || out[len(out)-1] != in[len(in)-1]) {
				caught = false
			}
		}
		return nil
	})
	return mops, caught, err
}

// scan reads column's lists of every row under the prefix, by key.
func (w *observed) scan(ctx context.Context, tx *percolator.Txn, column string) (map[string][]int64, error) {
	kvs, err := tx.Scan(ctx, w.prefix, w.prefix+"\xff", column, 0)
	if err != nil {
		return nil, err
	}
	m := make(map[string][]int64, len(kvs))
	for _, kv := range kvs {
		l, err := parseInts(kv.Value)
		if err != nil {
			return nil, err
		}
		m[strings.TrimPrefix(string(kv.Row), w.prefix)] = l
	}
	return m, nil
}

func (w *observed) Final() (string, []history.Mop) {
	var mops []history.Mop
	for _, k := range w.keys {
		mops = append(mops, history.Mop{F: history.Read, Key: k}, history.Mop{F: history.Processed, Key: k})
	}
	return "final", mops
}

func (w *observed) Check(h []history.Op) history.Result { return history.CheckObserver(h) }
