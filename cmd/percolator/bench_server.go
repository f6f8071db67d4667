package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/oracle"
	oracleremote "github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
)

// The server figures (bench --server ADDR): each against its raw RPC
// baseline on the same server in the same run, alternating rounds.
var serverSteps = []benchStep{
	{"oracle", benchServerOracle, false}, {"reads", benchServerReads, false},
	{"writes", benchServerWrites, false}, {"nonces", benchServerNonces, false},
}

// oracleProcs and oracleCallers: the oracle figure's load, 4 client
// processes x 64 goroutines (the issue's).
const oracleProcs, oracleCallers = 4, 64

func (cfg benchConfig) dial(ctx context.Context) (*rpc.Conn, error) {
	tok, err := readToken(cfg.tg.tokenFile)
	if err != nil {
		return nil, err
	}
	return rpc.Dial(ctx, cfg.tg.server, rpc.DialOptions{Token: tok, CAFile: cfg.tg.tlsCA})
}

// openServerPair opens a DB on the server and, beside it, a raw remote
// store without nonces: the two sides of a read or write figure.
func (cfg benchConfig) openServerPair(ctx context.Context) (*percolator.DB, *remote.Store, func(), error) {
	db, err := cfg.tg.open(ctx, true)
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err := cfg.dial(ctx)
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

// benchServerOracle: timestamps/s from 4 processes x 64 goroutines, beside
// empty calls/s at the same concurrency and the mean batch size.
func benchServerOracle(ctx context.Context, cfg benchConfig, w io.Writer) error {
	var ping, ping1, ts, calls float64
	half := cfg.duration / 2
	for range 2 {
		r, _, err := cfg.clientProcs(ctx, "ping", oracleCallers, half)
		if err != nil {
			return err
		}
		ping += r / 2
		if r, _, err = cfg.clientProcs(ctx, "ping", 1, half); err != nil {
			return err
		}
		ping1 += r / 2
		r, c, err := cfg.clientProcs(ctx, "oracle", oracleCallers, half)
		if err != nil {
			return err
		}
		ts += r / 2
		calls += c / 2
	}
	batch := ts / calls
	// The oracle keeps one request in flight per process: the calls it can
	// batch into are those of one caller per process. The same 64 callers
	// making empty calls of their own keep 64 in flight per process, a
	// rate no batching client can use; both are printed.
	own, all := ts/(ping1*batch), ts/(ping*batch)
	fmt.Fprintf(w, "oracle:  %.0f timestamps/s from %d processes x %d goroutines (target >= 1,000,000: %s); mean batch %.1f, %.0f requests/s;\n"+
		"         empty unary calls: %.0f/s one in flight per process (the oracle's concurrency): %.2fx of calls x batch (target >= 0.8x: %s); %.0f/s from all %d x %d goroutines: %.2fx\n",
		ts, oracleProcs, oracleCallers, cfg.targets.mark(ts >= 1_000_000), batch, calls, ping1, own, cfg.targets.mark(own >= 0.8), ping, oracleProcs, oracleCallers, all)
	return nil
}

// clientProcs runs oracleProcs `bench-client` processes in mode for d,
// starting together, and returns the summed rate and calls/s.
func (cfg benchConfig) clientProcs(ctx context.Context, mode string, callers int, d time.Duration) (rate, calls float64, err error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now().Add(time.Second) // after every process has dialed
	type result struct {
		rate, calls float64
		err         error
	}
	res := make(chan result, oracleProcs)
	for range oracleProcs {
		args := []string{"bench-client", "--server", cfg.tg.server, "--mode", mode, "--goroutines", strconv.Itoa(callers),
			"--duration", d.String(), "--start", strconv.FormatInt(start.UnixNano(), 10)}
		if cfg.tg.tokenFile != "" {
			args = append(args, "--token-file", cfg.tg.tokenFile)
		}
		if cfg.tg.tlsCA != "" {
			args = append(args, "--tls-ca", cfg.tg.tlsCA)
		}
		cmd := commandSelf(ctx, exe, args...)
		go func() {
			out, err := cmd.Output()
			if err != nil {
				res <- result{err: fmt.Errorf("bench-client: %w: %s", err, out)}
				return
			}
			var r result
			_, err = fmt.Sscanf(strings.TrimSpace(string(out)), "rate %g calls %g", &r.rate, &r.calls)
			r.err = err
			res <- r
		}()
	}
	for range oracleProcs {
		r := <-res
		if r.err != nil && err == nil {
			err = r.err
		}
		rate += r.rate
		calls += r.calls
	}
	return rate, calls, err
}

// countingBackend counts a remote oracle's requests.
type countingBackend struct {
	oracle.Backend
	calls atomic.Int64
}

func (b *countingBackend) Allocate(ctx context.Context, n int) (uint64, error) {
	b.calls.Add(1)
	return b.Backend.Allocate(ctx, n)
}

// runBenchClient is a client process of the oracle figure (hidden): it
// prints "rate R calls C" (per second).
func runBenchClient(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench-client", stderr)
	var tg target
	tg.register(fs, "unused")
	mode := fs.String("mode", "oracle", "oracle or ping")
	goroutines := fs.Int("goroutines", oracleCallers, "concurrent callers")
	d := fs.Duration("duration", time.Second, "how long")
	startNS := fs.Int64("start", 0, "start at this Unix time (ns)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg := benchConfig{tg: tg}
	conn, err := cfg.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	time.Sleep(time.Until(time.Unix(0, *startNS)))
	switch *mode {
	case "oracle":
		b := &countingBackend{Backend: oracleremote.New(conn)}
		start := time.Now()
		r, err := oracle.Throughput(ctx, oracle.NewClient(b), *goroutines, *d)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "rate %f calls %f\n", r, float64(b.calls.Load())/time.Since(start).Seconds())
	case "ping":
		r := rate(ctx, *goroutines, *d, func(*rand.Rand) error {
			_, err := conn.Storage.Ping(ctx, &rpcpb.PingRequest{})
			return err
		})
		fmt.Fprintf(stdout, "rate %f calls %f\n", r, r)
	default:
		return usagef("--mode is oracle or ping")
	}
	return nil
}

// benchServerReads: point reads of read-only transactions (100 each) vs
// raw ReadRow RPCs of the same rows (their newest write record, which
// holds the value inline) at the same concurrency.
func benchServerReads(ctx context.Context, cfg benchConfig, w io.Writer) error {
	db, st, closeAll, err := cfg.openServerPair(ctx)
	if err != nil {
		return err
	}
	defer closeAll()
	rawN, txnN, err := measureReads(ctx, cfg, db, st, cfg.keys)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "reads:   %.0f reads/s in read-only txns (100 reads each) vs %.0f raw ReadRow RPCs/s at %d readers: ratio %.2fx (target >= 0.94x: %s)\n",
		100*txnN, 100*rawN, cfg.readers, txnN/rawN, cfg.targets.mark(txnN/rawN >= 0.94))
	return nil
}

