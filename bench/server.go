package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
)

// oracleProcs and oracleCallers: the oracle figure's load, 4 client
// processes x 64 goroutines.
const oracleProcs, oracleCallers = 4, 64

// Dial connects to the server.
func (s ServerTarget) Dial(ctx context.Context) (*rpc.Conn, error) {
	return rpc.Dial(ctx, s.Addr, rpc.DialOptions{Token: s.Token, CAFile: s.CAFile})
}

// openServerPair opens a DB on the server and, beside it, a raw remote
// store without nonces: the two sides of a read or write figure.
func (b *runner) openServerPair(ctx context.Context) (*percolator.DB, *remote.Store, func(), error) {
	s := b.opts.Server
	db, err := percolator.Open(ctx, percolator.Options{Server: s.Addr, Token: s.Token, TLSCAFile: s.CAFile})
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err := s.Dial(ctx)
	if err != nil {
		_ = db.Close()
		return nil, nil, nil, err
	}
	closeAll := func() { _ = conn.Close(); _ = db.Close() }
	st, err := remote.New(ctx, conn, remote.Options{NoNonces: true})
	if err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	return db, st, closeAll, nil
}

// serverOracle: timestamps/s from 4 processes x 64 goroutines, beside
// empty calls/s at the same concurrency and the mean batch size.
func serverOracle(ctx context.Context, b *runner, r *Report) error {
	var ping, ping1, ts, calls float64
	half := b.opts.Duration / 2
	end := b.timed(ctx, "oracle: seconds measured", 6*half)
	err := func() error {
		for range 2 {
			p, err := b.clientProcs(ctx, "ping", oracleCallers, half)
			if err != nil {
				return err
			}
			p1, err := b.clientProcs(ctx, "ping", 1, half)
			if err != nil {
				return err
			}
			o, err := b.clientProcs(ctx, "oracle", oracleCallers, half)
			if err != nil {
				return err
			}
			ping, ping1, ts, calls = ping+p.Rate/2, ping1+p1.Rate/2, ts+o.Rate/2, calls+o.Calls/2
		}
		return nil
	}()
	if end(err); err != nil {
		return err
	}
	batch := ts / calls
	// The oracle keeps one request in flight per process: the calls it can
	// batch into are those of one caller per process. The same 64 callers
	// making empty calls of their own keep 64 in flight per process, a
	// rate no batching client can use; both are printed.
	tsShown, own, all := show(ts, 0), show(ts/(ping1*batch), 2), ts/(ping*batch)
	r.printf("oracle:  %s timestamps/s from %d processes x %d goroutines (target >= 1,000,000: %s); mean batch %.1f, %.0f requests/s;",
		tsShown, oracleProcs, oracleCallers, r.mark("server oracle >= 1,000,000 timestamps/s", tsShown.atLeast(1_000_000)), batch, calls)
	r.printf("         empty unary calls: %.0f/s one in flight per process (the oracle's concurrency): %sx of calls x batch (target >= 0.8x: %s); %.0f/s from all %d x %d goroutines: %.2fx",
		ping1, own, r.mark("server oracle >= 0.8x empty calls", own.atLeast(0.8)), ping, oracleProcs, oracleCallers, all)
	return nil
}

// clientProcs runs oracleProcs `bench-client` processes (RunClient) in
// mode for d, starting together, and returns their summed rates.
func (b *runner) clientProcs(ctx context.Context, mode string, callers int, d time.Duration) (ClientResult, error) {
	start := time.Now().Add(time.Second) // after every process has dialed
	type result struct {
		ClientResult
		err error
	}
	res := make(chan result, oracleProcs)
	for range oracleProcs {
		args := []string{"bench-client", "--server", b.opts.Server.Addr, "--mode", mode, "--goroutines", strconv.Itoa(callers),
			"--duration", d.String(), "--start", strconv.FormatInt(start.UnixNano(), 10)}
		if b.opts.Server.TokenFile != "" {
			args = append(args, "--token-file", b.opts.Server.TokenFile)
		}
		if b.opts.Server.CAFile != "" {
			args = append(args, "--tls-ca", b.opts.Server.CAFile)
		}
		cmd, err := b.command(ctx, args...)
		if err != nil {
			return ClientResult{}, err
		}
		go func() {
			out, err := cmd.Output() // its stderr kept for the error, one buffer per process
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				out = append(out, ee.Stderr...)
			}
			if err != nil {
				res <- result{err: fmt.Errorf("bench-client: %w: %s", err, out)}
				return
			}
			r, err := ParseClientResult(string(out))
			res <- result{r, err}
		}()
	}
	var sum ClientResult
	var err error
	for range oracleProcs {
		r := <-res
		if r.err != nil && err == nil {
			err = r.err
		}
		sum.Rate += r.Rate
		sum.Calls += r.Calls
	}
	return sum, err
}

// serverReads: point reads of read-only transactions (100 each) vs raw
// ReadRow RPCs of the same rows (their newest write record, which holds
// the value inline) at the same concurrency.
func serverReads(ctx context.Context, b *runner, r *Report) error {
	db, st, closeAll, err := b.openServerPair(ctx)
	if err != nil {
		return err
	}
	defer closeAll()
	rawN, txnN, err := b.measureReads(ctx, db, st, b.opts.Keys)
	if err != nil {
		return err
	}
	ratio := show(txnN/rawN, 2)
	r.printf("reads:   %.0f reads/s in read-only txns (100 reads each) vs %.0f raw ReadRow RPCs/s at %d readers: ratio %sx (target >= 0.94x: %s)",
		100*txnN, 100*rawN, b.opts.Readers, ratio, r.mark("server reads >= 0.94x raw ReadRow", ratio.atLeast(0.94)))
	return nil
}

