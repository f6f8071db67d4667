package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator"
)

var (
	// ErrInvalidArgument: options out of range (BankOptions.Validate).
	ErrInvalidArgument = errors.New("workload: invalid argument")
	// ErrAccounts: the store holds a bank with another number of
	// accounts (an *AccountsError says how many).
	ErrAccounts = errors.New("workload: the bank has another number of accounts")
	// ErrWrongTotal: a snapshot's balances do not sum to what the bank
	// opened with (a *WrongTotalError says what was found).
	ErrWrongTotal = errors.New("workload: wrong total")
	// ErrLostTransfer: a transfer acknowledged as committed is not there.
	ErrLostTransfer = errors.New("workload: acknowledged transfer lost")
)

// BankOptions configures a bank run. The zero value is usable: 1,000
// accounts opened with nothing, 64 workers, no auditor, 10 seconds.
type BankOptions struct {
	// Accounts is the number of accounts, at least 2 (0: 1,000).
	Accounts int
	// Initial is each account's opening balance, at least 0.
	Initial int64
	// Workers transfer concurrently, at least 1 (0: 64).
	Workers int
	// Readers audit concurrently; 0: none.
	Readers int
	// Duration is how long the transfers go on (0: 10s).
	Duration time.Duration
	// Record makes each transfer write a row of its own, which OnCommit
	// is given once it committed.
	Record bool
	// OnCommit, if set, is called after each committed transfer with its
	// row ("" without Record).
	OnCommit func(row string)
	// OnWrong, if set, is called with each audit that found a wrong total.
	OnWrong func(BankAudit)
	// OnProgress, if set, is called every second with the counts so far
	// and the time since the transfers started.
	OnProgress func(BankCounts, time.Duration)
}

// EnsureDefaults sets the zero fields that have defaults.
func (o *BankOptions) EnsureDefaults() {
	if o.Accounts == 0 {
		o.Accounts = 1000
	}
	if o.Workers == 0 {
		o.Workers = 64
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
}

// Validate checks the options as given (EnsureDefaults first, to take
// the defaults): an error wrapping ErrInvalidArgument names the field.
func (o *BankOptions) Validate() error {
	switch {
	case o.Accounts < 2:
		return fmt.Errorf("%w: Accounts %d, want at least 2", ErrInvalidArgument, o.Accounts)
	case o.Workers < 1:
		return fmt.Errorf("%w: Workers %d, want at least 1", ErrInvalidArgument, o.Workers)
	case o.Readers < 0:
		return fmt.Errorf("%w: Readers %d, want at least 0", ErrInvalidArgument, o.Readers)
	case o.Duration <= 0:
		return fmt.Errorf("%w: Duration %s, want more than 0", ErrInvalidArgument, o.Duration)
	case o.Initial < 0:
		return fmt.Errorf("%w: Initial %d, want at least 0", ErrInvalidArgument, o.Initial)
	}
	return nil
}

// BankCounts are a run's counters: committed and failed transfers, audits
// and the audits that found a wrong total.
type BankCounts struct {
	Commits, Failures, Snapshots, Wrong int64
}

// BankResult is what a run did: its counts, the DB's write conflicts and
// the locks it resolved (since the DB was opened), and how long the
// transfers ran.
type BankResult struct {
	BankCounts
	Conflicts, Resolved uint64
	Elapsed             time.Duration
}

// TxnPerSec is the committed transfers per second.
func (r BankResult) TxnPerSec() float64 { return float64(r.Commits) / r.Elapsed.Seconds() }

func (r BankResult) String() string {
	return fmt.Sprintf("commits %d  conflicts %d  locks resolved %d  failures %d  snapshots %d (wrong totals: %d)  %.0f txn/s",
		r.Commits, r.Conflicts, r.Resolved, r.Failures, r.Snapshots, r.Wrong, r.TxnPerSec())
}

// AccountsError is ErrAccounts with what the store holds.
type AccountsError struct {
	Have string // the account count the store's bank was opened with
	Want int
}

func (e *AccountsError) Error() string {
	return fmt.Sprintf("the bank has %s accounts, not %d", e.Have, e.Want)
}

// Is makes an AccountsError match ErrAccounts.
func (e *AccountsError) Is(target error) bool { return target == ErrAccounts }

const (
	balanceCol = "bal"
	metaRow    = "bank/meta"
)

func accountRow(i int) string { return fmt.Sprintf("acct/%06d", i) }

// bankRun is one run of the bank: its options, counters and the
// serialization of its callbacks.
type bankRun struct {
	db   *percolator.DB
	opts BankOptions
	// stop ends the run with its cause (a server gone).
	stop context.CancelCauseFunc

	commits, failures, snapshots, wrong atomic.Int64

	commitMu, wrongMu sync.Mutex // serialize OnCommit, OnWrong
}

// RunBank runs the bank on db (see the package doc) and returns its
// figures. The error is the run's end when a server did not answer
// (percolator.ErrUnavailable), ErrAccounts, or a failure to open the
// accounts; wrong audits are counted in the result, not an error.
func RunBank(ctx context.Context, db *percolator.DB, opts BankOptions) (BankResult, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return BankResult{}, err
	}
	if err := openAccounts(ctx, db, opts); err != nil {
		return BankResult{}, err
	}
	runCtx, cancel := context.WithTimeout(ctx, opts.Duration)
	defer cancel()
	runCtx, stop := context.WithCancelCause(runCtx)
	defer stop(nil)
	r := &bankRun{db: db, opts: opts, stop: stop}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range opts.Workers {
		wg.Go(func() { r.transferLoop(runCtx, w) })
	}
	for range opts.Readers {
		wg.Go(func() { r.auditLoop(runCtx) })
	}
	if opts.OnProgress != nil {
		wg.Go(func() { r.progressLoop(runCtx, start) })
	}
	wg.Wait()
	s := db.Stats()
	res := BankResult{BankCounts: r.counts(), Conflicts: s.Conflicts, Resolved: s.RolledForward + s.RolledBack, Elapsed: time.Since(start)}
	if cause := context.Cause(runCtx); errors.Is(cause, percolator.ErrUnavailable) {
		return res, cause
	}
	return res, nil
}

