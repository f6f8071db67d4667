package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"

	"github.com/seed-992972ee/percolator"
)

// The postgres figure: percolator's server (Options.Server) against
// PostgreSQL (Options.Postgres) on the same bank, side by side in one
// run. Each measurement runs the sides in turns of BankDuration,
// PostgreSQL first, pgTurns each, and compares the sums of the turns, so
// that a noisy machine's drift hits both alike.

// pgTurns is the turns of each side in each measurement.
const pgTurns = 2

// The figure's loads: transfer workers at the two concurrencies
// compared, the readers auditing beside them, and the point readers.
const (
	pgManyWorkers, pgFewWorkers = 64, 16
	pgReaders                   = 2
	pgPointReaders              = 8
	// pgRPCTransfers is the transfers, one at a time, whose RPCs the
	// figure counts.
	pgRPCTransfers = 200
)

// CheckPostgresURL checks a PostgreSQL URL (Options.Postgres) as the
// postgres figure will connect with it: a libpq URL (postgres:// or
// postgresql://) that pgx accepts. It connects to nothing.
func CheckPostgresURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL (want postgres://USER@HOST:PORT/DATABASE)")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("scheme %q, want postgres:// or postgresql://", u.Scheme)
	}
	if _, err := pgxpool.ParseConfig(s); err != nil {
		return err
	}
	return nil
}

// postgresWhere names the server and database of url, not its user or
// password.
func postgresWhere(s string) string {
	cfg, err := pgxpool.ParseConfig(s)
	if err != nil {
		return "?"
	}
	c := cfg.ConnConfig
	return fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
}

// postgresFigure: see the comment at the top of this file.
func postgresFigure(ctx context.Context, b *runner, r *Report) error {
	if b.opts.Postgres == "" {
		r.printf("postgres: skipped: no PostgreSQL server to measure against (give --postgres URL)")
		return nil
	}
	counter := &rpcCounter{n: map[string]int{}}
	sides, closeAll, err := b.openPostgresSides(ctx, counter, r)
	if err != nil {
		return err
	}
	defer closeAll()
	many, err := b.bankTurns(ctx, sides, pgManyWorkers)
	if err != nil {
		return err
	}
	few, err := b.bankTurns(ctx, sides, pgFewWorkers)
	if err != nil {
		return err
	}
	reads, err := b.pointReads(ctx, sides)
	if err != nil {
		return err
	}
	rpcs, syncs, err := b.countTransferRPCs(ctx, sides.server, counter)
	if err != nil {
		return err
	}
	printPostgres(r, many, few, reads, rpcs, syncs)
	if wrong := many[0].wrong + many[1].wrong + few[0].wrong + few[1].wrong; wrong > 0 {
		return fmt.Errorf("%w: %d snapshots with a wrong total", ErrCheck, wrong)
	}
	return nil
}

// postgresSides are the figure's two sides; index 0 of a pair is
// percolator's server, 1 PostgreSQL.
type postgresSides struct {
	server serverBank
	pg     pgBank
}

func (s postgresSides) pair() [2]bankSide { return [2]bankSide{s.server, s.pg} }

// openPostgresSides opens a DB on the server, its calls counted by
// counter, and a pool on PostgreSQL; checks that PostgreSQL commits
// durably (printing its settings); and opens both banks. What it
// returns closes all, the banks dropped first.
func (b *runner) openPostgresSides(ctx context.Context, counter *rpcCounter, r *Report) (postgresSides, func(), error) {
	var cl closers
	s := b.opts.Server
	db, err := percolator.Open(ctx, percolator.Options{Server: s.Addr, Token: s.Token, TLSCAFile: s.CAFile, AsyncCommit: b.opts.AsyncCommit,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(counter.unary), grpc.WithChainStreamInterceptor(counter.streamMessages)}})
	if err != nil {
		return postgresSides{}, nil, err
	}
	cl.add(func() { _ = db.Close() })
	pg, err := openPG(ctx, b.opts.Postgres, pgManyWorkers+pgReaders)
	if err != nil {
		cl.closeAll()
		return postgresSides{}, nil, fmt.Errorf("PostgreSQL %s: %w", postgresWhere(b.opts.Postgres), err)
	}
	cl.add(pg.pool.Close)
	sides := postgresSides{server: newServerBank(db), pg: pg}
	if err := b.openBanks(ctx, sides, &cl, r); err != nil {
		cl.closeAll()
		return postgresSides{}, nil, err
	}
	return sides, cl.closeAll, nil
}

