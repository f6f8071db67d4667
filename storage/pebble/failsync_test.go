package pebble

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble/faultfs"
)

// TestFailedSyncQueuedWriters: durable writers of one row queue on its
// latch behind a write whose WAL sync is held; they passed the close guard
// before the store failed. When the sync fails, every one of them must
// return ErrFailed. (They used to go on into pebble, whose broken log then
// panicked outside Logger.Fatalf once a block filled, killing the process.)
// Runs the scenario in a child process, so a crash fails the test instead
// of ending the run.
func TestFailedSyncQueuedWriters(t *testing.T) {
	if os.Getenv("PEBBLE_TEST_CHILD") == "1" {
		queuedWritersChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFailedSyncQueuedWriters$", "-test.v")
	cmd.Env = append(os.Environ(), "PEBBLE_TEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		lines := bytes.Split(out, []byte("\n"))
		if len(lines) > 25 {
			lines = lines[:25]
		}
		t.Fatalf("child process died (%v) instead of every writer returning ErrFailed:\n%s", err, bytes.Join(lines, []byte("\n")))
	}
}

func queuedWritersChild(t *testing.T) {
	ctx := context.Background()
	ffs := faultfs.New(vfs.NewCrashableMem())
	s, err := Open("/db", Options{FS: ffs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	big := bytes.Repeat([]byte("x"), queuedValueSize)
	ffs.Hold()
	const n = 8
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Mutate(ctx, []byte("r"), storage.SetCell("f", "q", uint64(i+1), big))
		}()
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := ffs.AwaitHeld(wctx, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the others are queued on the row latch, past the guard
	ffs.Release(errors.New("injected fsync failure"))
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, storage.ErrFailed) {
			t.Errorf("writer: %v, want ErrFailed", err)
		}
	}
}

// queuedValueSize is the size of each queued writer's value.
var queuedValueSize = func() int {
	if os.Getenv("PEBBLE_TEST_SMALL") == "1" {
		return 100
	}
	return 100 << 10
}()
