package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/internal/ctxwait"
	"github.com/seed-992972ee/percolator/workload"
)

// The two sides of the postgres figure: the same bank of pgAccounts
// accounts, opened with pgInitial each, on percolator's server and on
// PostgreSQL. A transfer reads both balances and writes both back, one
// call per round trip, retrying its conflicts with the same back-off;
// an audit sums every balance in one snapshot; a point read reads one
// balance in a transaction of its own.

const (
	pgAccounts = 1000
	pgInitial  = 1000
	// pgTable is the PostgreSQL side's table, created for the run and
	// dropped at its end.
	pgTable = "percolator_bench_accounts"
	// pgRowPrefix begins the percolator side's account rows, apart from
	// the other figures' rows on the same server; each run's rows are
	// its own below it (serverBank.prefix).
	pgRowPrefix = "bench-postgres/"
	pgBalance   = "bal"
)

// The PostgreSQL side's statements, prepared on each connection as it
// opens (pgx runs a statement prepared under its own text as such).
const (
	pgSelect    = "SELECT balance FROM " + pgTable + " WHERE id = $1"
	pgUpdate    = "UPDATE " + pgTable + " SET balance = $1 WHERE id = $2"
	pgSelectAll = "SELECT balance FROM " + pgTable
)

// errStopped: a transfer that conflicted after its turn ended, given up
// instead of retried (neither side's count includes it).
var errStopped = errors.New("bench: turn ended")

// bankSide is one side of the postgres or the rivals figure. Its methods are safe for
// concurrent use.
type bankSide interface {
	// transfer moves amount from account a to account b in one
	// transaction, retrying while it conflicts unless stop is set, and
	// returns the conflicts it met; errStopped if it gave up.
	transfer(ctx context.Context, a, b int, amount int64, stop *atomic.Bool) (conflicts int, err error)
	// audit sums every balance in one read-only snapshot.
	audit(ctx context.Context) (workload.BankAudit, error)
	// read reads account i's balance in a read-only transaction of its
	// own.
	read(ctx context.Context, i int) error
}

// conflictBackoff is the wait after a conflicted attempt, the one
// db.Update waits (txn.Client.Backoff): jittered, doubling from 1ms up
// to 128ms.
func conflictBackoff(attempt int) time.Duration {
	d := time.Millisecond << min(attempt, 7)
	return d/2 + rand.N(d)
}

// serverBank is the bank on a percolator DB: a server's (the postgres
// figure) or an embedded one (the rivals figure).
type serverBank struct {
	db *percolator.DB
	// prefix begins this run's account rows: pgRowPrefix, the run's
	// start, "/acct/". Fresh rows each run, as the PostgreSQL side's
	// table is: a run does not read through the versions an earlier one
	// left on the same server.
	prefix string
}

func newServerBank(db *percolator.DB) serverBank {
	return serverBank{db: db, prefix: pgRowPrefix + strconv.FormatInt(time.Now().UnixNano(), 36) + "/acct/"}
}

func (s serverBank) account(i int) string { return fmt.Sprintf("%s%06d", s.prefix, i) }

// open sets every account to pgInitial in one transaction.
func (s serverBank) open(ctx context.Context) error {
	return s.db.Update(ctx, func(tx *percolator.Txn) error {
		for i := range pgAccounts {
			if err := tx.Set(s.account(i), pgBalance, []byte(strconv.Itoa(pgInitial))); err != nil {
				return err
			}
		}
		return nil
	})
}

// drop deletes the accounts.
func (s serverBank) drop(ctx context.Context) error {
	return s.db.Update(ctx, func(tx *percolator.Txn) error {
		for i := range pgAccounts {
			if err := tx.Delete(s.account(i), pgBalance); err != nil {
				return err
			}
		}
		return nil
	})
}

// transfer is db.Update's transaction and retries; a retry after stop
// gives up.
func (s serverBank) transfer(ctx context.Context, a, b int, amount int64, stop *atomic.Bool) (int, error) {
	attempts := 0
	err := s.db.Update(ctx, func(tx *percolator.Txn) error {
		if attempts++; attempts > 1 && stop.Load() {
			return errStopped
		}
		return workload.Transfer(ctx, tx, s.account(a), s.account(b), amount)
	})
	return max(attempts-1, 0), err
}

func (s serverBank) audit(ctx context.Context) (workload.BankAudit, error) {
	return workload.AuditAccounts(ctx, s.db, s.prefix)
}

func (s serverBank) read(ctx context.Context, i int) error {
	return s.db.View(ctx, func(tx *percolator.Txn) error {
		_, err := tx.Get(ctx, s.account(i), pgBalance)
		return err
	})
}

