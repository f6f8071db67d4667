package bench

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator"
)

// The readlocks figure: the latency of reads under a write-heavy bank,
// with reads that wait for the locks they meet and with reads that push
// the locks' transactions past their snapshots (Options.ReadThroughLocks;
// txn/doc.go, "Reads through locks"), side by side, on the embedded store.
const (
	readLocksAccounts = 16 // few: the writers' locks are in the readers' way
	readLocksWriters  = 8
	// readLocksReaders read at a fresh snapshot, the figure's;
	// readLocksViewers in read-only transactions beside them.
	readLocksReaders = 4
	readLocksViewers = 2
	// readLocksAudit is the audit rows each transfer writes besides its
	// two accounts: a transaction of some size, whose locks stand while
	// it prewrites them.
	readLocksAudit = 200
)

// readLocksResult is one turn's measurement.
type readLocksResult struct {
	reads, transfers int
	p50, p99         time.Duration
	stats            percolator.Stats
}

func embeddedReadLocks(ctx context.Context, b *runner, r *Report) error {
	return readLocks(ctx, b, r, func(push bool) (*percolator.DB, string, error) {
		db, err := percolator.Open(ctx, percolator.Options{Dir: filepath.Join(b.opts.Dir, fmt.Sprintf("readlocks-%v", push)), ReadThroughLocks: push})
		return db, "", err
	})
}

// serverReadLocks is the readlocks figure on a server: both sides on the
// one server, each under a row prefix of its own.
func serverReadLocks(ctx context.Context, b *runner, r *Report) error {
	run := rand.Uint64()
	return readLocks(ctx, b, r, func(push bool) (*percolator.DB, string, error) {
		s := b.opts.Server
		db, err := percolator.Open(ctx, percolator.Options{Server: s.Addr, Token: s.Token, TLSCAFile: s.CAFile, ReadThroughLocks: push})
		return db, fmt.Sprintf("bench-readlocks/%016x/%v/", run, push), err
	})
}

// readLocks runs both sides, the DBs open returns (and a row prefix for
// its rows), and reports them.
func readLocks(ctx context.Context, b *runner, r *Report, open func(push bool) (*percolator.DB, string, error)) error {
	d := b.opts.BankDuration
	// Four turns: reads at a fresh snapshot (read-write transactions'
	// reads, which meet the writers' locks) waiting and pushing, the
	// figure's two sides; then reads in read-only transactions, waiting
	// (on the embedded store a snapshot above the newest acknowledged
	// commit, below which the writers' locks seldom are: txn/doc.go,
	// "Read-only snapshots"); then reads at a fresh snapshot of accounts
	// no writer writes, under the same writers: no lock is ever in their
	// way, so their p99 is the least a reader that pushes could reach,
	// and waiting's p99 over it the most pushing could gain.
	turns := []struct {
		name               string
		push, fresh, apart bool
	}{{"waiting", false, true, false}, {"pushing", true, true, false}, {"read-only", false, false, false}, {"apart", false, true, true}}
	var res [4]readLocksResult
	for i, turn := range turns {
		db, prefix, err := open(turn.push)
		if err != nil {
			return err
		}
		end := b.timed(ctx, fmt.Sprintf("readlocks (%s): seconds measured", turn.name), d)
		res[i], err = readLocksRun(ctx, db, prefix, d, turn.fresh, turn.apart)
		end(err)
		_ = db.Close()
		if err != nil {
			return err
		}
	}
	for i, turn := range turns {
		st := res[i].stats
		what := "reads at a fresh snapshot"
		switch {
		case !turn.fresh:
			what = "reads in read-only transactions"
		case turn.apart:
			what = "reads at a fresh snapshot of accounts no writer writes"
		}
		r.printf("readlocks: %-9s (transfers of 2 accounts and %d audit rows) %s p50 %s p99 %s (%d reads, %d transfers; %d lock waits, %d pushes, %d commits pushed past, %d rolled forward)",
			turn.name, readLocksAudit, what, msText(res[i].p50), msText(res[i].p99), res[i].reads, res[i].transfers, st.LockWaits, st.Pushes, st.Repushed, st.RolledForward)
	}
	ratio := show(float64(res[0].p99)/float64(max(res[1].p99, time.Microsecond)), 1)
	r.printf("readlocks: read p99 at a fresh snapshot, waiting / pushing = %sx (target >= 3x: %s)", ratio, r.mark("readlocks: read p99 >= 3x lower pushing", ratio.atLeast(3)))
	r.printf("readlocks: read p99 waiting at a fresh snapshot / in read-only transactions = %sx", show(float64(res[0].p99)/float64(max(res[2].p99, time.Microsecond)), 1))
	r.printf("readlocks: read p99 waiting at a fresh snapshot / of accounts no writer writes = %sx (the most pushing could gain under these writers: a read no lock is in the way of)", show(float64(res[0].p99)/float64(max(res[3].p99, time.Microsecond)), 1))
	return nil
}

