package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator"
)

// The bank workload of the seeds: transfers between random accounts, while
// read-only transactions keep summing every balance. Snapshot isolation
// holds exactly when every sum equals accounts × initial.

type bankConfig struct {
	tg                target
	accounts, workers int
	readers           int
	duration          time.Duration
	initial           int64
	ack               bool // print "ack <row>" for each committed transfer and record it
	quiet             bool
	pub               *publisher // if set, the run's progress is published here
	// fail ends the run when err says the server is gone (set by bank).
	fail func(err error)
}

type bankStats struct {
	commits, failures atomic.Int64
	snapshots, bad    atomic.Int64
}

const bankCol = "bal"

func accountRow(i int) string { return fmt.Sprintf("acct/%06d", i) }

func runBank(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bank", stderr)
	cfg := bankConfig{}
	cfg.tg.register(fs, "database directory (created if needed)")
	fs.IntVar(&cfg.accounts, "accounts", 1000, "number of accounts")
	fs.IntVar(&cfg.workers, "workers", 64, "concurrent transfer workers")
	fs.IntVar(&cfg.readers, "readers", 2, "concurrent snapshot readers summing all balances")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to run")
	fs.Int64Var(&cfg.initial, "initial", 100, "initial balance of each account")
	fs.BoolVar(&cfg.ack, "ack", false, "record each transfer in its own row and print 'ack ROW' once it committed")
	fs.BoolVar(&cfg.quiet, "quiet", false, "no progress line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := cfg.tg.validate(); err != nil {
		return err
	}
	if cfg.accounts < 2 || cfg.workers < 1 || cfg.readers < 0 || cfg.duration <= 0 || cfg.initial < 0 {
		return usagef("need --accounts >= 2, --workers >= 1, --readers >= 0, --duration > 0, --initial >= 0")
	}
	db, err := cfg.tg.open(ctx, true)
	if err != nil {
		return err
	}
	cfg.pub = startPublishing(cfg.tg.publishDir(), append([]string{"bank"}, args...))
	res, err := bank(ctx, db, cfg, stdout, stderr)
	if err == nil && res.bad > 0 {
		err = fmt.Errorf("%w: %d of %d snapshots saw a wrong total", errFailed, res.bad, res.snapshots)
	}
	cfg.pub.set(func(p *published) { p.Summary = []string{res.String()} })
	cfg.pub.finish(err)
	if res.elapsed > 0 {
		res.print(stdout)
	}
	return errors.Join(err, db.Close())
}

type bankResult struct {
	commits, failures, snapshots, bad int64
	conflicts, resolved               uint64
	elapsed                           time.Duration
}

func (r bankResult) txnPerSec() float64 { return float64(r.commits) / r.elapsed.Seconds() }

func (r bankResult) String() string {
	return fmt.Sprintf("commits %d  conflicts %d  locks resolved %d  failures %d  snapshots %d (wrong totals: %d)  %.0f txn/s",
		r.commits, r.conflicts, r.resolved, r.failures, r.snapshots, r.bad, r.txnPerSec())
}

func (r bankResult) print(w io.Writer) { fmt.Fprintln(w, r.String()) }

// bank runs the workload on db and returns its figures. A server that
// does not answer ends the run: the first transfer or snapshot that fails
// with ErrUnavailable (its operation's retry budget spent) stops the
// others and is the run's error.
func bank(ctx context.Context, db *percolator.DB, cfg bankConfig, acks, progress io.Writer) (bankResult, error) {
	if err := ensureAccounts(ctx, db, cfg); err != nil {
		return bankResult{}, err
	}
	runCtx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	runCtx, stop := context.WithCancelCause(runCtx)
	defer stop(nil)
	cfg.fail = func(err error) {
		if errors.Is(err, percolator.ErrUnavailable) {
			stop(err)
		}
	}
	var st bankStats
	var wg sync.WaitGroup
	var out sync.Mutex
	start := time.Now()
	for w := range cfg.workers {
		wg.Add(1)
		go func() { defer wg.Done(); transferLoop(runCtx, db, cfg, w, &st, &out, acks) }()
	}
	for range cfg.readers {
		wg.Add(1)
		go func() { defer wg.Done(); auditLoop(runCtx, db, cfg, &st, progress) }()
	}
	if !cfg.quiet || cfg.pub != nil {
		go progressLoop(runCtx, &st, start, cfg, progress)
	}
	wg.Wait()
	s := db.Stats()
	var err error
	if cause := context.Cause(runCtx); errors.Is(cause, percolator.ErrUnavailable) {
		err = cause
	}
	return bankResult{
		commits: st.commits.Load(), failures: st.failures.Load(),
		snapshots: st.snapshots.Load(), bad: st.bad.Load(),
		conflicts: s.Conflicts, resolved: s.RolledForward + s.RolledBack,
		elapsed: time.Since(start),
	}, err
}

