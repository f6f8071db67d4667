package observer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/storagetest"
	"github.com/seed-992972ee/percolator/txn"
)

// TestObserverLossy: writers change an observed column while a worker
// runs, all over storagetest.Lossy (writes fail before they apply or lose
// their reply, calls without a nonce — the protocol's prewrites, commits
// and secondary commits on a shared store — arrive again late, reads
// fail). The observer appends the value it saw to a log column in its own
// transaction. Then, faults off and the late copies delivered, a drain:
// every row's log ends with the row's final value (no change lost), holds
// no value twice (at most one run commits per change; changes may
// collapse), and holds only values some writer wrote. Nothing is left
// quarantined. PERCOLATOR_FAULT_SUITE=1 runs a longer history.
func TestObserverLossy(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PERCOLATOR_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (replay with PERCOLATOR_SEED=%d)", seed, seed)
	per := 60
	if os.Getenv("PERCOLATOR_FAULT_SUITE") == "1" {
		per = 200
	}
	mem := memory.New()
	st, lossy := storagetest.NewLossy(storagetest.SharedStore{Store: mem}, storagetest.LossyOptions{
		Seed: seed, FailBefore: 0.03, LoseReply: 0.03, Duplicate: 0.1, ReadFail: 0.03})
	lossy.SetEnabled(false) // while the framework opens
	// A failure of an injected fault is not the observer's: never
	// quarantine for it.
	e := newEnvOn(t, st, Options{MaxFailures: 1 << 20})
	ctx := context.Background()
	if err := e.f.Register(ctx, Observer{Name: "log", Column: "in", Fn: appendSeen}); err != nil {
		t.Fatal(err)
	}
	lossy.SetEnabled(true)
	wctx, stop := context.WithCancel(ctx)
	worker := make(chan error, 1)
	go func() {
		// A scan that fails ends Run with the error; its caller starts it
		// again.
		for {
			_, err := e.f.Run(wctx, WorkerOptions{Scanners: 2, MaxIdle: 5 * time.Millisecond})
			if errors.Is(err, storagetest.ErrInjected) {
				err = nil
			}
			if err != nil || wctx.Err() != nil {
				worker <- err
				return
			}
		}
	}()
	const rows, writers = 4, 3
	var mu sync.Mutex
	written := map[string][]string{} // row → values of the writes that committed or may have
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := range per {
				row, v := fmt.Sprint("r", rng.IntN(rows)), fmt.Sprintf("w%d.%d", w, i)
				tx, err := e.client.Begin(ctx)
				if err == nil {
					if err = tx.Set(row, "in", []byte(v)); err == nil {
						err = tx.Commit(ctx)
					}
				}
				if err == nil || errors.Is(err, txn.ErrCommitUnknown) {
					mu.Lock()
					written[row] = append(written[row], v)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	stop()
	if err := <-worker; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("worker: %v", err)
	}
	lossy.SetEnabled(false)
	lossy.Flush()
	t.Logf("faults: %+v", lossy.Stats())
	e.drain(2)
	for r := range rows {
		row := fmt.Sprint("r", r)
		final, seen := e.get(row, "in"), strings.Split(e.get(row, "seen"), ",")
		if final == "<none>" {
			continue // no write of it committed
		}
		if seen[len(seen)-1] != final {
			t.Errorf("%s: the observer's last committed run saw %q, the column holds %q: a change was lost (log %v)", row, seen[len(seen)-1], final, seen)
		}
		for i, v := range seen {
			if slices.Contains(seen[:i], v) {
				t.Errorf("%s: two committed runs saw the change %q (log %v)", row, v, seen)
			}
			if !slices.Contains(written[row], v) {
				t.Errorf("%s: a run saw %q, which no writer wrote (log %v)", row, v, seen)
			}
		}
	}
	if q, err := e.f.Quarantine(ctx); err != nil || len(q) != 0 {
		t.Fatalf("quarantined: %v, %v", q, err)
	}
}

// appendSeen appends the value of (row, col) to the row's log column
// "seen", in the run's transaction.
func appendSeen(ctx context.Context, tx *txn.Txn, row, col string) error {
	v, err := tx.Get(ctx, row, col)
	if err != nil && !errors.Is(err, txn.ErrNotFound) {
		return err
	}
	log, err := tx.Get(ctx, row, "seen")
	if err != nil && !errors.Is(err, txn.ErrNotFound) {
		return err
	}
	if len(log) > 0 {
		log = append(log, ',')
	}
	return tx.Set(row, "seen", append(log, v...))
}