// readLocksRun runs the bank on db, its rows under prefix, for d:
// writers transfer between random accounts, readers read two random
// accounts in one snapshot (at a fresh one if fresh, else in a read-only
// transaction; of as many accounts beside the writers' if apart, which
// no writer writes); it returns the readers' latencies.
func readLocksRun(ctx context.Context, db *percolator.DB, prefix string, d time.Duration, fresh, apart bool) (readLocksResult, error) {
	key := func(i int) string { return fmt.Sprintf("%sacct%04d", prefix, i) }
	readFrom := 0
	if apart {
		readFrom = readLocksAccounts
	}
	err := db.Update(ctx, func(tx *percolator.Txn) error {
		for i := range readFrom + readLocksAccounts {
			if err := tx.Set(key(i), "balance", binary.BigEndian.AppendUint64(nil, 100)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return readLocksResult{}, err
	}
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu        sync.Mutex
		lats      []time.Duration
		transfers int
		firstErr  error
		wg        sync.WaitGroup
	)
	fail := func(err error) {
		if err != nil && runCtx.Err() == nil && !errors.Is(err, percolator.ErrConflict) {
			mu.Lock()
			firstErr = cmp.Or(firstErr, err)
			mu.Unlock()
		}
	}
	for range readLocksWriters {
		wg.Go(func() {
			for runCtx.Err() == nil {
				a, c := rand.IntN(readLocksAccounts), rand.IntN(readLocksAccounts-1)
				if c >= a {
					c++
				}
				err := db.Update(runCtx, func(tx *percolator.Txn) error {
					for _, k := range []int{a, c} {
						v, err := tx.Get(runCtx, key(k), "balance")
						if err != nil {
							return err
						}
						n := binary.BigEndian.Uint64(v)
						if k == a {
							n--
						} else {
							n++
						}
						if err := tx.Set(key(k), "balance", binary.BigEndian.AppendUint64(nil, n)); err != nil {
							return err
						}
					}
					id := rand.Uint64()
					for i := range readLocksAudit {
						if err := tx.Set(fmt.Sprintf("%saudit/%016x/%03d", prefix, id, i), "entry", []byte{byte(a), byte(c)}); err != nil {
							return err
						}
					}
					return nil
				})
				if err == nil {
					mu.Lock()
					transfers++
					mu.Unlock()
				}
				fail(err)
			}
		})
	}
	run := db.View
	if fresh {
		// A read-write transaction's snapshot is fresh; it writes
		// nothing, so its commit is no call.
		run = db.Update
	}
	for range readLocksReaders {
		wg.Go(func() {
			for runCtx.Err() == nil {
				a, c := readFrom+rand.IntN(readLocksAccounts), readFrom+rand.IntN(readLocksAccounts)
				start := time.Now()
				err := run(runCtx, func(tx *percolator.Txn) error {
					for _, k := range []int{a, c} {
						if _, err := tx.Get(runCtx, key(k), "balance"); err != nil {
							return err
						}
					}
					return nil
				})
				if err == nil {
					mu.Lock()
					lats = append(lats, time.Since(start))
					mu.Unlock()
				}
				fail(err)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return readLocksResult{}, firstErr
	}
	res := readLocksResult{reads: len(lats), transfers: transfers, stats: db.Stats()}
	res.p50, res.p99 = latencyPercentile(lats, 50), latencyPercentile(lats, 99)
	return res, nil
}
