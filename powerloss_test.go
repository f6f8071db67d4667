package percolator_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/storage/pebble/faultfs"
)

// The power-loss bank: accounts whose total never changes, and per-worker
// counters that every transfer increments in the same transaction. Before
// each power cut the test notes, per worker, the counter of the last
// transfer whose Commit returned nil (acknowledged) and the highest counter
// any reader saw; after the cut the recovered store must hold at least
// both. A power cut is vfs.MemFS.CrashClone: what was synced, plus (in some
// cycles) part of what was not.
const (
	plAccounts = 16
	plWorkers  = 6
	plReaders  = 2
	plTotal    = plAccounts * 100
)

var errInjectedFsync = errors.New("injected fsync failure")

type powerLoss struct {
	t   *testing.T
	rng *rand.Rand
	// acked[w] is worker w's counter in its last acknowledged transfer;
	// seen[w] the highest counter of w any reader returned.
	acked, seen [plWorkers]atomic.Int64
	checked     int // acknowledged transfers whose survival was checked
	lost        int // acknowledged (or read) transfers a cut lost
	failedOK    int // acknowledged transfers missing from what was synced
	unknown     atomic.Int64
	expect      []expectation
	lastChecked [plWorkers]int64
	// push opens the DB with Options.ReadThroughLocks.
	push bool
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func acct(i int) string { return fmt.Sprintf("acct/%02d", i) }
func ctr(w int) string  { return fmt.Sprintf("ctr/%d", w) }

func atoi(v []byte) int64 { n, _ := strconv.ParseInt(string(v), 10, 64); return n }

func getInt(ctx context.Context, tx *percolator.Txn, row string) (int64, error) {
	v, err := tx.Get(ctx, row, "v")
	if errors.Is(err, percolator.ErrNotFound) {
		return 0, nil
	}
	return atoi(v), err
}

// TestPowerLoss runs the power-loss bank with readers that wait for the
// locks they meet, and with readers that push them (ReadThroughLocks):
// those read past a lock whose commit point is syncing, and roll
// secondaries forward with deferred writes, and what they return must
// survive the cut all the same.
func TestPowerLoss(t *testing.T) {
	for _, push := range []bool{false, true} {
		name := "waiting"
		if push {
			name = "reads through locks"
		}
		t.Run(name, func(t *testing.T) { powerLossRun(t, push) })
	}
}

func powerLossRun(t *testing.T, push bool) {
	cycles := 12
	if n, err := strconv.Atoi(os.Getenv("PERCOLATOR_POWERLOSS_CYCLES")); err == nil {
		cycles = n
	}
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PERCOLATOR_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (replay with PERCOLATOR_SEED=%d)", seed, seed)
	p := &powerLoss{t: t, rng: rand.New(rand.NewPCG(seed, 7)), push: push}
	mem := vfs.NewCrashableMem()
	for cycle := range cycles {
		mem = p.cycle(cycle, mem)
	}
	p.verify(p.open(faultfs.New(mem)), cycles)
	t.Logf("power-loss run: %d cycles, %d acknowledged transfers checked, %d lost, %d commits with an unknown outcome, %d failed syncs reported as committed",
		cycles, p.checked, p.lost, p.unknown.Load(), p.failedOK)
	if p.lost > 0 || p.failedOK > 0 {
		t.Fatalf("%d acknowledged or read transfers lost, %d failed syncs reported as committed", p.lost, p.failedOK)
	}
}

type plDB struct {
	st *pebble.Store
	db *percolator.DB
}

func (p *powerLoss) open(fs vfs.FS) plDB {
	p.t.Helper()
	st, err := pebble.Open("/db", pebble.Options{FS: fs, Logger: quiet()})
	if err != nil {
		p.t.Fatal(err)
	}
	db, err := percolator.Open(context.Background(), percolator.Options{Store: st, Logger: quiet(), ReadThroughLocks: p.push})
	if err != nil {
		p.t.Fatal(err)
	}
	return plDB{st, db}
}

func (d plDB) close() {
	_ = d.db.Close()
	_ = d.st.Close()
}

// cycle opens the store in fs, checks it, runs the bank until a power cut
// and returns the filesystem the cut leaves.
func (p *powerLoss) cycle(n int, mem *vfs.MemFS) *vfs.MemFS {
	ffs := faultfs.New(mem)
	d := p.open(ffs)
	if n == 0 {
		p.init(d.db)
	} else {
		p.verify(d, n)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range plWorkers {
		wg.Add(1)
		go func() { defer wg.Done(); p.transfers(ctx, d.db, w) }()
	}
	for range plReaders {
		wg.Add(1)
		go func() { defer wg.Done(); p.reads(ctx, d.db) }()
	}
	time.Sleep(time.Duration(20+p.rng.IntN(60)) * time.Millisecond)
	clone, held := p.cut(ffs, mem)
	stop()
	wg.Wait()
	if held {
		p.checkSynced(mem, n)
	}
	d.close()
	return clone
}

// checkSynced opens what was synced when the cycle ended (after its held
// syncs failed): every transfer acknowledged in the cycle must be there. A
// commit whose sync failed, though its record was visible in memory, must
// not have been acknowledged.
func (p *powerLoss) checkSynced(mem *vfs.MemFS, cycle int) {
	acked, _ := p.snapshot()
	d := p.open(faultfs.New(mem.CrashClone(vfs.CrashCloneCfg{})))
	defer d.close()
	ctrs := p.counters(d.db, cycle)
	for w := range plWorkers {
		if ctrs[w] < acked[w] {
			p.failedOK++
			p.t.Errorf("cycle %d: worker %d acknowledged transfer %d, but only %d was synced (a failed sync reported as committed?)", cycle, w, acked[w], ctrs[w])
		}
	}
}

func (p *powerLoss) counters(db *percolator.DB, cycle int) (ctrs [plWorkers]int64) {
	ctx := context.Background()
	err := db.View(ctx, func(tx *percolator.Txn) (err error) {
		for w := range plWorkers {
			if ctrs[w], err = getInt(ctx, tx, ctr(w)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		p.t.Fatalf("cycle %d: reading counters: %v", cycle, err)
	}
	return ctrs
}

func (p *powerLoss) init(db *percolator.DB) {
	err := db.Update(context.Background(), func(tx *percolator.Txn) error {
		for i := range plAccounts {
			if err := tx.Set(acct(i), "v", []byte("100")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
}

// cut takes the power cut: with syncs held (commits published but not
// durable, and readers racing them) and then failed, or while everything
// runs; keeping none, some or all of the unsynced data.
func (p *powerLoss) cut(ffs *faultfs.FS, mem *vfs.MemFS) (clone *vfs.MemFS, held bool) {
	held = p.rng.IntN(2) == 0
	if held {
		ffs.Hold()
		wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = ffs.AwaitHeld(wctx, 1)
		cancel()
		time.Sleep(5 * time.Millisecond) // readers race the published commits
	}
	acked, seen := p.snapshot()
	cfg := vfs.CrashCloneCfg{}
	if pct := []int{0, 0, 50, 100}[p.rng.IntN(4)]; pct > 0 {
		cfg = vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(p.rng.Uint64(), 1))}
	}
	clone = mem.CrashClone(cfg)
	p.expect = append(p.expect[:0], expectation{acked: acked, seen: seen})
	if held {
		ffs.Release(errInjectedFsync) // the held syncs fail: none of them may be acknowledged
	}
	return clone, held
}

type expectation struct{ acked, seen [plWorkers]int64 }

func (p *powerLoss) snapshot() (acked, seen [plWorkers]int64) {
	for w := range plWorkers {
		acked[w], seen[w] = p.acked[w].Load(), p.seen[w].Load()
	}
	return acked, seen
}

// transfers moves money between random accounts and bumps worker w's
// counter in the same transaction, until ctx ends or the store fails.
func (p *powerLoss) transfers(ctx context.Context, db *percolator.DB, w int) {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	for ctx.Err() == nil {
		from, to := rng.IntN(plAccounts), rng.IntN(plAccounts)
		var next int64
		err := db.Update(ctx, func(tx *percolator.Txn) error {
			c, err := getInt(ctx, tx, ctr(w))
			if err != nil {
				return err
			}
			a, err := getInt(ctx, tx, acct(from))
			if err != nil {
				return err
			}
			b, err := getInt(ctx, tx, acct(to))
			if err != nil {
				return err
			}
			next = c + 1
			amt := int64(rng.IntN(10))
			if from == to {
				amt = 0
			}
			// The counter is the primary: its commit record is the commit
			// point, visible (to a scan) while the accounts are still locked.
			_ = tx.Set(ctr(w), "v", []byte(strconv.FormatInt(next, 10)))
			_ = tx.Set(acct(from), "v", []byte(strconv.FormatInt(a-amt, 10)))
			if from != to {
				_ = tx.Set(acct(to), "v", []byte(strconv.FormatInt(b+amt, 10)))
			}
			return nil
		})
		switch {
		case err == nil:
			p.acked[w].Store(next)
		case errors.Is(err, percolator.ErrCommitUnknown):
			p.unknown.Add(1)
			return
		default:
			return // the store failed, or ctx ended
		}
	}
}

// reads takes snapshots of every account and counter, by point reads or
// by scans (which read the store directly, not through the index): the
// total must be conserved, and each counter seen is remembered. A scan of
// the counters alone returns a transfer's commit point while its accounts
// are still locked: the read most exposed to a commit that is visible
// before it is durable.
func (p *powerLoss) reads(ctx context.Context, db *percolator.DB) {
	for mode := 0; ctx.Err() == nil; mode = (mode + 1) % 3 {
		var ctrs [plWorkers]int64
		total := int64(plTotal)
		err := db.View(ctx, func(tx *percolator.Txn) error {
			switch mode {
			case 0:
				return getBank(ctx, tx, &total, &ctrs)
			case 1:
				return scanBank(ctx, tx, &total, nil)
			}
			return scanBank(ctx, tx, nil, &ctrs)
		})
		if err != nil {
			return
		}
		if total != plTotal {
			p.t.Errorf("a snapshot saw total %d, want %d", total, plTotal)
		}
		for w, c := range ctrs {
			for old := p.seen[w].Load(); c > old && !p.seen[w].CompareAndSwap(old, c); old = p.seen[w].Load() {
			}
		}
	}
}

func getBank(ctx context.Context, tx *percolator.Txn, total *int64, ctrs *[plWorkers]int64) error {
	*total = 0
	for i := range plAccounts {
		v, err := getInt(ctx, tx, acct(i))
		if err != nil {
			return err
		}
		*total += v
	}
	for w := range plWorkers {
		c, err := getInt(ctx, tx, ctr(w))
		if err != nil {
			return err
		}
		ctrs[w] = c
	}
	return nil
}

// scanBank scans the accounts (into total) or the counters (into ctrs).
func scanBank(ctx context.Context, tx *percolator.Txn, total *int64, ctrs *[plWorkers]int64) error {
	if total != nil {
		kvs, err := tx.Scan(ctx, "acct/", "acct0", "v", 0)
		if err != nil {
			return err
		}
		*total = 0
		for _, kv := range kvs {
			*total += atoi(kv.Value)
		}
		return nil
	}
	kvs, err := tx.Scan(ctx, "ctr/", "ctr0", "v", 0)
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		w, _ := strconv.Atoi(string(kv.Row[len("ctr/"):]))
		ctrs[w] = atoi(kv.Value)
	}
	return nil
}

// verify reads the recovered store: totals conserved, every acknowledged
// or read transfer present, no lock left once read, and reconciles the
// counters with it (a transfer whose outcome was unknown may have landed).
func (p *powerLoss) verify(d plDB, cycle int) {
	ctx := context.Background()
	var total int64
	var ctrs [plWorkers]int64
	err := d.db.View(ctx, func(tx *percolator.Txn) error { return getBank(ctx, tx, &total, &ctrs) })
	if err != nil {
		p.t.Fatalf("cycle %d: reading the recovered store: %v", cycle, err)
	}
	if total != plTotal {
		p.t.Errorf("cycle %d: recovered total %d, want %d", cycle, total, plTotal)
	}
	for _, e := range p.expect {
		for w := range plWorkers {
			p.checked += int(e.acked[w] - min(e.acked[w], p.lastChecked[w]))
			p.lastChecked[w] = max(p.lastChecked[w], e.acked[w])
			if ctrs[w] < e.acked[w] || ctrs[w] < e.seen[w] {
				p.lost++
				p.t.Errorf("cycle %d: worker %d's counter recovered as %d; acknowledged %d, read %d before the cut", cycle, w, ctrs[w], e.acked[w], e.seen[w])
			}
		}
	}
	if locks, err := d.db.Locks(ctx); err != nil || len(locks) != 0 {
		p.t.Errorf("cycle %d: %d locks left after reading every cell (%v)", cycle, len(locks), err)
	}
	for w := range plWorkers { // the recovered state is the new baseline
		p.acked[w].Store(ctrs[w])
		p.seen[w].Store(ctrs[w])
	}
}