// openBanks checks PostgreSQL's durability and creates both banks,
// each dropped at the end, even after an interrupt.
func (b *runner) openBanks(ctx context.Context, sides postgresSides, cl *closers, r *Report) error {
	version, syncCommit, fsync, err := sides.pg.settings(ctx)
	if err != nil {
		return err
	}
	commits := "two-phase commits"
	if b.opts.AsyncCommit {
		commits = "async commits"
	}
	r.printf("postgres: percolator server %s (%s) vs PostgreSQL %s at %s (synchronous_commit %s, fsync %s); bank of %s accounts, %d readers auditing; %d turns of %s each side, alternating",
		b.opts.Server.Addr, commits, version, postgresWhere(b.opts.Postgres), syncCommit, fsync, group(pgAccounts), pgReaders, pgTurns, b.opts.BankDuration)
	if (syncCommit != "on" && syncCommit != "remote_apply") || fsync != "on" {
		return fmt.Errorf("%w: PostgreSQL commits without waiting for its disk (synchronous_commit %s, fsync %s), percolator's server with: the figure compares durable commits (set synchronous_commit on and fsync on in the server's configuration)",
			ErrInvalidArgument, syncCommit, fsync)
	}
	cleanup := func(drop func(context.Context) error) func() {
		return func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := drop(dctx); err != nil {
				fmt.Fprintf(b.opts.Log, "bench: postgres: dropping the bank: %v\n", err)
			}
		}
	}
	if err := sides.pg.create(ctx); err != nil {
		return err
	}
	cl.add(cleanup(sides.pg.drop))
	if err := sides.server.open(ctx); err != nil {
		return err
	}
	cl.add(cleanup(sides.server.drop))
	return nil
}

// bankTurn is what one side did in one or more turns of the bank: its
// committed transfers' latencies (as many as it committed), the
// conflicts it retried, its audits and those with a wrong total, and
// its time. It is plain data, filled once its turns ended.
type bankTurn struct {
	latencies                   []time.Duration
	conflicts, snapshots, wrong int64
	elapsed                     time.Duration
}

func (t *bankTurn) commits() int64 { return int64(len(t.latencies)) }

// perSec is committed transfers per second.
func (t *bankTurn) perSec() float64 { return float64(t.commits()) / t.elapsed.Seconds() }

// add sums another turn into t.
func (t *bankTurn) add(o *bankTurn) {
	t.latencies = append(t.latencies, o.latencies...)
	t.conflicts += o.conflicts
	t.snapshots += o.snapshots
	t.wrong += o.wrong
	t.elapsed += o.elapsed
}

// bankTurns measures the bank at workers on both sides, pgTurns turns
// each, alternating, and returns the sums, percolator's server first.
func (b *runner) bankTurns(ctx context.Context, sides postgresSides, workers int) ([2]*bankTurn, error) {
	sum := [2]*bankTurn{{}, {}}
	d := b.opts.BankDuration
	end := b.timed(ctx, fmt.Sprintf("postgres: bank at %d workers, seconds measured", workers), 2*pgTurns*d)
	for range pgTurns {
		for _, i := range []int{1, 0} { // PostgreSQL first
			t, err := runBankTurn(ctx, sides.pair()[i], workers, pgReaders, d)
			if err == nil {
				err = ctx.Err()
			}
			if err != nil {
				end(err)
				return sum, fmt.Errorf("%s at %d workers: %w", sideName(i), workers, err)
			}
			sum[i].add(t)
		}
	}
	end(nil)
	return sum, nil
}

func sideName(i int) string { return [2]string{"percolator server", "PostgreSQL"}[i] }

// bankTurnRun is one turn under way: what its goroutines count.
type bankTurnRun struct {
	side bankSide
	stop atomic.Bool
	// conflicts, snapshots and wrong count as bankTurn's do; failures
	// the transfers and audits that failed otherwise.
	conflicts, snapshots, wrong, failures atomic.Int64
	mu                                    struct {
		sync.Mutex
		latencies []time.Duration
		first     error // the first failure
	}
}

