package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/queue"
	"github.com/seed-992972ee/percolator/storage"
)

const (
	queueWorkers = 8 // pushers, then poppers, measured; and the poppers putting items in flight
	// queuePushers push the items to put in flight (not measured): more
	// writes share each log sync. More poppers do not help: 32 took
	// twice as long as 8 to hold 100,000 items, visiting 3x the keys
	// per Pop and losing 3x the claims.
	queuePushers = 32
	queueHold    = 10 * time.Minute // lease of the items kept in flight
	queueLease   = time.Minute      // lease of the measured pops
)

// queueSide is one queue measured: the queue package, or the scan
// baseline. Its methods are safe for concurrent use.
type queueSide interface {
	// hold puts n items in flight: pushed, then popped under a lease of
	// queueHold and never acked.
	hold(ctx context.Context, n int, body []byte, prog Progress) error
	push(ctx context.Context, body []byte) error
	// popAck pops the lowest available item and acks it; false when none
	// was available.
	popAck(ctx context.Context) (bool, error)
	// cost is the pops so far, the stored keys their scans visited, and
	// the claims lost to another worker.
	cost() (pops, keys, conflicts uint64)
}

// queueFigure: push and pop+ack throughput with 8 workers of the queue
// package against a plain "scan for the lowest unclaimed item" queue on
// the same embedded store, each with 1,000 and with 100,000 items in
// flight (leased, unacked), with the keys each Pop's scans visited. The
// baseline's scans pass every item in flight; the queue's index keeps
// leased items out of a Pop's range, so its cost must not grow.
func queueFigure(ctx context.Context, b *runner, r *Report) error {
	return b.queueInFlight(ctx, r, 1_000, 100_000)
}

// queueInFlight measures both sides with lo, then hi items in
// flight (held under a lease, unacked).
func (b *runner) queueInFlight(ctx context.Context, r *Report, lo, hi int) error {
	var figs []queueMeasure
	for _, n := range []int{lo, hi} {
		for _, side := range []string{"queue", "scan"} {
			f, err := b.measureQueueSide(ctx, side, n)
			if err != nil {
				return fmt.Errorf("%s, %d in flight: %w", side, n, err)
			}
			figs = append(figs, f)
		}
	}
	printQueueFigures(r, b.opts.ValueSize, figs, lo, hi)
	return nil
}

// queueMeasure is one side's measurement at one number of items in flight.
type queueMeasure struct {
	side     string
	inFlight int
	push     float64 // items/s pushed by queueWorkers
	popAck   float64 // items/s popped and acked by queueWorkers
	drained  bool    // the pushed items ran out before the time was up
	pops     uint64  // measured pops
	keys     float64 // stored keys visited per pop
	conflict float64 // claims lost per pop
	setup    time.Duration
}

func (b *runner) measureQueueSide(ctx context.Context, side string, n int) (queueMeasure, error) {
	f := queueMeasure{side: side, inFlight: n}
	db, err := percolator.Open(ctx, percolator.Options{Dir: filepath.Join(b.opts.Dir, fmt.Sprintf("queue-%s-%d", side, n))})
	if err != nil {
		return f, err
	}
	defer db.Close()
	q, err := newQueueSide(db.Store(), side)
	if err != nil {
		return f, err
	}
	body := make([]byte, b.opts.ValueSize)
	prog := b.opts.Progress
	start := time.Now()
	if err := q.hold(ctx, n, body, prog); err != nil {
		return f, err
	}
	f.setup = time.Since(start)
	fmt.Fprintf(b.opts.Log, "queue:   %s: %d items put in flight in %s\n", side, n, f.setup.Round(time.Millisecond))
	end := b.timed(ctx, "queue: seconds of pushes measured", b.opts.Duration)
	f.push, _, err = timedRate(ctx, b.opts.Duration, func() (bool, error) { return true, q.push(ctx, body) })
	if end(err); err != nil {
		return f, err
	}
	p0, k0, c0 := q.cost()
	end = b.timed(ctx, "queue: seconds of pops and acks measured", b.opts.Duration)
	f.popAck, f.drained, err = timedRate(ctx, b.opts.Duration, func() (bool, error) { return q.popAck(ctx) })
	if end(err); err != nil {
		return f, err
	}
	p1, k1, c1 := q.cost()
	f.pops = p1 - p0
	if f.pops > 0 {
		f.keys, f.conflict = float64(k1-k0)/float64(f.pops), float64(c1-c0)/float64(f.pops)
	}
	return f, nil
}

func newQueueSide(st storage.Store, side string) (queueSide, error) {
	if side == "scan" {
		return newScanQueue(st, "bench")
	}
	q, err := queue.New(st, queue.Options{})
	if err != nil {
		return nil, err
	}
	return &leasedQueue{q: q, name: "bench"}, nil
}