// measureReads loads keys rows through db, then measures read-only
// transactions of 100 point reads against raw reads of the same rows'
// newest write record (which holds the value inline) on st, alternating.
func (b *runner) measureReads(ctx context.Context, db *percolator.DB, st storage.Store, keys int) (raw, txn float64, err error) {
	if err := loadRows(ctx, db, keys, serverKey, make([]byte, b.opts.ValueSize)); err != nil {
		return 0, 0, err
	}
	filter := storage.Filter{{Family: "write", Qualifier: "v", Limit: 1}}
	rawOp := func(rng *rand.Rand) error {
		for range 100 {
			if _, err := st.ReadRow(ctx, []byte(serverKey(rng.IntN(keys))), filter); err != nil {
				return err
			}
		}
		return nil
	}
	txnOp := func(rng *rand.Rand) error {
		return db.View(ctx, func(tx *percolator.Txn) error {
			for range 100 {
				if _, err := tx.Get(ctx, serverKey(rng.IntN(keys)), "v"); err != nil {
					return err
				}
			}
			return nil
		})
	}
	end := b.timed(ctx, "reads: seconds measured", b.opts.Duration)
	raw, txn = alternate(ctx, b.opts.Readers, b.opts.Duration, rawOp, txnOp)
	end(nil)
	return raw, txn, nil
}

// serverWrites: single-cell write transactions vs raw durable Mutate
// RPCs (no nonce) of the same size at the same concurrency, one-phase
// commits (the default) and two-phase ones (Options.TwoPhaseOnly) in the
// same alternating run.
func serverWrites(ctx context.Context, b *runner, r *Report) error {
	db, st, closeAll, err := b.openServerPair(ctx)
	if err != nil {
		return err
	}
	defer closeAll()
	two, err := b.openServerDB(ctx, percolator.Options{TwoPhaseOnly: true})
	if err != nil {
		return err
	}
	defer two.Close()
	value := make([]byte, b.opts.ValueSize)
	rawOp := rawMutate(ctx, st, value)
	end := b.timed(ctx, "writes: seconds measured", 3*b.opts.Duration)
	rates := alternateAll(ctx, b.opts.Writers, b.opts.Duration, rawOp, writeTxn(ctx, db, serverKey, value), writeTxn(ctx, two, serverKey, value))
	end(nil)
	rawN, txnN, twoN := rates[0], rates[1], rates[2]
	ratio := show(txnN/rawN, 2)
	r.printf("writes:  %.0f txn/s one-phase, %.0f two-phase vs %.0f raw durable Mutate RPCs/s at %d writers, %d-byte values: ratio %sx one-phase (target >= 0.6x: %s), %sx two-phase",
		txnN, twoN, rawN, b.opts.Writers, b.opts.ValueSize, ratio, r.mark("server writes >= 0.6x raw Mutate", ratio.atLeast(0.6)), show(twoN/rawN, 2))
	return nil
}

// measureWrites measures single-cell write transactions through db
// against raw Mutate calls of the same size on st, alternating.
func (b *runner) measureWrites(ctx context.Context, db *percolator.DB, st storage.Store) (raw, txn float64) {
	value := make([]byte, b.opts.ValueSize)
	rawOp := rawMutate(ctx, st, value)
	end := b.timed(ctx, "writes: seconds measured", b.opts.Duration)
	defer end(nil)
	return alternate(ctx, b.opts.Writers, b.opts.Duration, rawOp, writeTxn(ctx, db, serverKey, value))
}

// rawMutate is a raw Mutate of value in a random row of st.
func rawMutate(ctx context.Context, st storage.Store, value []byte) func(*rand.Rand) error {
	return func(rng *rand.Rand) error {
		return st.Mutate(ctx, []byte(serverKey(rng.IntN(1<<30))), storage.SetCell("rawbench", "v", 1, value))
	}
}

// openServerDB opens another DB on the server, with opts' transaction
// options.
func (b *runner) openServerDB(ctx context.Context, opts percolator.Options) (*percolator.DB, error) {
	s := b.opts.Server
	opts.Server, opts.Token, opts.TLSCAFile = s.Addr, s.Token, s.CAFile
	return percolator.Open(ctx, opts)
}

// serverNonces: Increment with nonces vs without, same server, same run,
// the writers on 1,000 counters.
func serverNonces(ctx context.Context, b *runner, r *Report) error {
	conn, err := b.opts.Server.Dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	with, err := remote.New(ctx, conn, remote.Options{})
	if err != nil {
		return err
	}
	without, err := remote.New(ctx, conn, remote.Options{NoNonces: true})
	if err != nil {
		return err
	}
	inc := func(st *remote.Store) func(*rand.Rand) error {
		return func(rng *rand.Rand) error {
			_, err := st.Increment(ctx, []byte(fmt.Sprintf("counter/%04d", rng.IntN(1000))), "noncebench", "n", 1)
			return err
		}
	}
	end := b.timed(ctx, "nonces: seconds measured", b.opts.Duration)
	rawN, nonceN := alternate(ctx, b.opts.Writers, b.opts.Duration, inc(without), inc(with))
	end(nil)
	ratio := show(nonceN/rawN, 2)
	r.printf("nonces:  %.0f Increments/s with nonces vs %.0f without at %d callers: ratio %sx (target >= 0.8x: %s)",
		nonceN, rawN, b.opts.Writers, ratio, r.mark("nonces >= 0.8x without", ratio.atLeast(0.8)))
	return nil
}

// ParseClientResult reads what a client process printed
// (ClientResult.String).
func ParseClientResult(s string) (ClientResult, error) {
	var r ClientResult
	_, err := fmt.Sscanf(strings.TrimSpace(s), "rate %g calls %g", &r.Rate, &r.Calls)
	return r, err
}