func (r *bankRun) counts() BankCounts {
	return BankCounts{Commits: r.commits.Load(), Failures: r.failures.Load(), Snapshots: r.snapshots.Load(), Wrong: r.wrong.Load()}
}

// failed counts a failure of the run's own (not its end), and ends the
// run when err says the server is gone.
func (r *bankRun) failed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return // the run ended mid-transaction
	}
	if errors.Is(err, percolator.ErrUnavailable) {
		r.stop(err)
	}
}

// openAccounts creates the accounts in one transaction unless they
// exist; a bank with another account count is refused.
func openAccounts(ctx context.Context, db *percolator.DB, opts BankOptions) error {
	return db.Update(ctx, func(tx *percolator.Txn) error {
		v, err := tx.Get(ctx, metaRow, "accounts")
		switch {
		case err == nil && string(v) != strconv.Itoa(opts.Accounts):
			return &AccountsError{Have: string(v), Want: opts.Accounts}
		case err == nil:
			return nil
		case !errors.Is(err, percolator.ErrNotFound):
			return err
		}
		for i := range opts.Accounts {
			if err := tx.Set(accountRow(i), balanceCol, []byte(strconv.FormatInt(opts.Initial, 10))); err != nil {
				return err
			}
		}
		return tx.Set(metaRow, "accounts", []byte(strconv.Itoa(opts.Accounts)))
	})
}

func (r *bankRun) transferLoop(ctx context.Context, w int) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for n := 0; ctx.Err() == nil; n++ {
		a, b := rng.IntN(r.opts.Accounts), rng.IntN(r.opts.Accounts-1)
		if b >= a {
			b++
		}
		amount := 1 + rng.Int64N(10)
		row := ""
		if r.opts.Record {
			row = fmt.Sprintf("xfer/%s/%d/%d", run, w, n)
		}
		err := r.db.Update(ctx, func(tx *percolator.Txn) error {
			return transfer(ctx, tx, accountRow(a), accountRow(b), amount, row)
		})
		if err != nil {
			if ctx.Err() == nil {
				r.failures.Add(1)
			}
			r.failed(ctx, err)
			continue
		}
		r.commits.Add(1)
		if r.opts.OnCommit != nil {
			r.commitMu.Lock()
			r.opts.OnCommit(row)
			r.commitMu.Unlock()
		}
	}
}

// Transfer moves amount from the account at row from to the one at row
// to, in tx: the bank's transfer, for a bank of accounts kept elsewhere
// (bench's, under a prefix of its own).
func Transfer(ctx context.Context, tx *percolator.Txn, from, to string, amount int64) error {
	return transfer(ctx, tx, from, to, amount, "")
}

// transfer moves amount from one account to another and, if row is not
// "", records it there.
func transfer(ctx context.Context, tx *percolator.Txn, from, to string, amount int64, row string) error {
	// Both balances in one read: one round trip over a server.
	vs, err := tx.GetMany(ctx, []percolator.CellKey{{Row: from, Column: balanceCol}, {Row: to, Column: balanceCol}})
	if err != nil {
		return err
	}
	fb, err := parseBalance(from, vs[0])
	if err != nil {
		return err
	}
	tb, err := parseBalance(to, vs[1])
	if err != nil {
		return err
	}
	if err := tx.Set(from, balanceCol, []byte(strconv.FormatInt(fb-amount, 10))); err != nil {
		return err
	}
	if err := tx.Set(to, balanceCol, []byte(strconv.FormatInt(tb+amount, 10))); err != nil {
		return err
	}
	if row != "" {
		return tx.Set(row, "amount", []byte(strconv.FormatInt(amount, 10)))
	}
	return nil
}

// parseBalance decodes an account's balance as GetMany returned it (nil:
// the account has none).
func parseBalance(row string, v []byte) (int64, error) {
	if v == nil {
		return 0, fmt.Errorf("%s: %w", row, percolator.ErrNotFound)
	}
	return strconv.ParseInt(string(v), 10, 64)
}

// auditLoop audits until the run ends.
func (r *bankRun) auditLoop(ctx context.Context) {
	for ctx.Err() == nil {
		a, err := AuditBank(ctx, r.db)
		if err != nil {
			r.failed(ctx, err)
			continue // the run ended mid-snapshot, or will now
		}
		r.snapshots.Add(1)
		if a.Check(r.opts.Accounts, r.opts.Initial) == nil {
			continue
		}
		r.wrong.Add(1)
		if r.opts.OnWrong != nil {
			r.wrongMu.Lock()
			r.opts.OnWrong(a)
			r.wrongMu.Unlock()
		}
	}
}

// progressLoop reports the counts every second until the run ends.
func (r *bankRun) progressLoop(ctx context.Context, start time.Time) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r.opts.OnProgress(r.counts(), time.Since(start))
		}
	}
}