// timedRate runs op from queueWorkers goroutines for d, or until op
// reports nothing left (drained), and returns the ops per second that
// succeeded, over the time until the last worker stopped. The first error
// stops every worker and is returned.
func timedRate(ctx context.Context, d time.Duration, op func() (bool, error)) (float64, bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done atomic.Int64
	var drained atomic.Bool
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for range queueWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(end) {
				ok, err := op()
				if err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				if !ok {
					drained.Store(true)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(done.Load()) / time.Since(start).Seconds(), drained.Load(), first
}

// parallel runs fn n times from the given number of goroutines, showing
// progress, and returns the first error.
func parallel(ctx context.Context, n, workers int, desc string, prog Progress, fn func() error) error {
	prog.Start(desc, int64(n))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next, done atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && next.Add(1) <= int64(n) {
				if err := fn(); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				prog.Set(done.Add(1))
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	prog.End(first)
	return first
}

func printQueueFigures(r *Report, valueSize int, figs []queueMeasure, lo, hi int) {
	r.printf("queue:   %d-byte items, %d pushers, then %d workers popping and acking the pushed items, with items in flight (popped under a %s lease, never acked)",
		valueSize, queueWorkers, queueWorkers, queueHold)
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "side\tin flight\tpush items/s\tpop+ack items/s\tkeys visited/Pop\tconflicts/Pop\tpops\t")
	for _, f := range figs {
		note := ""
		if f.drained {
			note = " (drained)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f%s\t%.1f\t%.2f\t%d\t\n", f.side, f.inFlight, f.push, f.popAck, note, f.keys, f.conflict, f.pops)
	}
	_ = tw.Flush()
	r.Lines = append(r.Lines, strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")...)
	get := func(side string, n int) queueMeasure {
		for _, f := range figs {
			if f.side == side && f.inFlight == n {
				return f
			}
		}
		return queueMeasure{}
	}
	ql, qh, sl, sh := get("queue", lo), get("queue", hi), get("scan", lo), get("scan", hi)
	growth := show(qh.keys/max(ql.keys, 1e-9), 2)
	r.printf("queue:   keys visited per Pop, %d vs %d in flight: queue %sx (%.1f -> %.1f), scan %.2fx (%.1f -> %.1f) (target: queue's within 2x: %s)",
		hi, lo, growth, ql.keys, qh.keys, sh.keys/max(sl.keys, 1e-9), sl.keys, sh.keys, r.mark("queue keys per Pop within 2x", growth.atMost(2)))
	r.printf("queue:   pop+ack items/s, %d vs %d in flight: queue %.2fx (%.0f -> %.0f), scan %.3fx (%.0f -> %.0f)",
		hi, lo, qh.popAck/max(ql.popAck, 1e-9), ql.popAck, qh.popAck, sh.popAck/max(sl.popAck, 1e-9), sl.popAck, sh.popAck)
	ratio := show(qh.popAck/max(sh.popAck, 1e-9), 1)
	r.printf("queue:   pop+ack at %d in flight: %.0f vs %.0f items/s (scan): ratio %sx (target >= 1x: %s); at %d: %.1fx",
		hi, qh.popAck, sh.popAck, ratio, r.mark("queue pop+ack >= 1x the scan", ratio.atLeast(1)), lo, ql.popAck/max(sl.popAck, 1e-9))
}

// leasedQueue is the queue package on one queue name.
type leasedQueue struct {
	q    *queue.Queue
	name string
}

func (l *leasedQueue) hold(ctx context.Context, n int, body []byte, prog Progress) error {
	err := parallel(ctx, n, queuePushers, "queue: items pushed", prog, func() error { return l.push(ctx, body) })
	if err != nil {
		return err
	}
	err = parallel(ctx, n, queueWorkers, "queue: items popped and held", prog, func() error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := l.q.Pop(pctx, l.name, queueHold)
		return err
	})
	if err != nil {
		return err
	}
	st, err := l.q.Stats(ctx, l.name)
	if err != nil {
		return err
	}
	if st.InFlight != n || st.Depth != 0 {
		return fmt.Errorf("%d items in flight and %d waiting after holding %d", st.InFlight, st.Depth, n)
	}
	return nil
}

func (l *leasedQueue) push(ctx context.Context, body []byte) error {
	_, err := l.q.Push(ctx, l.name, body)
	return err
}

func (l *leasedQueue) popAck(ctx context.Context) (bool, error) {
	d, err := l.q.TryPop(ctx, l.name, queueLease)
	if err != nil || d == nil {
		return false, err
	}
	return true, l.q.Ack(ctx, d)
}

func (l *leasedQueue) cost() (pops, keys, conflicts uint64) {
	m := l.q.Metrics()
	return m.Pops, m.KeysVisited, m.Conflicts
}

// scanQueue is the baseline: a plain "scan for the lowest unclaimed item"
// queue. An item is a row "scan/NAME/SEQ" (SEQ: 16 hex digits, in push
// order) with a body cell and a claim cell whose version is the claim's
// expiry in ms (0: never claimed). Pop scans from the queue's first row
// for the first row whose claim has expired and claims it by
// CheckAndMutate on the claim's version; a lost claim scans on after that
// row. Ack deletes the row. No index, no cursor: every Pop passes every
// item in flight (and, until a compaction, the deletion markers of the
// acked ones). Expiry is judged by this process's clock (the store is
// embedded: it is the store's). It does not fence a stale worker's Ack.
type scanQueue struct {
	st      storage.Store
	counted storage.Counted
	prefix  string
	seq     atomic.Uint64

	pops, visited, conflicts atomic.Uint64
}

const scanFamily = "qscan"

var scanItemFilter = storage.Filter{
	{Family: scanFamily, Qualifier: "b", Limit: 1},
	{Family: scanFamily, Qualifier: "c", Limit: 1},
}

func newScanQueue(st storage.Store, name string) (*scanQueue, error) {
	c, ok := st.(storage.Counted)
	if !ok {
		return nil, errors.New("the store cannot count the keys its scans visit (storage.Counted)")
	}
	return &scanQueue{st: st, counted: c, prefix: "scan/" + name + "/"}, nil
}

func (s *scanQueue) row(seq uint64) []byte { return fmt.Appendf(nil, "%s%016x", s.prefix, seq) }

func (s *scanQueue) item(body []byte, claim uint64) []storage.Mutation {
	return []storage.Mutation{storage.SetCell(scanFamily, "b", 0, body), storage.SetCell(scanFamily, "c", claim, nil)}
}

// hold writes n items as a push and a claim leave them, in batches: a
// Pop of each would take time quadratic in n. It spares the baseline
// the deletion marker a claim leaves on the claim's old version, one key
// fewer per item in flight for its scans to visit.
func (s *scanQueue) hold(ctx context.Context, n int, body []byte, prog Progress) error {
	b, ok := s.st.(storage.Batcher)
	if !ok {
		return errors.New("the store cannot write batches (storage.Batcher)")
	}
	claim := uint64(time.Now().Add(queueHold).UnixMilli())
	prog.Start("scan: items held", int64(n))
	for i := 0; i < n; i += 1000 {
		var rows []storage.RowMutation
		for range min(1000, n-i) {
			rows = append(rows, storage.RowMutation{Row: s.row(s.seq.Add(1)), Mutations: s.item(body, claim)})
		}
		if errs, err := b.MutateRows(ctx, rows); err != nil || errs != nil {
			err = errors.Join(append(errs, err)...)
			prog.End(err)
			return err
		}
		prog.Set(int64(i + len(rows)))
	}
	prog.End(nil)
	return nil
}

func (s *scanQueue) push(ctx context.Context, body []byte) error {
	return s.st.Mutate(ctx, s.row(s.seq.Add(1)), s.item(body, 0)...)
}

func (s *scanQueue) popAck(ctx context.Context) (bool, error) {
	row, err := s.pop(ctx, queueLease)
	if err != nil || row == nil {
		return false, err
	}
	return true, s.st.Mutate(ctx, row, storage.Mutation{Kind: storage.DeleteCells, Family: scanFamily, Qualifier: "b"},
		storage.Mutation{Kind: storage.DeleteCells, Family: scanFamily, Qualifier: "c"})
}

// pop claims the lowest unclaimed item under a lease of ttl and returns
// its row, or nil when there is none.
func (s *scanQueue) pop(ctx context.Context, ttl time.Duration) ([]byte, error) {
	from, end := []byte(s.prefix), []byte(s.prefix+"\xff")
	for {
		now := uint64(time.Now().UnixMilli())
		var found []byte
		var claim uint64
		v, err := s.counted.ScanCounted(ctx, from, end, scanItemFilter, 0, func(r storage.Row) bool {
			for _, c := range r.Cells {
				if c.Qualifier == "c" && c.TS <= now {
					found, claim = r.Key, c.TS
					return false
				}
			}
			return true
		})
		s.visited.Add(v)
		if err != nil || found == nil {
			return nil, err
		}
		ok, err := s.claim(ctx, found, claim, now+uint64(ttl.Milliseconds()))
		if err != nil {
			return nil, err
		}
		if ok {
			s.pops.Add(1)
			return found, nil
		}
		s.conflicts.Add(1)
		from = append(found, 0)
	}
}

// claim moves row's claim from version old to expiry, if it is still at
// old (and the row was not acked meanwhile).
func (s *scanQueue) claim(ctx context.Context, row []byte, old, expiry uint64) (bool, error) {
	return s.st.CheckAndMutate(ctx, row, storage.Filter{{Family: scanFamily, Qualifier: "c", Time: storage.At(old), Limit: 1}},
		[]storage.Mutation{
			storage.SetCell(scanFamily, "c", expiry, nil),
			{Kind: storage.DeleteCells, Family: scanFamily, Qualifier: "c", Time: storage.Before(expiry)},
		}, nil)
}

func (s *scanQueue) cost() (pops, keys, conflicts uint64) {
	return s.pops.Load(), s.visited.Load(), s.conflicts.Load()
}
