package txn

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// lowStore is a store on a disk that may be nearly full: while low, it
// refuses every write with storage.ErrNoSpace, changing nothing, but for
// those whose context storage.WithReserve marks (as the Pebble store
// does). It has no index and no deferred writes.
type lowStore struct {
	storage.Store
	low atomic.Bool
}

func (s *lowStore) admit(ctx context.Context) error {
	if s.low.Load() && !storage.UsesReserve(ctx) {
		return fmt.Errorf("%w: test disk", storage.ErrNoSpace)
	}
	return nil
}

func (s *lowStore) Mutate(ctx context.Context, row []byte, muts ...storage.Mutation) error {
	if err := s.admit(ctx); err != nil {
		return err
	}
	return s.Store.Mutate(ctx, row, muts...)
}

func (s *lowStore) CheckAndMutate(ctx context.Context, row []byte, pred storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if err := s.admit(ctx); err != nil {
		return false, err
	}
	return s.Store.CheckAndMutate(ctx, row, pred, ifTrue, ifFalse)
}

func (s *lowStore) Increment(ctx context.Context, row []byte, family, qualifier string, delta int64) (int64, error) {
	if err := s.admit(ctx); err != nil {
		return 0, err
	}
	return s.Store.Increment(ctx, row, family, qualifier, delta)
}

// TestCommitOverReserve: a store that runs low on space between a
// transaction's prewrites and its commit still takes the commit (it
// finishes what is written, over the reserve), and one that runs low
// during the prewrites fails the transaction with ErrNoSpace and takes
// its rollback: no outcome is left unknown, no lock left behind.
func TestCommitOverReserve(t *testing.T) {
	for _, tc := range []struct {
		at      string // the step after which the store is low
		nth     int
		commits bool
	}{
		{crashAfterSessionCheck, 1, true},
		{crashAfterPrimaryPrewrite, 1, false},
		{crashAfterSecondaryPrewrite, 1, false},
	} {
		t.Run(tc.at, func(t *testing.T) {
			ctx := context.Background()
			mem := memory.New()
			t.Cleanup(func() { _ = mem.Close() })
			st := &lowStore{Store: mem}
			e := newEnvOn(t, st, false)
			c := e.client("writer")
			c.secondaryBatch = 1
			tx, _ := c.Begin(ctx)
			for i := range 3 {
				_ = tx.Set(fmt.Sprintf("r%d", i), "v", []byte("new"))
			}
			seen := 0
			c.crash = func(p string) bool {
				if p == tc.at {
					if seen++; seen == tc.nth {
						st.low.Store(true)
					}
				}
				return false
			}
			err := tx.Commit(ctx)
			switch {
			case tc.commits && err != nil:
				t.Fatalf("commit after the store ran low: %v; want it committed over the reserve", err)
			case !tc.commits && !errors.Is(err, storage.ErrNoSpace):
				t.Fatalf("commit while the store ran low: %v; want ErrNoSpace", err)
			case errors.Is(err, ErrCommitUnknown):
				t.Fatalf("outcome unknown: %v", err)
			}
			if n := countLocks(t, st); n != 0 {
				t.Fatalf("%d locks left", n)
			}
			st.low.Store(false)
			r, _ := e.client("reader").BeginReadOnly(ctx)
			want := map[bool]string{true: "new", false: ""}[tc.commits]
			for i := range 3 {
				v, err := r.Get(ctx, fmt.Sprintf("r%d", i), "v")
				if (err != nil && !errors.Is(err, ErrNotFound)) || string(v) != want {
					t.Fatalf("r%d = %q, %v; want %q", i, v, err, want)
				}
			}
		})
	}
}