// runBankTurn runs workers transferring and readers auditing on side
// for d. A transfer under way as the turn ends completes and counts
// (its time counts too: the turn's time is until every worker is done);
// one conflicted then is given up. A transfer or audit that fails (not a
// conflict, nor the end of ctx) fails the turn: a side that fails is
// not measured.
func runBankTurn(ctx context.Context, side bankSide, workers, readers int, d time.Duration) (*bankTurn, error) {
	r := &bankTurnRun{side: side}
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() { r.transferLoop(ctx, rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))) })
	}
	for range readers {
		wg.Go(func() { r.auditLoop(ctx) })
	}
	timer := time.NewTimer(d)
	select {
	case <-timer.C:
	case <-ctx.Done():
		timer.Stop()
	}
	r.stop.Store(true)
	wg.Wait()
	t := &bankTurn{latencies: r.mu.latencies, conflicts: r.conflicts.Load(), snapshots: r.snapshots.Load(), wrong: r.wrong.Load(), elapsed: time.Since(start)}
	if r.mu.first != nil {
		return t, fmt.Errorf("%d transfers and audits failed, the first: %w", r.failures.Load(), r.mu.first)
	}
	return t, nil
}

func (r *bankTurnRun) transferLoop(ctx context.Context, rng *rand.Rand) {
	var lat []time.Duration
	for !r.stop.Load() && ctx.Err() == nil {
		a, b := rng.IntN(pgAccounts), rng.IntN(pgAccounts-1)
		if b >= a {
			b++
		}
		began := time.Now()
		c, err := r.side.transfer(ctx, a, b, 1+rng.Int64N(10), &r.stop)
		r.conflicts.Add(int64(c))
		switch {
		case err == nil:
			lat = append(lat, time.Since(began))
		case !errors.Is(err, errStopped):
			r.failed(ctx, err)
		}
	}
	r.mu.Lock()
	r.mu.latencies = append(r.mu.latencies, lat...)
	r.mu.Unlock()
}

func (r *bankTurnRun) auditLoop(ctx context.Context) {
	for !r.stop.Load() && ctx.Err() == nil {
		a, err := r.side.audit(ctx)
		if err != nil {
			r.failed(ctx, fmt.Errorf("audit: %w", err))
			continue
		}
		r.snapshots.Add(1)
		if a.Check(pgAccounts, pgInitial) != nil {
			r.wrong.Add(1)
		}
	}
}

// failed counts a failure, unless ctx ended (the run was interrupted).
func (r *bankTurnRun) failed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	r.failures.Add(1)
	r.mu.Lock()
	if r.mu.first == nil {
		r.mu.first = err
	}
	r.mu.Unlock()
}

// pointReads measures one-read transactions from pgPointReaders clients
// on both sides, pgTurns turns each, alternating, and returns their
// rates, percolator's server first.
func (b *runner) pointReads(ctx context.Context, sides postgresSides) ([2]float64, error) {
	var sum [2]float64
	d := b.opts.BankDuration
	end := b.timed(ctx, "postgres: point reads, seconds measured", 2*pgTurns*d)
	for range pgTurns {
		for _, i := range []int{1, 0} {
			side := sides.pair()[i]
			var failed atomic.Pointer[error]
			n := rate(ctx, pgPointReaders, d, func(rng *rand.Rand) error {
				err := side.read(ctx, rng.IntN(pgAccounts))
				if err != nil && ctx.Err() == nil {
					failed.CompareAndSwap(nil, &err)
				}
				return err
			})
			if err := ctx.Err(); err != nil {
				end(err)
				return sum, err
			}
			if err := failed.Load(); err != nil {
				end(*err)
				return sum, fmt.Errorf("%s point reads: %w", sideName(i), *err)
			}
			sum[i] += n / pgTurns
		}
	}
	end(nil)
	return sum, nil
}

// countTransferRPCs runs pgRPCTransfers transfers one at a time on the
// server, between accounts of their own (opened before and dropped after
// the count: no lock a transfer given up at the end of a turn left on
// the bank's accounts is met and resolved in the count), and returns the
// calls its DB made meanwhile, by method (a request on a stream counts
// as a call): what a transfer costs in round
// trips, with the background calls of those seconds (the session's
// keep-alives), which a transfer's caller pays too; and the writes the
// server made durable meanwhile (its Ping says how many, asked on a
// connection of its own), each waiting for a log sync.
func (b *runner) countTransferRPCs(ctx context.Context, bank serverBank, counter *rpcCounter) (map[string]int, uint64, error) {
	_, st, closeAll, err := b.openServerPair(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer closeAll()
	s := serverBank{db: bank.db, prefix: strings.TrimSuffix(bank.prefix, "acct/") + "count/"}
	if err := s.open(ctx); err != nil {
		return nil, 0, err
	}
	defer func() { _ = s.drop(context.WithoutCancel(ctx)) }()
	before, err := st.SyncedWrites(ctx)
	if err != nil {
		return nil, 0, err
	}
	var never atomic.Bool
	counter.take()
	for i := range pgRPCTransfers {
		if _, err := s.transfer(ctx, i%pgAccounts, (i+1)%pgAccounts, 1, &never); err != nil {
			return nil, 0, err
		}
	}
	calls := counter.take()
	after, err := st.SyncedWrites(ctx)
	if err != nil {
		return nil, 0, err
	}
	return calls, after - before, nil
}

// latencyPercentile is the p-th percentile (0 < p <= 100) of lat by
// nearest rank: the smallest latency at least p% of them are at or
// under; 0 for none. It sorts lat.
func latencyPercentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	rank := int(math.Ceil(p / 100 * float64(len(lat))))
	return lat[min(max(rank, 1), len(lat))-1]
}