// pgBank is the bank on PostgreSQL: transfers in REPEATABLE READ
// transactions (its snapshot isolation), audits in REPEATABLE READ READ
// ONLY ones, one statement per round trip, on a pool of connections
// opened before any is measured.
type pgBank struct {
	pool *pgxpool.Pool
	// created: the table is there, and each connection opened prepares
	// the statements.
	created *atomic.Bool
}

// openPG connects a pool of conns connections to the PostgreSQL server
// at url (a libpq URL, checked by Options.Validate). Call create, which
// opens them all, before measuring.
func openPG(ctx context.Context, url string, conns int) (pgBank, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return pgBank{}, err
	}
	cfg.MaxConns, cfg.MinConns = int32(conns), 0
	created := new(atomic.Bool)
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if !created.Load() {
			return nil
		}
		for _, sql := range []string{pgSelect, pgUpdate, pgSelectAll} {
			if _, err := c.Prepare(ctx, sql, sql); err != nil {
				return err
			}
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return pgBank{}, err
	}
	return pgBank{pool, created}, nil
}

// warm opens n connections of the pool at once, each preparing the
// statements, so that no measurement pays for opening one.
func warm(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { conns[i], errs[i] = pool.Acquire(ctx) })
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Release()
		}
	}
	return errors.Join(errs...)
}

// settings are the server's version and the settings that make its
// commits durable, which the figure needs on.
func (p pgBank) settings(ctx context.Context) (version, syncCommit, fsync string, err error) {
	for _, s := range []struct {
		name string
		v    *string
	}{{"server_version", &version}, {"synchronous_commit", &syncCommit}, {"fsync", &fsync}} {
		if err := p.pool.QueryRow(ctx, "SHOW "+s.name).Scan(s.v); err != nil {
			return "", "", "", fmt.Errorf("SHOW %s: %w", s.name, err)
		}
	}
	return version, syncCommit, fsync, nil
}

// create creates the table with every account at pgInitial; a table of
// that name already there is refused, not dropped (an earlier run's
// killed before its end left it: drop it by hand).
func (p pgBank) create(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, "CREATE TABLE "+pgTable+" (id integer PRIMARY KEY, balance bigint NOT NULL)")
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P07" { // duplicate_table
		return fmt.Errorf("PostgreSQL table %s exists (a run killed before its end left it?): drop it to run this figure (DROP TABLE %s)", pgTable, pgTable)
	}
	if err != nil {
		return err
	}
	if _, err := p.pool.Exec(ctx, "INSERT INTO "+pgTable+" SELECT g, $1 FROM generate_series(0, $2::integer - 1) g", pgInitial, pgAccounts); err != nil {
		return err
	}
	if _, err := p.pool.Exec(ctx, "ANALYZE "+pgTable); err != nil {
		return err
	}
	// The connections opened so far prepared nothing (the table was not
	// there): open the pool afresh, every connection at once.
	p.created.Store(true)
	p.pool.Reset()
	return warm(ctx, p.pool, int(p.pool.Config().MaxConns))
}

func (p pgBank) drop(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, "DROP TABLE "+pgTable)
	return err
}

// pgRetryable: a serialization failure or a deadlock, which the
// transaction is retried after, as percolator's conflicts are.
func pgRetryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// transfer retries as db.Update does: after each conflicted attempt it
// waits conflictBackoff.
func (p pgBank) transfer(ctx context.Context, a, b int, amount int64, stop *atomic.Bool) (int, error) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 && stop.Load() {
			return attempt, errStopped
		}
		err := p.tryTransfer(ctx, a, b, amount)
		if !pgRetryable(err) {
			return attempt, err
		}
		if err := ctxwait.Sleep(ctx, conflictBackoff(attempt)); err != nil {
			return attempt + 1, err
		}
	}
}

// tryTransfer is one attempt: BEGIN, two SELECTs, two UPDATEs, COMMIT.
func (p pgBank) tryTransfer(ctx context.Context, a, b int, amount int64) (err error) {
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(ctx)
		}
	}()
	var fb, tb int64
	if err := tx.QueryRow(ctx, pgSelect, a).Scan(&fb); err != nil {
		return err
	}
	if err := tx.QueryRow(ctx, pgSelect, b).Scan(&tb); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, pgUpdate, fb-amount, a); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, pgUpdate, tb+amount, b); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// audit reads every balance and sums them here, as the percolator side
// does its scan's.
func (p pgBank) audit(ctx context.Context) (a workload.BankAudit, err error) {
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return a, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, pgSelectAll)
	if err != nil {
		return a, err
	}
	var v int64
	_, err = pgx.ForEachRow(rows, []any{&v}, func() error {
		a.Total += v
		a.Accounts++
		return nil
	})
	if err != nil {
		return a, err
	}
	return a, tx.Commit(ctx)
}

func (p pgBank) read(ctx context.Context, i int) error {
	var v int64
	return p.pool.QueryRow(ctx, pgSelect, i).Scan(&v)
}
