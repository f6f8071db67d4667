package observer

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/txn"
)

var errBadItem = errors.New("bad item")

// fakeUpdate runs fn once, with no transaction: the loader's own
// behaviour, not the store's, is under test.
func fakeUpdate(ctx context.Context, fn func(*txn.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return fn(nil)
}

// TestLoadOnErrorSkips: with OnError returning nil, every item but the bad
// ones is loaded, each bad one is reported once with its own error, the
// callbacks never overlap and Progress counts every item; a checker over
// random bad sets and concurrency.
func TestLoadOnErrorSkips(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := range 50 {
		n := rng.IntN(200)
		bad := map[int]bool{}
		for range rng.IntN(n + 1) {
			bad[rng.IntN(max(n, 1))] = true
		}
		var loaded sync.Map
		var inCallback atomic.Int32
		reported := map[int]int{}
		lastDone := 0
		opts := LoadOptions{
			Concurrency: 1 + rng.IntN(8),
			OnError: func(item int, err error) error {
				if inCallback.Add(1) != 1 {
					t.Error("callbacks overlap")
				}
				defer inCallback.Add(-1)
				if !errors.Is(err, errBadItem) {
					t.Errorf("item %d: error %v does not wrap the item's", item, err)
				}
				reported[item]++
				return nil
			},
			Progress: func(done, total int) {
				if inCallback.Add(1) != 1 {
					t.Error("callbacks overlap")
				}
				defer inCallback.Add(-1)
				if done != lastDone+1 || total != n {
					t.Errorf("progress %d/%d after %d", done, total, lastDone)
				}
				lastDone = done
			},
		}
		err := Load(context.Background(), fakeUpdate, n, opts, func(_ *txn.Txn, i int) error {
			if bad[i] {
				return errBadItem
			}
			loaded.Store(i, true)
			return nil
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i := range n {
			_, ok := loaded.Load(i)
			if ok == bad[i] || reported[i] != map[bool]int{true: 1}[bad[i]] {
				t.Fatalf("round %d: item %d (bad %v): loaded %v, reported %d times", round, i, bad[i], ok, reported[i])
			}
		}
		if lastDone != n {
			t.Fatalf("round %d: progress ended at %d of %d", round, lastDone, n)
		}
	}
}

// TestLoadStopsOnError: without OnError (the default), or when OnError
// returns an error, the first bad item stops the load with an error
// naming it and wrapping the cause.
func TestLoadStopsOnError(t *testing.T) {
	errStop := errors.New("stop")
	for _, tc := range []struct {
		name    string
		onError func(int, error) error
		want    error
	}{
		{"default", nil, errBadItem},
		{"OnError refuses", func(int, error) error { return errStop }, errStop},
	} {
		var after atomic.Int64
		err := Load(context.Background(), fakeUpdate, 1000, LoadOptions{Concurrency: 1, OnError: tc.onError}, func(_ *txn.Txn, i int) error {
			if i == 10 {
				return errBadItem
			}
			if i > 10 {
				after.Add(1)
			}
			return nil
		})
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if after.Load() != 0 {
			t.Fatalf("%s: %d items loaded after the one that stopped the load", tc.name, after.Load())
		}
	}
}

// TestLoadCanceled: an item that fails because ctx ended is not passed to
// OnError; Load returns ctx's error.
func TestLoadCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	err := Load(ctx, fakeUpdate, 100, LoadOptions{Concurrency: 2, OnError: func(i int, err error) error {
		t.Errorf("OnError(%d, %v) after cancel", i, err)
		return nil
	}}, func(_ *txn.Txn, i int) error {
		if i == 5 {
			cancel()
			return ctx.Err()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
}
