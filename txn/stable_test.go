package txn

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stableClient is the owner's client of an embedded store whose
// read-only transactions start above the newest commit it acknowledged
// or returned.
func stableClient(t *testing.T) (*env, *Client) {
	e := newOwnedEnv(t)
	return e, e.clientWith("owner", clientFlags{stable: true})
}

func commitCell(t *testing.T, c *Client, row, value string) {
	t.Helper()
	ctx := context.Background()
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Set(row, "v", []byte(value)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// advanceSafePointAhead moves the store's safe point a few timestamps
// past the oracle's newest, and c's copy of it with it, and returns it.
func advanceSafePointAhead(t *testing.T, e *env, c *Client) uint64 {
	ctx := context.Background()
	for range 3 {
		_, _ = e.oracle.Timestamp(ctx)
	}
	sp, _ := e.oracle.Timestamp(ctx)
	if _, err := AdvanceSafePoint(ctx, e.store, sp); err != nil {
		t.Error(err)
	}
	c.safePoints.raise(sp)
	return sp
}

// A snapshot above the newest acknowledged commit that would lie below
// the safe point is not taken: the transaction starts at a fresh
// timestamp instead, and reads.
func TestStableSnapshotBelowSafePoint(t *testing.T) {
	ctx := context.Background()
	e, c := stableClient(t)
	commitCell(t, c, "bob", "10")
	sp := advanceSafePointAhead(t, e, c)
	tx, err := c.BeginReadOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tx.StartTS() <= sp {
		t.Fatalf("start_ts %d at or below the safe point %d", tx.StartTS(), sp)
	}
	if v, err := tx.Get(ctx, "bob", "v"); err != nil || string(v) != "10" {
		t.Fatalf("Get = %q, %v; want 10", v, err)
	}
}

// A safe point that moves above a snapshot after it was taken, before
// its first read, costs no error: the first read finds its snapshot too
// old, takes a fresh start timestamp and reads at it. Each read method
// does, on a transaction of its own.
func TestStableSnapshotSafePointMovesBeforeFirstRead(t *testing.T) {
	ctx := context.Background()
	reads := map[string]func(tx *Txn) (string, error){
		"Get": func(tx *Txn) (string, error) {
			v, err := tx.Get(ctx, "bob", "v")
			return string(v), err
		},
		"GetMany": func(tx *Txn) (string, error) {
			v, err := tx.GetMany(ctx, []CellKey{{Row: "bob", Column: "v"}})
			if err != nil {
				return "", err
			}
			return string(v[0]), nil
		},
		"Scan": func(tx *Txn) (string, error) {
			kvs, err := tx.Scan(ctx, "", "", "v", 0)
			if err != nil || len(kvs) != 1 {
				return "", fmt.Errorf("%v, %d rows", err, len(kvs))
			}
			return string(kvs[0].Value), nil
		},
		"ScanRows": func(tx *Txn) (string, error) {
			cells, _, err := tx.ScanRows(ctx, nil, nil, 10, 0)
			if err != nil || len(cells) != 1 {
				return "", fmt.Errorf("%v, %d cells", err, len(cells))
			}
			return string(cells[0].Value), nil
		},
		"CommitTS": func(tx *Txn) (string, error) {
			ts, err := CommitTS(ctx, tx, "bob", "v")
			return strconv.FormatUint(ts, 10), err
		},
	}
	for name, read := range reads {
		t.Run(name, func(t *testing.T) {
			e, c := stableClient(t)
			commitCell(t, c, "bob", "10")
			want := "10"
			if name == "CommitTS" {
				want = strconv.FormatUint(c.stable.newest.Load(), 10)
			}
			var sp uint64
			c.opts.afterStartTS = func() {
				c.opts.afterStartTS = nil
				sp = advanceSafePointAhead(t, e, c)
			}
			tx, err := c.BeginReadOnly(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !tx.stable || tx.startTS >= sp {
				t.Fatalf("start_ts %d (stable %v) not below the safe point %d: nothing tested", tx.startTS, tx.stable, sp)
			}
			got, err := read(tx)
			if err != nil || got != want {
				t.Fatalf("%s = %q, %v; want %q", name, got, err, want)
			}
			if tx.StartTS() <= sp {
				t.Fatalf("start_ts %d after the read, not above the safe point %d", tx.StartTS(), sp)
			}
		})
	}
}

// checkStableRealTime runs writers and readers on c and returns what
// broke real-time order: each writer commits a rising counter to a row
// of its own, in one row (one phase) or two (two phases, the second row a
// copy), and then reads it back in a read-only transaction; readers read
// every writer's rows. A read-only snapshot that began after a commit
// returned must hold it (or a later one), and a two-row commit whole.
func checkStableRealTime(t *testing.T, c *Client, writers, rounds int) []string {
	ctx := context.Background()
	acked := make([]atomic.Int64, writers)
	// twoRows[w][i]: writer w's commit i wrote the copy row too.
	twoRows := make([][]atomic.Bool, writers)
	for w := range twoRows {
		twoRows[w] = make([]atomic.Bool, rounds+1)
	}
	var (
		mu       sync.Mutex
		problems []string
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	row := func(w int, copy bool) string {
		if copy {
			return fmt.Sprintf("w%d/copy", w)
		}
		return fmt.Sprintf("w%d", w)
	}
	// readAll reads every writer's rows in one read-only snapshot and
	// checks them against what was acknowledged before it began.
	readAll := func(who string) error {
		before := make([]int64, writers)
		for w := range before {
			before[w] = acked[w].Load()
		}
		tx, err := c.BeginReadOnly(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		for w := range writers {
			var got [2]int64
			for i, copy := range []bool{false, true} {
				v, err := tx.Get(ctx, row(w, copy), "v")
				switch {
				case errors.Is(err, ErrNotFound):
					continue
				case err != nil:
					return err
				}
				got[i], _ = strconv.ParseInt(string(v), 10, 64)
			}
			if got[0] < before[w] {
				report("%s: snapshot at %d reads %d of writer %d, acknowledged %d before it began", who, tx.StartTS(), got[0], w, before[w])
			}
			if got[1] > got[0] || got[0] > 0 && twoRows[w][got[0]].Load() && got[1] != got[0] {
				report("%s: snapshot at %d reads half of writer %d's commit: %d and copy %d", who, tx.StartTS(), w, got[0], got[1])
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := int64(1); i <= int64(rounds); i++ {
				tx, err := c.Begin(ctx)
				if err != nil {
					report("begin: %v", err)
					return
				}
				v := []byte(strconv.FormatInt(i, 10))
				_ = tx.Set(row(w, false), "v", v)
				if rand.IntN(2) == 0 {
					twoRows[w][i].Store(true)
					_ = tx.Set(row(w, true), "v", v)
				}
				if err := tx.Commit(ctx); err != nil {
					report("writer %d commit %d: %v", w, i, err)
					return
				}
				acked[w].Store(i)
				if err := readAll(fmt.Sprintf("writer %d", w)); err != nil {
					report("writer %d read: %v", w, err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	var readers sync.WaitGroup
	for r := range 2 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := readAll(fmt.Sprintf("reader %d", r)); err != nil {
					report("reader %d: %v", r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()
	return problems
}

// Read-only snapshots taken above the newest acknowledged or returned
// commit keep real-time order: a snapshot that began after a commit
// returned holds it.
func TestStableSnapshotRealTime(t *testing.T) {
	_, c := stableClient(t)
	if problems := checkStableRealTime(t, c, 4, 100); len(problems) > 0 {
		t.Fatalf("real-time order broken:\n%v", problems)
	}
	if c.stable.newest.Load() == 0 {
		t.Fatal("no commit raised the newest acknowledged timestamp")
	}
}

// A client made after another acknowledged commits on the store (a
// process restarted) starts its read-only snapshots above those commits,
// though its first reads returned only older ones: its newest commit
// starts one below the first fresh timestamp it takes.
func TestStableSnapshotAfterRestart(t *testing.T) {
	ctx := context.Background()
	e, c1 := stableClient(t)
	commitCell(t, c1, "old", "1")
	commitCell(t, c1, "bob", "10")
	c1.Close()
	c2, err := NewClient(ctx, e.store, e.oracle, e.live, Options{Owner: "restarted", LockTTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if c2.index == nil {
		t.Fatal("the restarted client has no index: nothing tested")
	}
	rw, err := c2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := rw.Get(ctx, "old", "v"); err != nil || string(v) != "1" {
		t.Fatalf("Get old = %q, %v", v, err)
	}
	_ = rw.Rollback(ctx)
	ro, err := c2.BeginReadOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ro.Get(ctx, "bob", "v"); err != nil || string(v) != "10" {
		t.Fatalf("a read-only snapshot at %d after the restart: Get bob = %q, %v; want the commit acknowledged before it", ro.StartTS(), v, err)
	}
}

// stableReadOnly is a stable client after a commit of bob=10, and a
// read-only transaction of it begun after that commit.
func stableReadOnly(t *testing.T) (*Client, *Txn) {
	_, c := stableClient(t)
	commitCell(t, c, "bob", "10")
	tx, err := c.BeginReadOnly(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c, tx
}

// StartTS before any read pins the snapshot: a start taken above the
// newest acknowledged commit is replaced by a fresh timestamp, which the
// reads then use, so the caller is told the snapshot it reads (a backup
// records it).
func TestStableSnapshotStartTSPins(t *testing.T) {
	ctx := context.Background()
	c, tx := stableReadOnly(t)
	provisional := tx.startTS
	if !tx.stable || provisional != c.stable.newest.Load()+1 {
		t.Fatalf("start_ts %d (stable %v); want one above the newest commit %d", provisional, tx.stable, c.stable.newest.Load())
	}
	ts := tx.StartTS()
	if ts < provisional || tx.stable {
		t.Fatalf("StartTS = %d (stable %v); want a fresh timestamp, at least %d", ts, tx.stable, provisional)
	}
	if v, err := tx.Get(ctx, "bob", "v"); err != nil || string(v) != "10" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if tx.StartTS() != ts {
		t.Fatalf("StartTS moved from %d to %d", ts, tx.StartTS())
	}
	if oldest, _ := c.OldestActive(); oldest != ts {
		t.Fatalf("OldestActive = %d; want the pinned %d (the provisional one released)", oldest, ts)
	}
}

// unreachableOracle fails every call with err, or, if err is nil, waits
// for the caller's context to end.
type unreachableOracle struct{ err error }

func (o unreachableOracle) Timestamp(ctx context.Context) (uint64, error) {
	if o.err != nil {
		return 0, o.err
	}
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestStartTSContextOracleFails: StartTSContext pins a read-only
// snapshot only with a fresh timestamp. While the oracle fails it returns
// the error and 0, never the provisional snapshot its first read could
// still have replaced; its wait ends with its context; once the oracle
// answers, the timestamp it returns is the one the reads use.
func TestStartTSContextOracleFails(t *testing.T) {
	ctx := context.Background()
	c, tx := stableReadOnly(t)
	if !tx.stable {
		t.Fatal("want a provisional snapshot above the newest commit")
	}
	working := c.oracle
	down := errors.New("oracle unreachable")
	c.oracle = unreachableOracle{err: down}
	if ts, err := tx.StartTSContext(ctx); !errors.Is(err, down) || ts != 0 {
		t.Fatalf("StartTSContext with the oracle down = %d, %v; want 0 and its error", ts, err)
	}
	if ts := tx.StartTS(); ts != 0 {
		t.Fatalf("StartTS with the oracle down = %d; want 0", ts)
	}
	c.oracle = unreachableOracle{}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if ts, err := tx.StartTSContext(cctx); !errors.Is(err, context.DeadlineExceeded) || ts != 0 {
		t.Fatalf("StartTSContext with a hanging oracle = %d, %v; want 0 and the context's error", ts, err)
	}
	c.oracle = working
	ts, err := tx.StartTSContext(ctx)
	if err != nil || ts == 0 || tx.stable {
		t.Fatalf("StartTSContext = %d, %v (provisional %v); want a fresh timestamp", ts, err, tx.stable)
	}
	if v, err := tx.Get(ctx, "bob", "v"); err != nil || string(v) != "10" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if got, err := tx.StartTSContext(ctx); got != ts || err != nil {
		t.Fatalf("StartTSContext after a read = %d, %v; want %d", got, err, ts)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := tx.StartTSContext(ctx); got != ts || err != nil {
		t.Fatalf("StartTSContext after Rollback = %d, %v; want %d", got, err, ts)
	}
}
