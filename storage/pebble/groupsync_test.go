package pebble

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/seed-992972ee/percolator/storage"
)

// TestGroupSyncWaitsOnlyForMany: the log waits between syncs only while
// the syncs carry many commits on average; a lone writer's never waits,
// nor any with the delay off.
func TestGroupSyncWaitsOnlyForMany(t *testing.T) {
	g := groupSync{delay: 100 * time.Microsecond}
	for range 50 {
		g.committed()
		if d := g.interval(); d != 0 {
			t.Fatalf("a lone writer's sync waits %v", d)
		}
	}
	waited := 0
	for i := range 50 {
		// The writers' phases: a sync carries most of them, the next
		// only the first back.
		n := 63
		if i%2 == 1 {
			n = 1
		}
		for range n {
			g.committed()
		}
		if g.interval() > 0 {
			waited++
		}
	}
	if waited < 45 {
		t.Errorf("64 writers: %d of 50 syncs waited, want nearly all (a sync carrying one is a phase, not a lone writer)", waited)
	}
	for range 30 {
		g.committed()
		g.interval()
	}
	if d := g.interval(); d != 0 {
		t.Errorf("back to one writer: the sync waits %v", d)
	}
	off := groupSync{}
	for range 64 {
		off.committed()
	}
	if d := off.interval(); d != 0 {
		t.Errorf("delay off: waits %v", d)
	}
}

// TestGroupSyncPowerCut: with many writers committing durably at once,
// their syncs waiting for each other, every write acknowledged before a
// power cut is there after it.
func TestGroupSyncPowerCut(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s, err := Open("/db", Options{FS: mem, SyncDelay: time.Millisecond})
	must(t, err)
	var (
		mu    sync.Mutex
		acked [][]byte
		wg    sync.WaitGroup
		stop  = make(chan struct{})
	)
	for w := range 32 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				row := fmt.Appendf(nil, "w%02d/%06d", w, i)
				if err := s.Mutate(t.Context(), row, storage.SetCell("f", "q", 1, row)); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, row)
				mu.Unlock()
			}
		})
	}
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 2000 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	before := slices.Clone(acked)
	mu.Unlock()
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	close(stop)
	wg.Wait()
	must(t, s.Close())
	s, err = Open("/db", Options{FS: crashed})
	must(t, err)
	defer s.Close()
	for _, row := range before {
		r, err := s.ReadRow(t.Context(), row, storage.Filter{{Family: "f", Qualifier: "q"}})
		must(t, err)
		if len(r.Cells) != 1 {
			t.Fatalf("%s was acknowledged before the power cut and is gone after it", row)
		}
	}
	t.Logf("%d acknowledged writes survived the power cut", len(before))
}