// ensureAccounts creates the accounts in one transaction unless they
// exist; a run with another account count is refused.
func ensureAccounts(ctx context.Context, db *percolator.DB, cfg bankConfig) error {
	return db.Update(ctx, func(tx *percolator.Txn) error {
		v, err := tx.Get(ctx, "bank/meta", "accounts")
		switch {
		case err == nil && string(v) != strconv.Itoa(cfg.accounts):
			return fmt.Errorf("the bank at %s has %s accounts, not %d", &cfg.tg, v, cfg.accounts)
		case err == nil:
			return nil
		case !errors.Is(err, percolator.ErrNotFound):
			return err
		}
		for i := range cfg.accounts {
			if err := tx.Set(accountRow(i), bankCol, []byte(strconv.FormatInt(cfg.initial, 10))); err != nil {
				return err
			}
		}
		return tx.Set("bank/meta", "accounts", []byte(strconv.Itoa(cfg.accounts)))
	})
}

func transferLoop(ctx context.Context, db *percolator.DB, cfg bankConfig, w int, st *bankStats, out *sync.Mutex, acks io.Writer) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for n := 0; ctx.Err() == nil; n++ {
		a, b := rng.IntN(cfg.accounts), rng.IntN(cfg.accounts-1)
		if b >= a {
			b++
		}
		amount := 1 + rng.Int64N(10)
		xfer := fmt.Sprintf("xfer/%s/%d/%d", run, w, n)
		err := db.Update(ctx, func(tx *percolator.Txn) error {
			return transfer(ctx, tx, accountRow(a), accountRow(b), amount, xfer, cfg.ack)
		})
		if err != nil {
			if ctx.Err() == nil {
				st.failures.Add(1)
				cfg.fail(err)
			}
			continue
		}
		st.commits.Add(1)
		if cfg.ack {
			out.Lock()
			fmt.Fprintf(acks, "ack %s\n", xfer)
			out.Unlock()
		}
	}
}

func transfer(ctx context.Context, tx *percolator.Txn, from, to string, amount int64, xfer string, record bool) error {
	fb, err := balance(ctx, tx, from)
	if err != nil {
		return err
	}
	tb, err := balance(ctx, tx, to)
	if err != nil {
		return err
	}
	if err := tx.Set(from, bankCol, []byte(strconv.FormatInt(fb-amount, 10))); err != nil {
		return err
	}
	if err := tx.Set(to, bankCol, []byte(strconv.FormatInt(tb+amount, 10))); err != nil {
		return err
	}
	if record {
		return tx.Set(xfer, "amount", []byte(strconv.FormatInt(amount, 10)))
	}
	return nil
}

func balance(ctx context.Context, tx *percolator.Txn, row string) (int64, error) {
	v, err := tx.Get(ctx, row, bankCol)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", row, err)
	}
	return strconv.ParseInt(string(v), 10, 64)
}

// auditLoop sums every balance in read-only snapshots.
func auditLoop(ctx context.Context, db *percolator.DB, cfg bankConfig, st *bankStats, log io.Writer) {
	want := int64(cfg.accounts) * cfg.initial
	for ctx.Err() == nil {
		total, n, err := sumBalances(ctx, db)
		if err != nil {
			if ctx.Err() == nil {
				cfg.fail(err)
			}
			continue // the run ended mid-snapshot, or will now
		}
		st.snapshots.Add(1)
		if total != want || n != cfg.accounts {
			st.bad.Add(1)
			fmt.Fprintf(log, "WRONG SNAPSHOT: total %d over %d accounts, want %d over %d\n", total, n, want, cfg.accounts)
		}
	}
}

// sumBalances returns the total and count of all balances in one snapshot.
func sumBalances(ctx context.Context, db *percolator.DB) (total int64, n int, err error) {
	err = db.View(ctx, func(tx *percolator.Txn) error {
		kvs, err := tx.Scan(ctx, "acct/", "acct0", bankCol, 0)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			v, err := strconv.ParseInt(string(kv.Value), 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %w", kv.Row, err)
			}
			total += v
		}
		n = len(kvs)
		return nil
	})
	return total, n, err
}

// progressLoop prints (unless quiet) and publishes (if publishing) a
// progress line every second.
func progressLoop(ctx context.Context, st *bankStats, start time.Time, cfg bankConfig, w io.Writer) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			el := time.Since(start)
			line := fmt.Sprintf("%5.0fs  commits %d  %.0f txn/s  snapshots %d  wrong %d", el.Seconds(),
				st.commits.Load(), float64(st.commits.Load())/el.Seconds(), st.snapshots.Load(), st.bad.Load())
			if !cfg.quiet {
				fmt.Fprintln(w, line)
			}
			if cfg.pub != nil {
				cfg.pub.set(func(p *published) { p.Phase, p.Progress = "transfers", strings.TrimSpace(line) })
			}
		}
	}
}
