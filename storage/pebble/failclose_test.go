package pebble

import (
	"errors"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// TestCloseAfterFailure: after a failed sync the store still closes
// (releasing its directory) and reopens in place; the write that met the
// failure has an unknown outcome: the reopened store holds the old value
// or the new one, never anything else.
func TestCloseAfterFailure(t *testing.T) {
	s, _, ffs, done := heldWrite(t)
	ffs.Release(errInjectedSync)
	if err := <-done; !errors.Is(err, storage.ErrFailed) {
		t.Fatalf("write: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		t.Logf("Close after failure: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close after a failed sync hangs")
	}
	s2, err := Open("/db", Options{FS: ffs.FS})
	if err != nil {
		t.Fatalf("reopen in place after failure: %v", err)
	}
	defer s2.Close()
	if got := readValue(t, s2); got != "v1" && got != "v2" {
		t.Fatalf("after an in-place reopen: %q, want v1 or v2", got)
	}
}
