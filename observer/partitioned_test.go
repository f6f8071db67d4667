package observer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/internal/leakcheck"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/storagetest"
	"github.com/seed-992972ee/percolator/txn"
)

// cluster is n worker processes on one shared store, as on Bigtable with
// etcd: one oracle, one advisory Locker, one set of membership groups
// (each worker its own handle, owner "w<i>"), and a client process that
// writes and registers but runs no worker.
type cluster struct {
	t       *testing.T
	raw     storage.Store // the store itself: the test's own reads
	workers []*env
	client  *env
	members []*coord.LocalMembership
	block   []func(ctx context.Context, row string) error // per worker, run first by its observer (nil: none)
}

func newCluster(t *testing.T, st storage.Store, n int) *cluster {
	t.Helper()
	return newClusterWrapped(t, st, n, nil)
}

// newClusterWrapped is newCluster with worker i's store wrap(i, st), if
// wrap is set (the client's is st).
func newClusterWrapped(t *testing.T, st storage.Store, n int, wrap func(i int, st storage.Store) storage.Store) *cluster {
	t.Helper()
	ctx := context.Background()
	alloc, err := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orc := oracle.NewClient(alloc)
	locker := coord.NewLocalLocker()
	hub := coord.NewLocalMembership("client")
	c := &cluster{t: t, raw: st, block: make([]func(context.Context, string) error, n)}
	var clients []*txn.Client
	for i := range n + 1 {
		view := storagetest.SharedStore{Store: st}
		if wrap != nil && i < n {
			view.Store = wrap(i, st)
		}
		tc, err := txn.NewClient(ctx, view, orc, coord.TTLOnly{}, txn.Options{})
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, tc)
		f, err := New(ctx, view, tc, orc, locker, Options{RetryBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		e := &env{t: t, store: view, client: tc, f: f}
		if i == n {
			c.client = e
			break
		}
		c.workers = append(c.workers, e)
		c.members = append(c.members, hub.As(fmt.Sprint("w", i)))
		if err := f.Register(ctx, Observer{Name: "o", Column: "c", Fn: c.observer(i)}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, tc := range clients {
			tc.Close()
		}
		_ = alloc.Close()
		_ = st.Close()
	})
	return c
}

// observer is worker i's code for column c: copy it to "out", and record
// in "by" which worker ran it.
func (c *cluster) observer(i int) Func {
	return func(ctx context.Context, tx *txn.Txn, row, col string) error {
		if b := c.block[i]; b != nil {
			if err := b(ctx, row); err != nil {
				return err
			}
		}
		v, err := tx.Get(ctx, row, col)
		if err != nil {
			return err
		}
		if err := tx.Set(row, "out", v); err != nil {
			return err
		}
		return tx.Set(row, "by", fmt.Appendf(nil, "w%d", i))
	}
}

// background notifies column "bg" on n rows "k000"...: an observer that
// no worker has code for, so the notifications stay, and every worker
// samples the same notify keyspace (their bounds agree).
func (c *cluster) background(n int) []string {
	ctx := context.Background()
	if err := c.client.f.Register(ctx, Observer{Name: "bg", Column: "bg", Fn: func(context.Context, *txn.Txn, string, string) error { return nil }}); err != nil {
		c.t.Fatal(err)
	}
	rows := make([]string, n)
	for i := range rows {
		rows[i] = fmt.Sprintf("k%03d", i)
	}
	c.write("bg", rows)
	return rows
}

// write sets col on rows (value "v"+row), notifying them.
func (c *cluster) write(col string, rows []string) {
	c.client.update(func(tx *txn.Txn) error {
		for _, r := range rows {
			if err := tx.Set(r, col, []byte("v"+r)); err != nil {
				return err
			}
		}
		return nil
	})
}

// running is a worker's Run in progress.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // once done is closed
}

// start runs worker i.
func (c *cluster) start(i int, opts WorkerOptions) *running {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		_, r.err = c.workers[i].f.Run(ctx, opts)
	}()
	return r
}

