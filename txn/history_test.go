package txn

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

// The append history: each writer transaction reads a few keys and appends
// its id to each ("increments" that remember who did them). Read-only
// transactions take snapshots of every key. Checked:
//   - every committed transaction appears exactly once in the final value of
//     each key it wrote, an aborted one nowhere, an unknown one on all of its
//     keys or none;
//   - no snapshot sees part of a transaction: a transaction id seen in one
//     key of a snapshot is seen in every key it wrote;
//   - every snapshot value of a key is a prefix of its final value (no lost
//     or reordered updates).

const historyKeys = 6

type attempt struct {
	id      string
	keys    []string
	outcome string // committed, aborted, unknown
	err     error  // what the commit returned, for a failure's message
}

type history struct {
	mu        sync.Mutex
	attempts  map[string]*attempt
	snapshots []map[string][]string
}

func parseList(v []byte) []string {
	if len(v) == 0 {
		return nil
	}
	return strings.Split(string(v), ",")
}

func runHistory(t *testing.T, c *Client, seed uint64, workers, perWorker int) *history {
	h := &history{attempts: map[string]*attempt{}}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := range perWorker {
				if rng.IntN(4) == 0 {
					h.snapshot(t, c)
					continue
				}
				h.write(c, rng, fmt.Sprintf("w%d.%d", w, i))
			}
		}()
	}
	wg.Wait()
	return h
}

func (h *history) write(c *Client, rng *rand.Rand, id string) {
	ctx := context.Background()
	keys := rng.Perm(historyKeys)[:1+rng.IntN(3)]
	a := &attempt{id: id}
	tx, err := c.Begin(ctx)
	if err == nil {
		for _, k := range keys {
			key := "k" + strconv.Itoa(k)
			a.keys = append(a.keys, key)
			var v []byte
			if v, err = tx.Get(ctx, key, "v"); err != nil && !errors.Is(err, ErrNotFound) {
				break
			}
			err = tx.Set(key, "v", []byte(strings.Join(append(parseList(v), id), ",")))
		}
		if err == nil {
			err = tx.Commit(ctx)
		}
	}
	a.err = err
	switch {
	case err == nil:
		a.outcome = "committed"
	case errors.Is(err, ErrCommitUnknown):
		a.outcome = "unknown"
	default:
		a.outcome = "aborted"
	}
	h.mu.Lock()
	h.attempts[id] = a
	h.mu.Unlock()
}

func (h *history) snapshot(t *testing.T, c *Client) {
	ctx := context.Background()
	tx, err := c.BeginReadOnly(ctx)
	if err != nil {
		return
	}
	snap := map[string][]string{}
	for k := range historyKeys {
		key := "k" + strconv.Itoa(k)
		v, err := tx.Get(ctx, key, "v")
		if err != nil && !errors.Is(err, ErrNotFound) {
			return // an injected fault; the snapshot is incomplete
		}
		snap[key] = parseList(v)
	}
	h.mu.Lock()
	h.snapshots = append(h.snapshots, snap)
	h.mu.Unlock()
}

func (h *history) check(t *testing.T, final map[string][]string) {
	t.Helper()
	counts := map[string]map[string]int{} // txn → key → occurrences
	for key, ids := range final {
		for _, id := range ids {
			if counts[id] == nil {
				counts[id] = map[string]int{}
			}
			counts[id][key]++
		}
	}
	n := map[string]int{}
	for id, a := range h.attempts {
		n[a.outcome]++
		seen := 0
		for _, k := range a.keys {
			if counts[id][k] > 1 {
				t.Errorf("%s appears %d times in %s", id, counts[id][k], k)
			}
			seen += counts[id][k]
		}
		switch {
		case a.outcome == "committed" && seen != len(a.keys):
			t.Errorf("committed %s visible in %d of its %d keys %v", id, seen, len(a.keys), a.keys)
		case a.outcome == "aborted" && seen != 0:
			t.Errorf("aborted %s visible in %d keys of %v (its commit returned %v)", id, seen, a.keys, a.err)
		case a.outcome == "unknown" && seen != 0 && seen != len(a.keys):
			t.Errorf("unknown %s partially visible: %d of %d keys", id, seen, len(a.keys))
		}
	}
	for i, snap := range h.snapshots {
		h.checkSnapshot(t, i, snap, final)
	}
	t.Logf("attempts: %v, snapshots: %d", n, len(h.snapshots))
	if n["committed"] == 0 {
		t.Error("no transaction committed")
	}
}

func (h *history) checkSnapshot(t *testing.T, i int, snap, final map[string][]string) {
	for key, ids := range snap {
		if len(ids) > len(final[key]) || !slices.Equal(ids, final[key][:len(ids)]) {
			t.Errorf("snapshot %d: %s=%v is not a prefix of the final %v", i, key, ids, final[key])
		}
		for _, id := range ids {
			for _, k := range h.attempts[id].keys {
				if !slices.Contains(snap[k], id) {
					t.Errorf("snapshot %d sees %s in %s but not in %s: a partial transaction", i, id, key, k)
				}
			}
		}
	}
}

