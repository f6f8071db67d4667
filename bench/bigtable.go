package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/bigtable"
	"github.com/seed-992972ee/percolator/txn"
)

// The Bigtable figures: RPCs per transaction counted by a client
// interceptor, and read and write transactions as ratios of raw Bigtable
// reads and writes in the same run. The oracle is in process, served on
// loopback as `percolator oracle --bigtable` serves (each timestamp
// carries the observer registry version it read from the table, on a
// client of its own): these figures are the transactions' store calls.

// rpcCounter counts a client's calls by method.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *rpcCounter) add(method string) {
	c.mu.Lock()
	c.n[method[strings.LastIndexByte(method, '/')+1:]]++
	c.mu.Unlock()
}

func (c *rpcCounter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.add(method)
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *rpcCounter) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	c.add(method)
	return streamer(ctx, desc, cc, method, opts...)
}

// streamMessages counts each request sent on a stream as a call of its
// method, not the stream's opening: on a long-lived stream (the oracle's
// AllocateStream) each request is a round trip, and the stream is
// opened once for many.
func (c *rpcCounter) streamMessages(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return countedStream{s, c, method}, nil
}

// countedStream counts the requests sent on a stream.
type countedStream struct {
	grpc.ClientStream
	c      *rpcCounter
	method string
}

func (s countedStream) SendMsg(m any) error {
	s.c.add(s.method)
	return s.ClientStream.SendMsg(m)
}