// wait waits for the run to end and returns its error.
func (r *running) wait() error {
	<-r.done
	r.cancel()
	return r.err
}

// stop cancels the run and returns its error (nil for the cancellation).
func (r *running) stop() error {
	r.cancel()
	if err := r.wait(); !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// pending returns the rows with a notification of col, sorted.
func (c *cluster) pending(col string) []string {
	c.t.Helper()
	var rows []string
	err := c.raw.Scan(context.Background(), nil, nil, storage.Filter{{Family: txn.FamilyNotify, Qualifier: col}}, 0, func(r storage.Row) bool {
		rows = append(rows, string(r.Key))
		return true
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return rows
}

// waitFor polls cond for up to 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// settle waits until the workers listed all see the same n members and
// have each made a pass over their range since (so the full pass a
// member-list change asks for is behind them: Scanners must be 1), and
// returns their views. A view that changes meanwhile (a re-sample: every
// WorkerOptions.Resample, at wall-clock multiples of it, the bounds move
// with the notifications processed since) starts the wait again: how
// long a pass takes on a busy machine decides only how often that
// happens.
func (c *cluster) settle(workers []int, n int) []Partition {
	c.t.Helper()
	const tries = 20
	for try := 1; ; try++ {
		views, changed := c.settleOnce(workers, n)
		if changed < 0 {
			return views
		}
		if try == tries {
			c.t.Fatalf("worker %d's view changed while settling, %d times in a row", changed, tries)
		}
		c.t.Logf("worker %d's view changed while settling; settling again", changed)
	}
}

// settleOnce is one wait of settle: the views, and -1, or the first
// worker whose view changed before it passed over its range.
func (c *cluster) settleOnce(workers []int, n int) ([]Partition, int) {
	c.t.Helper()
	var views []Partition
	waitFor(c.t, fmt.Sprintf("workers %v agree on %d members", workers, n), func() bool {
		views = views[:0]
		for _, i := range workers {
			p, ok := c.workers[i].f.Partition()
			if !ok || len(p.Members) != n || p.Self < 0 || len(views) > 0 && !slices.Equal(p.Members, views[0].Members) {
				return false
			}
			views = append(views, p)
		}
		return true
	})
	for k, i := range workers {
		f := c.workers[i].f
		before := f.rangePasses.Load()
		waitFor(c.t, fmt.Sprintf("worker %d scans its range", i), func() bool { return f.rangePasses.Load() > before })
		if p, _ := f.Partition(); p.Version != views[k].Version {
			return nil, i
		}
	}
	return views, -1
}

// ownRanges returns each view's own range.
func ownRanges(views []Partition) [][2][]byte {
	var out [][2][]byte
	for _, p := range views {
		start, end := p.Range(p.Self)
		out = append(out, [2][]byte{start, end})
	}
	return out
}

// owner returns the view whose own range holds row.
func owner(t *testing.T, views []Partition, row string) string {
	t.Helper()
	for _, p := range views {
		if start, end := p.Range(p.Self); inRange([]byte(row), start, end) {
			return p.Members[p.Self].Owner
		}
	}
	t.Fatalf("no range holds %q", row)
	return ""
}

// checkProcessed fails unless every row's change was processed once: its
// out holds its value, and the observers committed len(rows) runs in all.
// It returns who ran each row.
func (c *cluster) checkProcessed(rows []string) map[string]string {
	c.t.Helper()
	by := map[string]string{}
	for _, r := range rows {
		if got := c.client.get(r, "out"); got != "v"+r {
			c.t.Fatalf("row %s: out = %q, want %q", r, got, "v"+r)
		}
		by[r] = c.client.get(r, "by")
	}
	if n := c.workers[0].counts("o")[statCommits]; n != int64(len(rows)) {
		c.t.Fatalf("%d observer commits for %d changes", n, len(rows))
	}
	return by
}

// every returns every k-th of rows, from the first.
func every(rows []string, k int) []string {
	var out []string
	for i := 0; i < len(rows); i += k {
		out = append(out, rows[i])
	}
	return out
}

// TestPartitionedWorkers: three workers split the notify keyspace into
// ranges that are disjoint and cover it when their samples agree; every
// change is processed exactly once, each by the worker whose range holds
// its row (no fallback passes here); Status shows the three ranges and
// their backlogs, and a worker that stops withdraws its entry.
func TestPartitionedWorkers(t *testing.T) {
	c := newCluster(t, memory.New(), 3)
	bg := c.background(200)
	// The entry of a worker killed an hour ago, which a live worker drops.
	dead, _ := json.Marshal(publishedPartition{Worker: "dead", Members: []string{"dead"}, Version: 1, Updated: time.Now().Add(-time.Hour).UnixMilli()})
	if err := c.raw.Mutate(context.Background(), []byte(partitionsRow), storage.SetCell(FamilyPartitions, "dead", 0, dead)); err != nil {
		t.Fatal(err)
	}
	leaks := checkNoLeak(t)
	opts := WorkerOptions{Scanners: 1, MaxIdle: 5 * time.Millisecond, FallbackEvery: -1, Membership: nil}
	var stops []*running
	for i := range 3 {
		opts.Membership = c.members[i]
		stops = append(stops, c.start(i, opts))
	}
	views := c.settle([]int{0, 1, 2}, 3)
	checkTiling(t, ownRanges(views))
	for _, p := range views[1:] {
		if !slices.EqualFunc(p.Splits, views[0].Splits, bytes.Equal) {
			t.Fatalf("workers sampling the same keyspace disagree: %q vs %q", p.Splits, views[0].Splits)
		}
	}
	rows := every(bg, 3)
	c.write("c", rows)
	waitFor(t, "every change is processed", func() bool { return len(c.pending("c")) == 0 })

	st, err := c.client.f.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Partitions) != 3 || st.Unowned != 0 {
		t.Fatalf("status: %d partitions, %d unowned rows; want 3 and 0", len(st.Partitions), st.Unowned)
	}
	var published [][2][]byte
	backlog := 0
	for i, ps := range st.Partitions {
		published = append(published, [2][]byte{ps.Start, ps.End})
		backlog += ps.Backlog
		if ps.Index != i || ps.Of != 3 || ps.Owner != fmt.Sprint("w", i) {
			t.Fatalf("status partition %d: %+v", i, ps)
		}
	}
	checkTiling(t, published)
	if backlog != len(bg) {
		t.Fatalf("partition backlogs sum to %d, want the %d background rows", backlog, len(bg))
	}
	if r, _ := c.raw.ReadRow(context.Background(), []byte(partitionsRow), storage.Filter{{Family: FamilyPartitions, Qualifier: "dead"}}); len(r.Cells) != 0 {
		t.Fatal("the entry of a dead worker was not dropped")
	}

	for i, r := range stops {
		if err := r.stop(); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	leaks()
	for r, w := range c.checkProcessed(rows) {
		if want := owner(t, views, r); w != want {
			t.Fatalf("row %s was processed by %s; its range is %s's", r, w, want)
		}
	}
	if st, _ := c.client.f.Status(context.Background()); len(st.Partitions) != 0 {
		t.Fatalf("stopped workers left %d published partitions", len(st.Partitions))
	}
}

// TestPartitionedDrain: three partitioned workers draining together
// process every change exactly once, and each drain ends (its last passes
// cover the whole keyspace).
func TestPartitionedDrain(t *testing.T) {
	c := newCluster(t, memory.New(), 3)
	var rows []string
	for i := range 150 {
		rows = append(rows, fmt.Sprintf("%c%03d", 'a'+i%26, i))
	}
	c.write("c", rows)
	var stops []*running
	for i := range 3 {
		opts := WorkerOptions{Scanners: 2, MaxIdle: 5 * time.Millisecond, Drain: true, Membership: c.members[i]}
		stops = append(stops, c.start(i, opts))
	}
	for i, r := range stops {
		if err := r.wait(); err != nil {
			t.Fatalf("worker %d's drain: %v", i, err)
		}
	}
	if p := c.pending("c"); len(p) != 0 {
		t.Fatalf("%d rows left notified after the drains", len(p))
	}
	c.checkProcessed(rows)
}

// TestPartitionedWorkerDies: a worker dies (leaves the group, its run
// cancelled) with changes in its range unprocessed; the other two make a
// pass over the whole keyspace (the member list changed), split it
// between them and process the changes, each once. The dead worker
// cannot run again under its dead identity.
func TestPartitionedWorkerDies(t *testing.T) {
	c := newCluster(t, memory.New(), 3)
	bg := c.background(150)
	c.block[2] = func(ctx context.Context, _ string) error { // w2 never finishes a run
		<-ctx.Done()
		return ctx.Err()
	}
	var stops []*running
	for i := range 3 {
		opts := WorkerOptions{Scanners: 1, MaxIdle: 5 * time.Millisecond, FallbackEvery: -1, Membership: c.members[i]}
		stops = append(stops, c.start(i, opts))
	}
	views := c.settle([]int{0, 1, 2}, 3)
	rows := every(bg, 2)
	var mine []string // w2's
	for _, r := range rows {
		if owner(t, views, r) == "w2" {
			mine = append(mine, r)
		}
	}
	if len(mine) == 0 {
		t.Fatal("no change in w2's range")
	}
	c.write("c", rows)
	waitFor(t, "only w2's changes are left", func() bool { return slices.Equal(c.pending("c"), mine) })

	full := []int64{c.workers[0].f.fullPasses.Load(), c.workers[1].f.fullPasses.Load()}
	c.members[0].Remove("w2")
	if err := stops[2].stop(); err != nil {
		t.Fatalf("w2: %v", err)
	}
	waitFor(t, "w2's changes are processed", func() bool { return len(c.pending("c")) == 0 })
	after := c.settle([]int{0, 1}, 2)
	checkTiling(t, ownRanges(after))
	for i := range 2 {
		if c.workers[i].f.fullPasses.Load() == full[i] {
			t.Fatalf("w%d made no pass over the whole keyspace after the member list changed", i)
		}
	}
	opts := WorkerOptions{Scanners: 1, Membership: c.members[2]}
	if err := c.start(2, opts).wait(); !errors.Is(err, coord.ErrNotAlive) {
		t.Fatalf("Run under a dead identity: %v, want ErrNotAlive", err)
	}
	for i, r := range stops[:2] {
		if err := r.stop(); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	for r, w := range c.checkProcessed(rows) {
		if w == "w2" {
			t.Fatalf("row %s: committed by the dead worker", r)
		}
	}
}

// TestPartitionGap: two workers whose bounds disagree leave a gap no
// range covers; a notification there is found by the fallback passes
// over the whole keyspace, and never without them; a worker's drain does
// not end before a pass over the whole keyspace finds nothing, so it
// finds it too. Status counts the notified rows in the gap.
func TestPartitionGap(t *testing.T) {
	for _, mode := range []string{"no-fallback", "fallback", "drain"} {
		t.Run(mode, func(t *testing.T) {
			c := newCluster(t, memory.New(), 2)
			c.background(200)
			// w0 ends its range at k100, w1 starts its own at k150.
			c.workers[0].f.splitHook = func([][]byte) [][]byte { return [][]byte{[]byte("k100")} }
			c.workers[1].f.splitHook = func([][]byte) [][]byte { return [][]byte{[]byte("k150")} }
			// Drain: w1 drains (w0 runs on). Its range keeps a change that
			// cannot be processed (a conflict, not a failure: no
			// quarantine) until released, so that its drain does not end
			// before the gap is notified.
			keepers := []string{"k190"}
			var released atomic.Bool
			if mode == "drain" {
				keep := func(_ context.Context, row string) error {
					if slices.Contains(keepers, row) && !released.Load() {
						return fmt.Errorf("held by the test: %w", txn.ErrConflict)
					}
					return nil
				}
				c.block[0], c.block[1] = keep, keep
				c.write("c", keepers)
			}
			var stops []*running
			for i := range 2 {
				opts := WorkerOptions{Scanners: 1, MaxIdle: 5 * time.Millisecond, FallbackEvery: -1, Drain: mode == "drain" && i == 1, Membership: c.members[i]}
				if mode == "fallback" {
					opts.FallbackEvery = 3
				}
				stops = append(stops, c.start(i, opts))
			}
			c.settle([]int{0, 1}, 2)
			full := c.workers[0].f.fullPasses.Load() + c.workers[1].f.fullPasses.Load()
			if mode == "fallback" {
				// A full pass counted before full (the one the new ranges
				// ask for, or a fallback pass) may still be going on: once
				// each worker planned a range pass since, it has ended, and
				// a full pass that finds the gap's change is counted after.
				for _, w := range c.workers {
					n := w.f.rangePasses.Load()
					waitFor(t, "a range pass after the count", func() bool { return w.f.rangePasses.Load() > n })
				}
			}
			c.write("c", []string{"k050", "k120", "k180"})
			waitFor(t, "the changes in the ranges are processed", func() bool {
				p := slices.DeleteFunc(c.pending("c"), func(r string) bool { return slices.Contains(keepers, r) })
				return len(p) == 0 || slices.Equal(p, []string{"k120"})
			})
			switch mode {
			case "fallback":
				waitFor(t, "the change in the gap is processed", func() bool { return len(c.pending("c")) == 0 })
				if c.workers[0].f.fullPasses.Load()+c.workers[1].f.fullPasses.Load() == full {
					t.Fatal("the gap was processed without a fallback pass")
				}
			case "no-fallback":
				for _, w := range c.workers {
					n := w.f.rangePasses.Load()
					waitFor(t, "10 more passes", func() bool { return w.f.rangePasses.Load() >= n+10 })
				}
				if p := c.pending("c"); !slices.Equal(p, []string{"k120"}) {
					t.Fatalf("without fallback passes, pending %v; want the change in the gap left", p)
				}
				st, err := c.client.f.Status(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if len(st.Partitions) != 2 || st.Unowned != 50 {
					t.Fatalf("status: %d partitions, %d rows unowned; want 2 and the 50 in [k100, k150)", len(st.Partitions), st.Unowned)
				}
			case "drain":
				released.Store(true)
				if err := stops[1].wait(); err != nil {
					t.Fatalf("w1's drain: %v", err)
				}
				// Found by w1's last pass (w0 may find it only after w1
				// left, in the full pass a member-list change asks for).
				if p, by := c.pending("c"), c.client.get("k120", "by"); len(p) != 0 || by != "w1" {
					t.Fatalf("w1's drain ended with %v notified; k120 processed by %q", p, by)
				}
			}
			for i, r := range stops {
				if err := r.stop(); err != nil {
					t.Fatalf("worker %d: %v", i, err)
				}
			}
		})
	}
}

// checkNoLeak is leakcheck.Check.
func checkNoLeak(t *testing.T) func() { return leakcheck.Check(t) }

// lossyMembership is a Membership whose first watch ends (closes) after
// its first list, as a watch on a failing service would.
type lossyMembership struct {
	*coord.LocalMembership
	watches atomic.Int64
}

func (m *lossyMembership) WatchMembers(ctx context.Context, group string) <-chan []coord.Member {
	w := m.LocalMembership.WatchMembers(ctx, group)
	if m.watches.Add(1) > 1 {
		return w
	}
	out := make(chan []coord.Member)
	go func() {
		defer close(out)
		select {
		case l := <-w:
			out <- l
		case <-ctx.Done():
		}
	}()
	return out
}

// TestPartitionWatchLost: a worker whose membership watch ends scans the
// whole keyspace until it watches again, then follows its range again.
func TestPartitionWatchLost(t *testing.T) {
	c := newCluster(t, memory.New(), 1)
	m := &lossyMembership{LocalMembership: c.members[0]}
	run := c.start(0, WorkerOptions{Scanners: 1, MaxIdle: 5 * time.Millisecond, Membership: m})
	waitFor(t, "the worker watches again", func() bool { return m.watches.Load() == 2 })
	c.settle([]int{0}, 1)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
}