func finalState(t *testing.T, c *Client) map[string][]string {
	ctx := context.Background()
	tx, err := c.BeginReadOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	final := map[string][]string{}
	for k := range historyKeys {
		key := "k" + strconv.Itoa(k)
		v, err := tx.Get(ctx, key, "v")
		if err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		final[key] = parseList(v)
	}
	return final
}

func historySeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(getenv("PERCOLATOR_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (replay with PERCOLATOR_SEED=%d)", seed, seed)
	return seed
}

func TestHistory(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			seed := historySeed(t)
			e := newEnvBackend(t, backend)
			c := e.client("A")
			c.opts.InlineSize = 4 // exercise the data column too
			if c.index != nil {
				c.index.maxPerShard = 3 // drop the latest-commit cache often
			}
			h := runHistory(t, c, seed, 8, 150)
			h.check(t, finalState(t, c))
			if n := countLocks(t, e.store); n != 0 {
				t.Errorf("%d locks left after a clean run", n)
			}
		})
	}
}

// TestHistoryFaulty runs the history over a store that duplicates, delays
// and loses replies of its calls, with a short real-time lock TTL so that
// locks whose owner gave up expire.
func TestHistoryFaulty(t *testing.T) {
	// Three rounds per mode: a late duplicate reaches a cell without a
	// latest-commit entry only now and then.
	for _, indexed := range []bool{true, false} {
		for round := range 3 {
			t.Run(fmt.Sprintf("indexed=%v/%d", indexed, round), func(t *testing.T) {
				testHistoryFaulty(t, indexed)
			})
		}
	}
}

func testHistoryFaulty(t *testing.T, indexed bool) {
	seed := historySeed(t)
	mem := memory.New()
	defer mem.Close()
	var (
		fs    *faultyStore
		store storage.Store
	)
	if indexed {
		fx := newFaultyExclusive(mem, seed)
		fs, store = fx.faultyStore, fx
	} else {
		fs = newFaultyStore(storagetest.SharedStore{Store: mem}, seed)
		store = fs
	}
	// A tiny index cap drops the latest-commit cache all the time,
	// so late duplicates of old commits meet cells with no entry.
	c, err := NewClient(context.Background(), store, &counterOracle{}, coord.NewLocal(),
		Options{Owner: "A", LockTTL: 200 * time.Millisecond, InlineSize: 4, IndexShards: 2, indexCap: 3})
	if err != nil {
		t.Fatal(err)
	}
	h := runHistory(t, c, seed, 8, 200)
	fs.drain()
	h.check(t, finalState(t, c))
	t.Logf("faults injected: %v", fs.faults)
}

// TestHistoryLossy runs the history over storagetest.Lossy: writes fail
// before they apply or lose their reply, calls without a nonce (the
// protocol's CheckAndMutateIdempotent and secondary-commit batches) arrive
// again late, reads fail. On a shared store (no index, as on Bigtable or a
// server) every protocol call goes through those variants; on an
// exclusive one through the index's Conditioned and Deferred calls.
func TestHistoryLossy(t *testing.T) { historyLossy(t, 60) }

// TestFaultSuiteHistoryLossy (PERCOLATOR_FAULT_SUITE=1) is
// TestHistoryLossy with longer histories.
func TestFaultSuiteHistoryLossy(t *testing.T) {
	if getenv("PERCOLATOR_FAULT_SUITE") != "1" {
		t.Skip("a fault soak: set PERCOLATOR_FAULT_SUITE=1 to run it")
	}
	historyLossy(t, 400)
}

func historyLossy(t *testing.T, per int) {
	for _, indexed := range []bool{false, true} {
		t.Run(fmt.Sprintf("indexed=%v", indexed), func(t *testing.T) {
			seed := historySeed(t)
			mem := memory.New()
			defer mem.Close()
			var inner storage.Store = mem
			if !indexed {
				inner = storagetest.SharedStore{Store: mem}
			}
			st, lossy := storagetest.NewLossy(inner, storagetest.LossyOptions{
				Seed: seed, FailBefore: 0.03, LoseReply: 0.03, Duplicate: 0.1, ReadFail: 0.03})
			// Opening is not what this history tests: a read that fails
			// while the lock index is rebuilt fails NewClient, as it should.
			lossy.SetEnabled(false)
			c, err := NewClient(context.Background(), st, &counterOracle{}, coord.NewLocal(),
				Options{Owner: "A", LockTTL: 200 * time.Millisecond, InlineSize: 4})
			if err != nil {
				t.Fatal(err)
			}
			lossy.SetEnabled(true)
			if c.Indexed() != indexed {
				t.Fatalf("client indexed %v, want %v", c.Indexed(), indexed)
			}
			h := runHistory(t, c, seed, 6, per)
			lossy.SetEnabled(false)
			lossy.Flush()
			h.check(t, finalState(t, c))
			stats := lossy.Stats()
			t.Logf("faults: %+v", stats)
			if !indexed && stats.Duplicated == 0 {
				t.Error("no call was duplicated: the history tests less than it says")
			}
		})
	}
}

func countLocks(t *testing.T, st storage.Store) int {
	n := 0
	err := st.Scan(context.Background(), nil, nil, storage.Filter{{Family: FamilyLock, AllQualifiers: true}}, 0,
		func(r storage.Row) bool { n += len(r.Cells); return true })
	if err != nil {
		t.Fatal(err)
	}
	return n
}