// take returns the counts since the last take.
func (c *rpcCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func formatCounts(n map[string]int, per int) string {
	var names []string
	for k := range n {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%.2f %s", float64(n[k])/float64(per), k))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " + ")
}

// closers runs what a setup opened, in reverse, on failure or when done.
type closers []func()

func (c *closers) add(f func()) { *c = append(*c, f) }

func (c closers) closeAll() {
	for i := len(c) - 1; i >= 0; i-- {
		c[i]()
	}
}

// openBigtablePair opens the bench's table (a fresh one on the emulator),
// a DB on it with an in-process oracle (serveBenchOracle), and the raw
// store beside it, both counted by c; wrap, if not nil, wraps the DB's
// store (openBigtableDB).
func (b *runner) openBigtablePair(ctx context.Context, c *rpcCounter, wrap func(*bigtable.Store) storage.Store) (*percolator.DB, *bigtable.Store, func(), error) {
	opts := b.btOpts
	var cl closers
	if b.opts.BigtableEmulator {
		emu, err := bigtable.StartEmulator("127.0.0.1:0")
		if err != nil {
			return nil, nil, nil, err
		}
		cl.add(emu.Close)
		opts.Emulator = emu.Addr()
	}
	db, st, err := openBigtableDB(ctx, opts, c, percolator.Options{}, wrap, &cl)
	if err != nil {
		cl.closeAll()
		return nil, nil, nil, err
	}
	return db, st, cl.closeAll, nil
}

// openBigtableDB creates the table if needed and opens a DB on it with
// dbo (its Store and Oracle set here), its store's calls counted by c,
// its oracle served by serveBenchOracle. wrap, if not nil, wraps the
// store the DB is given (a wrapper that counts what it reads); the store
// returned is the one beneath.
func openBigtableDB(ctx context.Context, opts bigtable.Options, c *rpcCounter, dbo percolator.Options, wrap func(*bigtable.Store) storage.Store, cl *closers) (*percolator.DB, *bigtable.Store, error) {
	if err := bigtable.Init(ctx, opts); err != nil {
		return nil, nil, err
	}
	orc, err := serveBenchOracle(ctx, opts, cl)
	if err != nil {
		return nil, nil, err
	}
	opts.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.unary), grpc.WithChainStreamInterceptor(c.stream)}
	st, err := bigtable.Open(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	cl.add(func() { _ = st.Close() })
	dbo.Store, dbo.Oracle = st, orc
	if wrap != nil {
		dbo.Store = wrap(st)
	}
	db, err := percolator.Open(ctx, dbo)
	if err != nil {
		return nil, nil, err
	}
	cl.add(func() { _ = db.Close() })
	return db, st, nil
}

// serveBenchOracle serves an in-memory allocator as `percolator oracle
// --bigtable` does (server.NewOracleServer with the table), on loopback,
// and returns a client of it: each commit timestamp carries the observer
// registry version, so a commit reads no registry itself. The oracle's
// own store client is not counted: its reads are the oracle's, not the
// transactions'.
func serveBenchOracle(ctx context.Context, opts bigtable.Options, cl *closers) (*oracle.Client, error) {
	st, err := bigtable.Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	cl.add(func() { _ = st.Close() })
	alloc, err := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	if err != nil {
		return nil, err
	}
	cl.add(func() { _ = alloc.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := server.NewOracleServer(alloc, server.OracleOptions{Store: st, RegistryVersion: observer.StoredVersion, Logger: slog.New(slog.DiscardHandler)})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	cl.add(func() { srv.Stop(); <-done })
	conn, err := rpc.Dial(ctx, lis.Addr().String(), rpc.DialOptions{})
	if err != nil {
		return nil, err
	}
	cl.add(func() { _ = conn.Close() })
	return remote.NewClient(conn), nil
}

// benchBigtableRPCs: the Bigtable calls of one single-row write
// transaction, of one N-row write transaction, and of one read.
func bigtableRPCs(ctx context.Context, b *runner, r *Report) error {
	c := &rpcCounter{n: map[string]int{}}
	db, _, closeAll, err := b.openBigtablePair(ctx, c, nil)
	if err != nil {
		return err
	}
	defer closeAll()
	value := make([]byte, b.opts.ValueSize)
	const txns, rows = 50, 8
	c.take()
	for i := range txns {
		if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set(serverKey(i), "v", value) }); err != nil {
			return err
		}
	}
	single := c.take()
	for i := range txns {
		err := db.Update(ctx, func(tx *percolator.Txn) error {
			for j := range rows {
				if err := tx.Set(serverKey(1000+i*rows+j), "v", value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	multi := c.take()
	began := time.Now()
	for i := range txns {
		err := db.View(ctx, func(tx *percolator.Txn) error {
			_, err := tx.Get(ctx, serverKey(i), "v")
			return err
		})
		if err != nil {
			return err
		}
	}
	// A client re-reads the garbage collector's safe point at most once
	// per txn.SafePointCache while it reads (one ReadRows more).
	safePointReads := int(time.Since(began)/txn.SafePointCache) + 1
	read := c.take()
	r.printf("bigtable rpcs: 1-row write txn = %s", formatCounts(single, txns))
	r.printf("bigtable rpcs: %d-row write txn = %s", rows, formatCounts(multi, txns))
	r.printf("bigtable rpcs: read (a read-only txn's Get) = %s", formatCounts(read, txns))
	ok := exactly(single, txns, map[string]int{"CheckAndMutateRow": 2}) &&
		exactly(multi, txns, map[string]int{"CheckAndMutateRow": rows + 1, "MutateRows": 1}) &&
		len(read) == 1 && read["ReadRows"] >= txns && read["ReadRows"] <= txns+safePointReads
	r.printf("bigtable rpcs: target 1-row = 2 CheckAndMutateRow, %d-row = %d CheckAndMutateRow + 1 MutateRows, read = 1 ReadRows (and the safe point's, at most once a second: %d here), no other call: %s",
		rows, rows+1, safePointReads, r.mark("bigtable rpcs per transaction", ok))
	return nil
}

// exactly reports whether got, counted over per operations, is want per
// operation, and nothing else.
func exactly(got map[string]int, per int, want map[string]int) bool {
	for m, n := range got {
		if n != want[m]*per {
			return false
		}
	}
	for m, n := range want {
		if got[m] != n*per {
			return false
		}
	}
	return true
}

// readCellsPerGroup is how many cells of each kind bigtableReadCells reads.
const readCellsPerGroup = 100

// benchBigtableReads: the cells and bytes a read returns (bigtableReadCells),
// then point reads in read-only transactions (100 each) vs raw ReadRows of
// the same rows' newest write record.
func bigtableReads(ctx context.Context, b *runner, r *Report) error {
	if err := b.bigtableReadCells(ctx, r, readCellsPerGroup); err != nil {
		return err
	}
	db, st, closeAll, err := b.openBigtablePair(ctx, &rpcCounter{n: map[string]int{}}, nil)
	if err != nil {
		return err
	}
	defer closeAll()
	rawN, txnN, err := b.measureReads(ctx, db, st, min(b.opts.Keys, 2000))
	if err != nil {
		return err
	}
	ratio := show(txnN/rawN, 2)
	r.printf("bigtable reads:  %.0f reads/s in read-only txns (100 reads each) vs %.0f raw ReadRows/s at %d readers: ratio %sx (paper 0.94x: %s)%s",
		100*txnN, 100*rawN, b.opts.Readers, ratio, r.mark("bigtable reads >= 0.94x raw ReadRows", ratio.atLeast(0.94)), b.emulatorNote())
	return nil
}

// benchBigtableWrites: single-cell write transactions vs raw MutateRow
// calls of the same size.
func bigtableWrites(ctx context.Context, b *runner, r *Report) error {
	db, st, closeAll, err := b.openBigtablePair(ctx, &rpcCounter{n: map[string]int{}}, nil)
	if err != nil {
		return err
	}
	defer closeAll()
	rawN, txnN := b.measureWrites(ctx, db, st)
	ratio := show(txnN/rawN, 2)
	r.printf("bigtable writes: %.0f txn/s vs %.0f raw MutateRow/s at %d writers, %d-byte values: ratio %sx (paper 0.23x: %s)%s",
		txnN, rawN, b.opts.Writers, b.opts.ValueSize, ratio, r.mark("bigtable writes >= 0.23x raw MutateRow", ratio.atLeast(0.23)), b.emulatorNote())
	return nil
}
