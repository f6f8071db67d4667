package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cluster"
	coordetcd "github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
	"github.com/seed-992972ee/percolator/internal/faultproxy"
	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/oracle/etcd"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/bigtable"
	"github.com/seed-992972ee/percolator/storage/bigtable/bttesting"
	"github.com/seed-992972ee/percolator/txn"
)

var quiet = slog.New(slog.DiscardHandler)

// env is a deployment in this process: the Bigtable emulator with one
// table, an etcd member and one elected oracle.
type env struct {
	bt   bigtable.Options
	etcd []string
}

// start starts a deployment whose oracle reads the observer registry
// version from the table (percolator oracle --bigtable).
func start(t *testing.T) env { return startOracle(t, true) }

// startOracle starts a deployment; withStore gives the oracle the table.
func startOracle(t *testing.T, withStore bool) env {
	t.Helper()
	ctx := context.Background()
	emu := bttesting.Start(t)
	bt := bttesting.Options(t, emu, "cluster")
	if err := bigtable.Init(ctx, bt); err != nil {
		t.Fatal(err)
	}
	var sopts server.OracleOptions
	st := bttesting.Open(t, emu, "cluster") // closed after the oracle stops
	if withStore {
		sopts.Store, sopts.RegistryVersion = st, observer.StoredVersion
	}
	m := etcdtest.Start(t)
	cli := etcdtest.Client(t, m)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cand, err := etcd.StartCandidate(cli, etcd.CandidateOptions{Addr: lis.Addr().String(), Store: st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	sopts.Logger = quiet
	srv := server.NewOracleServer(cand, sopts)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		<-done
		_ = cand.Close()
	})
	return env{bt: bt, etcd: m.Endpoints()}
}

func (e env) open(t *testing.T) *cluster.DB {
	t.Helper()
	return e.openWith(t, e.bt)
}

