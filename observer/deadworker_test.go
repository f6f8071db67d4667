package observer

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

var errSevered = errors.New("severed: the process is gone")

// severable is a process's connection to a shared store that dies with
// it: once severed, every call fails and nothing it sends lands.
type severable struct {
	storage.Store
	cut atomic.Bool
}

func (s *severable) sever() { s.cut.Store(true) }

func (s *severable) check() error {
	if s.cut.Load() {
		return errSevered
	}
	return nil
}

func (s *severable) ReadRow(ctx context.Context, row []byte, f storage.Filter) (storage.Row, error) {
	if err := s.check(); err != nil {
		return storage.Row{}, err
	}
	return s.Store.ReadRow(ctx, row, f)
}

func (s *severable) Scan(ctx context.Context, start, end []byte, f storage.Filter, limit int, fn func(storage.Row) bool) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Scan(ctx, start, end, f, limit, fn)
}

func (s *severable) Mutate(ctx context.Context, row []byte, ms ...storage.Mutation) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Mutate(ctx, row, ms...)
}

func (s *severable) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, t, f []storage.Mutation) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	return s.Store.CheckAndMutate(ctx, row, p, t, f)
}

func (s *severable) Increment(ctx context.Context, row []byte, family, qualifier string, delta int64) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	return s.Store.Increment(ctx, row, family, qualifier, delta)
}

// SharedRows forwards the wrapped store's layout, which every process
// must see alike.
func (s *severable) SharedRows() bool {
	sr, ok := s.Store.(storage.SharedRows)
	return ok && sr.SharedRows()
}

// TestDeadWorkerLeavesStatus: a partitioned worker that dies without a
// clean stop — killed (its store connection gone, its context cancelled,
// its membership lapsed), or still running but no longer a member — drops
// out of Status's partitions, also when no live worker is left to drop
// its published entry. (A dead worker's entry used to stay until a live
// worker dropped it, so the last one to die was listed forever.) A live
// worker stays listed.
func TestDeadWorkerLeavesStatus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		killed  bool
	}{
		{"killed, alone", 1, true},
		{"killed, beside a live worker", 2, true},
		{"membership lapsed, alone", 1, false},
		{"membership lapsed, beside a live worker", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conns := make([]*severable, tc.workers)
			c := newClusterWrapped(t, memory.New(), tc.workers, func(i int, st storage.Store) storage.Store {
				conns[i] = &severable{Store: st}
				return conns[i]
			})
			c.background(20)
			opts := WorkerOptions{Scanners: 1, MaxIdle: 5 * time.Millisecond, Resample: 50 * time.Millisecond}
			var runs []*running
			for i := range tc.workers {
				opts.Membership = c.members[i]
				runs = append(runs, c.start(i, opts))
			}
			listed := func() map[string]bool {
				st, err := c.client.f.Status(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				owners := map[string]bool{}
				for _, p := range st.Partitions {
					owners[p.Owner] = true
				}
				return owners
			}
			waitFor(t, "every worker is listed", func() bool { return len(listed()) == tc.workers })

			if tc.killed {
				conns[0].sever()
			}
			c.members[0].Remove("w0")
			if tc.killed {
				runs[0].cancel()
				<-runs[0].done
			}
			waitFor(t, "the dead worker leaves status", func() bool {
				l := listed()
				return !l["w0"] && len(l) == tc.workers-1
			})
			for _, r := range runs {
				r.cancel()
				<-r.done
			}
		})
	}
}