// msText prints a latency in milliseconds to the microsecond.
func msText(d time.Duration) string {
	return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond))
}

// printPostgres prints the figure's lines from its measurements (index
// 0 percolator's server, 1 PostgreSQL) and marks its targets.
func printPostgres(r *Report, many, few [2]*bankTurn, reads [2]float64, rpcs map[string]int, syncs uint64) {
	for _, m := range []struct {
		turns   [2]*bankTurn
		workers int
		target  float64
	}{{many, pgManyWorkers, 1.0}, {few, pgFewWorkers, 0.7}} {
		ratio := show(m.turns[0].perSec()/m.turns[1].perSec(), 2)
		name := fmt.Sprintf("server transfers/s >= %.1fx PostgreSQL at %d workers", m.target, m.workers)
		r.printf("postgres: transfers at %d workers: %.0f/s vs PostgreSQL %.0f/s: ratio %sx (target >= %.1fx: %s); conflicts retried %d vs %d",
			m.workers, m.turns[0].perSec(), m.turns[1].perSec(), ratio, m.target, r.mark(name, ratio.atLeast(m.target)), m.turns[0].conflicts, m.turns[1].conflicts)
	}
	var p50, p99 [2]time.Duration
	for i, t := range few {
		p50[i], p99[i] = latencyPercentile(t.latencies, 50), latencyPercentile(t.latencies, 99)
	}
	p50r := show(float64(p50[0])/float64(p50[1]), 2)
	r.printf("postgres: transfer latency at %d workers (committed): p50 %s vs PostgreSQL %s: ratio %sx (target <= 1.5x: %s); p99 %s vs %s: %.2fx",
		pgFewWorkers, msText(p50[0]), msText(p50[1]), p50r, r.mark("server transfer p50 <= 1.5x PostgreSQL at 16 workers", p50r.atMost(1.5)),
		msText(p99[0]), msText(p99[1]), float64(p99[0])/float64(p99[1]))
	snaps := func(t *bankTurn) float64 { return float64(t.snapshots) / t.elapsed.Seconds() }
	r.printf("postgres: snapshots of every balance by %d readers: %.1f/s vs PostgreSQL %.1f/s beside %d workers, %.1f/s vs %.1f/s beside %d (no target); wrong totals %d vs %d (must be 0)",
		pgReaders, snaps(many[0]), snaps(many[1]), pgManyWorkers, snaps(few[0]), snaps(few[1]), pgFewWorkers,
		many[0].wrong+few[0].wrong, many[1].wrong+few[1].wrong)
	r.printf("postgres: point reads at %d clients: %.0f/s (read-only txn of one Get) vs PostgreSQL %.0f/s (SELECT, autocommit): ratio %.2fx (no target)",
		pgPointReaders, reads[0], reads[1], reads[0]/reads[1])
	total := 0
	for _, n := range rpcs {
		total += n
	}
	per := show(float64(total)/pgRPCTransfers, 2)
	r.printf("postgres: RPCs per committed 2-row transfer (%d, one at a time): %s = %s (target <= 5: %s)",
		pgRPCTransfers, formatCounts(rpcs, pgRPCTransfers), per, r.mark("server RPCs per transfer <= 5", per.atMost(5)))
	perSync := show(float64(syncs)/pgRPCTransfers, 2)
	r.printf("postgres: synced writes per committed 2-row transfer (the same %d): %s (target <= 1, the commit point's: %s)",
		pgRPCTransfers, perSync, r.mark("server synced writes per transfer <= 1", perSync.atMost(1)))
}