// openWith opens a DB on the deployment with bt, e.bt with other client
// options.
func (e env) openWith(t *testing.T, bt bigtable.Options) *cluster.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := cluster.Open(ctx, cluster.Options{Bigtable: bt, Etcd: e.etcd, DB: percolator.Options{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func upper(ctx context.Context, tx *percolator.Txn, row, col string) error {
	v, err := tx.Get(ctx, row, col)
	if err != nil {
		return err
	}
	return tx.Set(row, "upper", bytes.ToUpper(v))
}

// TestPartitionedWorkers: two DBs opened with cluster.Open run workers
// that split the notify keyspace through their etcd sessions (no option
// needed): status shows two ranges, one per owner, that tile the
// keyspace; every notification is processed; when one DB closes, the
// other's range grows to the whole keyspace.
func TestPartitionedWorkers(t *testing.T) {
	ctx := context.Background()
	e := start(t)
	a, b := e.open(t), e.open(t)
	for _, db := range []*cluster.DB{a, b} {
		if err := db.Observe(ctx, percolator.Observer{Name: "upper", Column: "text", Fn: upper}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 300
	if err := a.Load(ctx, n, percolator.LoadOptions{}, func(tx *percolator.Txn, i int) error {
		return tx.Set(fmt.Sprintf("doc%04d", i), "text", []byte(fmt.Sprint("hello ", i)))
	}); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	run := func(db *cluster.DB, wctx context.Context) {
		defer wg.Done()
		if _, err := db.RunWorkers(wctx, percolator.WorkerOptions{Scanners: 2}); err != nil && wctx.Err() == nil {
			errs <- err
		}
	}
	bctx, stopB := context.WithCancel(wctx)
	wg.Add(2)
	go run(a, wctx)
	go run(b, bctx)
	defer func() { stop(); wg.Wait() }()

	owners := func(want int) []percolator.PartitionStatus {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		var last []percolator.PartitionStatus
		for time.Now().Before(deadline) {
			st, err := a.ObserverStatus(ctx)
			if err != nil {
				t.Fatal(err)
			}
			last = st.Partitions
			if len(last) == want && spans(last) {
				return last
			}
			select {
			case err := <-errs:
				t.Fatal(err)
			case <-time.After(100 * time.Millisecond):
			}
		}
		t.Fatalf("no %d published ranges spanning the keyspace within 30s: %+v", want, last)
		return nil
	}
	two := owners(2)
	if got := map[string]bool{two[0].Owner: true, two[1].Owner: true}; !got[a.Session().Owner()] || !got[b.Session().Owner()] {
		t.Fatalf("ranges owned by %s and %s, want the DBs' owners %s and %s", two[0].Owner, two[1].Owner, a.Session().Owner(), b.Session().Owner())
	}
	waitProcessed(t, a, n)

	stopB() // b's worker stops: it leaves the group, a takes the whole keyspace
	owners(1)
}

// spans reports whether the published ranges run in order from the
// keyspace's start to its end. Each member cuts the keyspace from its own
// sample, and members sample at different moments: once the notify
// keyspace is empty each keeps the bounds of its last sample, so two
// members' bounds may stay a key apart (an overlap or a gap, which the
// full passes cover). Exact tiling is a property of equal samples, which
// the partition tests check.
func spans(ps []percolator.PartitionStatus) bool {
	if len(ps) == 0 || ps[0].Start != nil || ps[len(ps)-1].End != nil {
		return false
	}
	for i, p := range ps {
		if p.End != nil && bytes.Compare(p.Start, p.End) >= 0 {
			return false
		}
		if i > 0 && (p.Start == nil || bytes.Compare(ps[i-1].Start, p.Start) >= 0) {
			return false
		}
	}
	return true
}

func waitProcessed(t *testing.T, db *cluster.DB, n int) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for {
		missing := 0
		err := db.View(ctx, func(tx *percolator.Txn) error {
			for i := range n {
				v, err := tx.Get(ctx, fmt.Sprintf("doc%04d", i), "upper")
				if errors.Is(err, percolator.ErrNotFound) {
					missing++
					continue
				}
				if err != nil {
					return err
				}
				if want := fmt.Sprint("HELLO ", i); string(v) != want {
					return fmt.Errorf("doc%04d upper = %q, want %q", i, v, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d rows unprocessed after 60s", missing, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestOpenBadInput: options Open sets itself, no endpoints, an etcd that
// does not answer and a table that does not exist each fail clearly.
func TestOpenBadInput(t *testing.T) {
	ctx := context.Background()
	e := start(t)
	for _, c := range []struct {
		name string
		opts cluster.Options
		want error
		msg  string
	}{
		{"dir set", cluster.Options{Bigtable: e.bt, Etcd: e.etcd, DB: percolator.Options{Dir: t.TempDir()}}, percolator.ErrInvalidArgument, "sets Dir"},
		{"no endpoints", cluster.Options{Bigtable: e.bt}, percolator.ErrInvalidArgument, "no etcd endpoints"},
		{"etcd down", cluster.Options{Bigtable: e.bt, Etcd: []string{"127.0.0.1:1"}, DB: percolator.Options{RetryBudget: time.Second}}, percolator.ErrUnavailable, "127.0.0.1:1"},
		{"no table", cluster.Options{Bigtable: bigtable.Options{Project: e.bt.Project, Instance: e.bt.Instance, Table: "absent", Emulator: e.bt.Emulator}, Etcd: e.etcd}, bigtable.ErrNoTable, "absent"},
	} {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		db, err := cluster.Open(cctx, c.opts)
		cancel()
		if err == nil {
			db.Close()
			t.Errorf("%s: opened", c.name)
			continue
		}
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %v saying %q", c.name, err, c.want, c.msg)
		}
	}
}

// TestOpenWaitsForEtcd: a process started while etcd is down (refusing
// connections, as while it restarts) waits for it within its retry
// budget, and opens once it answers; past the budget Open fails with
// ErrUnavailable naming the endpoints, without waiting on.
func TestOpenWaitsForEtcd(t *testing.T) {
	e := start(t)
	p, err := faultproxy.New(strings.TrimPrefix(e.etcd[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	opts := cluster.Options{Bigtable: e.bt, Etcd: []string{"http://" + p.Addr()}, DB: percolator.Options{Logger: quiet, RetryBudget: time.Minute}}

	p.SetRefuse(true)
	opened := make(chan error, 1)
	go func() {
		db, err := cluster.Open(context.Background(), opts)
		if err == nil {
			err = db.Update(context.Background(), func(tx *percolator.Txn) error { return tx.Set("r", "c", []byte("v")) })
			db.Close()
		}
		opened <- err
	}()
	time.Sleep(6 * time.Second) // past one attempt's bound (5s)
	select {
	case err := <-opened:
		t.Fatalf("Open while etcd refused connections returned at once: %v", err)
	default:
	}
	p.SetRefuse(false)
	if err := <-opened; err != nil {
		t.Fatalf("Open once etcd answered again: %v", err)
	}

	p.SetRefuse(true)
	opts.DB.RetryBudget = 2 * time.Second
	began := time.Now()
	db, err := cluster.Open(context.Background(), opts)
	if err == nil {
		db.Close()
		t.Fatal("opened while etcd refused every connection")
	}
	if !errors.Is(err, percolator.ErrUnavailable) || !strings.Contains(err.Error(), p.Addr()) {
		t.Fatalf("Open past its budget: %v, want ErrUnavailable naming %s", err, p.Addr())
	}
	// The budget, one attempt's bound and slack for a busy machine.
	if d := time.Since(began); d > 2*time.Second+10*time.Second {
		t.Fatalf("Open with a 2s budget took %v", d)
	}
}

// rpcCount counts a Bigtable client's calls by method.
type rpcCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *rpcCount) add(method string) {
	c.mu.Lock()
	c.n[method[strings.LastIndexByte(method, '/')+1:]]++
	c.mu.Unlock()
}

func (c *rpcCount) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func (c *rpcCount) dialOptions() []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c.add(method)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		c.add(method)
		return streamer(ctx, desc, cc, method, opts...)
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

// TestWriteTxnRPCs: with an elected oracle that reads the observer
// registry version from the table, a 1-row write transaction costs the
// committer exactly 2 CheckAndMutateRow (prewrite, commit) and no other
// Bigtable call: its registry re-read comes with the commit timestamp.
// With an oracle without the table, the committer reads the registry's
// version row itself: one ReadRows more.
func TestWriteTxnRPCs(t *testing.T) {
	for _, c := range []struct {
		name      string
		withStore bool
		want      map[string]int // per transaction
	}{
		{"oracle reads the version", true, map[string]int{"CheckAndMutateRow": 2}},
		{"oracle without a store", false, map[string]int{"CheckAndMutateRow": 2, "ReadRows": 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			e := startOracle(t, c.withStore)
			count := &rpcCount{n: map[string]int{}}
			bt := e.bt
			bt.DialOptions = count.dialOptions()
			db := e.openWith(t, bt)
			// A registration raises the version above 0; the writes are
			// of another column.
			if err := db.Observe(ctx, percolator.Observer{Name: "upper", Column: "text", Fn: upper}); err != nil {
				t.Fatal(err)
			}
			const txns = 20
			write := func(i int) {
				if err := db.Update(ctx, func(tx *percolator.Txn) error {
					return tx.Set(fmt.Sprintf("row%02d", i), "v", []byte("x"))
				}); err != nil {
					t.Fatal(err)
				}
			}
			write(txns) // warm up: the oracle stream, the registry loaded
			count.take()
			for i := range txns {
				write(i)
			}
			got := count.take()
			for m, n := range c.want {
				if got[m] != n*txns {
					t.Errorf("%s: %d calls in %d transactions; want %d each (all: %v)", m, got[m], txns, n, got)
				}
			}
			for m, n := range got {
				if c.want[m] == 0 {
					t.Errorf("%s: %d calls in %d transactions; want none (all: %v)", m, n, txns, got)
				}
			}
		})
	}
}

// TestUpgrade: an upgrade of the Bigtable store is refused while a
// process has a session in etcd, changing nothing; once it is gone, the
// store moves to this build's format and opens.
func TestUpgrade(t *testing.T) {
	ctx := context.Background()
	e := start(t)
	db := e.open(t)
	if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("r", "c", []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	raw, err := bigtable.Open(ctx, e.bt)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := txn.RecordFormat(ctx, raw, percolator.FormatVersion-1); err != nil {
		t.Fatal(err)
	}
	opts := cluster.Options{Bigtable: e.bt, Etcd: e.etcd}
	if _, err := cluster.Upgrade(ctx, opts); !errors.Is(err, percolator.ErrInUse) || !strings.Contains(err.Error(), db.Session().Owner()) {
		t.Fatalf("Upgrade while a process is registered: %v; want ErrInUse naming it", err)
	}
	if v, _, err := txn.ReadFormat(ctx, raw); err != nil || v != percolator.FormatVersion-1 {
		t.Fatalf("the refused store's format: %d, %v", v, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if from, err := cluster.Upgrade(ctx, opts); err != nil || from != percolator.FormatVersion-1 {
		t.Fatalf("Upgrade: from %d, %v", from, err)
	}
	db = e.open(t)
	if err := db.View(ctx, func(tx *percolator.Txn) error {
		_, err := tx.Get(ctx, "r", "c")
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestRunGC: workers running RunGC on Bigtable hold the safe point at or
// below the oldest start_ts the live etcd sessions publish, and collect
// below it once that transaction ends and its session is gone.
func TestRunGC(t *testing.T) {
	ctx := context.Background()
	e := start(t)
	openOpts := func(o percolator.Options) *cluster.DB {
		t.Helper()
		o.Logger = quiet
		db, err := cluster.Open(ctx, cluster.Options{Bigtable: e.bt, Etcd: e.etcd, SessionTTL: 2 * time.Second, DB: o})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	w := openOpts(percolator.Options{})
	set := func(v string) {
		t.Helper()
		if err := w.Update(ctx, func(tx *percolator.Txn) error {
			for i := range 3 {
				if err := tx.Set(fmt.Sprintf("r%d", i), "v", []byte(v)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"1", "2", "3"} {
		set(v)
	}
	r := openOpts(percolator.Options{})
	long, err := r.BeginReadOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitStatus := func(what string, ok func(percolator.GCStatus) bool) percolator.GCStatus {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			st, err := w.GCStatus(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ok(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s: %+v", what, st)
			}
		}
	}
	waitStatus("published start_ts", func(st percolator.GCStatus) bool { return st.OldestOpen == long.StartTS() })
	set("4")
	set("5")
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	var gcs []*cluster.DB
	for range 2 {
		gc := openOpts(percolator.Options{GCLifetime: 50 * time.Millisecond})
		gcs = append(gcs, gc)
		go func() { _ = gc.RunGC(gctx) }()
	}
	st := waitStatus("safe point", func(st percolator.GCStatus) bool { return st.SafePoint != 0 })
	if st.SafePoint > long.StartTS() {
		t.Fatalf("safe point %d passed the open transaction's start_ts %d", st.SafePoint, long.StartTS())
	}
	if v, err := long.Get(ctx, "r0", "v"); err != nil || string(v) != "3" {
		t.Fatalf("the open transaction reads %q, %v; want 3", v, err)
	}
	_ = long.Rollback(ctx)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	waitStatus("safe point past the ended transaction", func(st percolator.GCStatus) bool { return st.SafePoint > long.StartTS() })
	raw, err := bigtable.Open(ctx, e.bt)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		row, err := raw.ReadRow(ctx, []byte("r0"), storage.Filter{{Family: txn.FamilyWrite, AllQualifiers: true}})
		if err != nil {
			t.Fatal(err)
		}
		if len(row.Cells) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r0 keeps %d write records", len(row.Cells))
		}
	}
	var v []byte
	if err := w.View(ctx, func(tx *percolator.Txn) (err error) { v, err = tx.Get(ctx, "r0", "v"); return err }); err != nil || string(v) != "5" {
		t.Fatalf("after GC: %q, %v", v, err)
	}

	// The two collectors split each pass: once both are members of the
	// group, each removes the old versions of its share of the rows.
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.etcd, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := cli.Get(ctx, coordetcd.DefaultPrefix+"members/gc/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d collectors in the group, want 2", resp.Count)
		}
	}
	before := []uint64{gcs[0].GCStats().Versions, gcs[1].GCStats().Versions}
	const rows = 20
	// A collector learns of the other from the group a moment after etcd
	// lists both, and may meanwhile make a whole pass alone: rounds of
	// writes go on until each collector removed some (a minute at most).
	for round, deadline := 0, time.Now().Add(time.Minute); ; round++ {
		for _, val := range []string{"a", "b", "c"} {
			if err := w.Update(ctx, func(tx *percolator.Txn) error {
				for i := range rows {
					if err := tx.Set(fmt.Sprintf("s%02d", i), "v", []byte(fmt.Sprintf("%s%d", val, round))); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		for ; ; time.Sleep(50 * time.Millisecond) {
			left := 0
			err := raw.Scan(ctx, []byte("s"), []byte("t"), storage.Filter{{Family: txn.FamilyWrite, AllQualifiers: true}}, 0, func(r storage.Row) bool {
				left += len(r.Cells) - 1
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			if left == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d old write records left", left)
			}
		}
		removed := []uint64{gcs[0].GCStats().Versions - before[0], gcs[1].GCStats().Versions - before[1]}
		if removed[0] > 0 && removed[1] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collectors removed %v of the rows written after both joined, in %d rounds: the pass was not split", removed, round+1)
		}
	}
}
