package txn

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

// unversionedOracle is a VersionedOracle whose replies carry no version
// (an oracle that reads no store); it counts both kinds of call.
type unversionedOracle struct {
	counterOracle
	versioned atomic.Int64
}

func (o *unversionedOracle) TimestampVersion(ctx context.Context) (uint64, uint64, bool, error) {
	o.versioned.Add(1)
	ts, err := o.Timestamp(ctx)
	return ts, 0, false, err
}

// countingObservers observes nothing and counts the registry re-reads.
type countingObservers struct{ refreshes, refreshTos atomic.Int64 }

func (*countingObservers) Snapshot() (Observed, uint64) { return nil, 1 }
func (c *countingObservers) Refresh(context.Context) (Observed, uint64, error) {
	c.refreshes.Add(1)
	return nil, 1, nil
}
func (c *countingObservers) RefreshTo(context.Context, uint64) (Observed, uint64, error) {
	c.refreshTos.Add(1)
	return nil, 1, nil
}

// TestUnversionedReplySkips: after a commit timestamp came without a
// registry version, the next commits re-read the registry beside the
// timestamp call (not after it) for unversionedSkip commits, then ask the
// oracle for its version again; every commit re-reads the registry once.
func TestUnversionedReplySkips(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	defer mem.Close()
	orc := &unversionedOracle{}
	c, err := NewClient(ctx, storagetest.SharedStore{Store: mem}, orc, coord.NewLocal(), Options{Owner: "w"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	obs := &countingObservers{}
	c.SetObservers(obs)
	commits := unversionedSkip + 2
	for i := range commits {
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = tx.Set("r", "c", []byte{byte(i)})
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := orc.versioned.Load(); got != 2 {
		t.Errorf("%d commits asked the oracle for its version %d times, want 2 (the first, then after %d skipped)", commits, got, unversionedSkip)
	}
	if got, to := obs.refreshes.Load(), obs.refreshTos.Load(); got != int64(commits) || to != 0 {
		t.Errorf("registry re-read %d times (%d to a version) in %d commits, want every commit once", got, to, commits)
	}
}