// measureReads loads keys rows through db, then measures read-only
// transactions of 100 point reads against raw reads of the same rows'
// newest write record (which holds the value inline) on st, alternating.
func measureReads(ctx context.Context, cfg benchConfig, db *percolator.DB, st storage.Store, keys int) (raw, txn float64, err error) {
	value := make([]byte, cfg.valueSize)
	for i := 0; i < keys; i += 500 {
		err := db.Update(ctx, func(tx *percolator.Txn) error {
			for j := i; j < min(i+500, keys); j++ {
				if err := tx.Set(serverKey(j), "v", value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, 0, err
		}
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
	raw, txn = alternate(ctx, cfg.readers, cfg.duration, rawOp, txnOp)
	return raw, txn, nil
}

func serverKey(i int) string { return fmt.Sprintf("bench/%08d", i) }

// alternate measures raw and txn ops in alternating rounds (two each) and
// returns their mean rates.
func alternate(ctx context.Context, n int, d time.Duration, rawOp, txnOp func(*rand.Rand) error) (raw, txn float64) {
	half := d / 2
	for range 2 {
		raw += rate(ctx, n, half, rawOp) / 2
		txn += rate(ctx, n, half, txnOp) / 2
	}
	return raw, txn
}

// benchServerWrites: single-cell write transactions vs raw durable Mutate
// RPCs (no nonce) of the same size at the same concurrency.
func benchServerWrites(ctx context.Context, cfg benchConfig, w io.Writer) error {
	db, st, closeAll, err := cfg.openServerPair(ctx)
	if err != nil {
		return err
	}
	defer closeAll()
	rawN, txnN := measureWrites(ctx, cfg, db, st)
	fmt.Fprintf(w, "writes:  %.0f txn/s vs %.0f raw durable Mutate RPCs/s at %d writers, %d-byte values: ratio %.2fx (target >= 0.30x: %s)\n",
		txnN, rawN, cfg.writers, cfg.valueSize, txnN/rawN, cfg.targets.mark(txnN/rawN >= 0.30))
	return nil
}

// measureWrites measures single-cell write transactions through db
// against raw Mutate calls of the same size on st, alternating.
func measureWrites(ctx context.Context, cfg benchConfig, db *percolator.DB, st storage.Store) (raw, txn float64) {
	value := make([]byte, cfg.valueSize)
	rawOp := func(rng *rand.Rand) error {
		return st.Mutate(ctx, []byte(serverKey(rng.IntN(1<<30))), storage.SetCell("rawbench", "v", 1, value))
	}
	txnOp := func(rng *rand.Rand) error {
		row := serverKey(rng.IntN(1 << 30))
		return db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set(row, "v", value) })
	}
	return alternate(ctx, cfg.writers, cfg.duration, rawOp, txnOp)
}

// benchServerNonces: Increment with nonces vs without, same server, same
// run, 64 callers on 1,000 counters.
func benchServerNonces(ctx context.Context, cfg benchConfig, w io.Writer) error {
	conn, err := cfg.dial(ctx)
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
	rawN, nonceN := alternate(ctx, cfg.writers, cfg.duration, inc(without), inc(with))
	fmt.Fprintf(w, "nonces:  %.0f Increments/s with nonces vs %.0f without at %d callers: ratio %.2fx (target >= 0.8x: %s)\n",
		nonceN, rawN, cfg.writers, nonceN/rawN, cfg.targets.mark(nonceN/rawN >= 0.8))
	return nil
}

// commandSelf runs this program (the test binary too, through
// PERCOLATOR_AS_MAIN) with args.
func commandSelf(ctx context.Context, exe string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), "PERCOLATOR_AS_MAIN=1")
	cmd.Stderr = os.Stderr
	return cmd
}
