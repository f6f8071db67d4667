package txn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// TestTxnLimits: a write past MaxTxnWrites or MaxTxnBytes fails with
// ErrTxnTooLarge naming the limit and buffers nothing; rewriting a cell
// already written counts once, with its new size; the transaction still
// commits what it held.
func TestTxnLimits(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	c := e.client("w")
	c.opts.MaxTxnWrites, c.opts.MaxTxnBytes = 3, 40
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"a", "b", "c"} {
		if err := tx.Set(r, "v", []byte("1")); err != nil {
			t.Fatal(err)
		}
	}
	err = tx.Set("d", "v", []byte("1"))
	if !errors.Is(err, ErrTxnTooLarge) || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "MaxTxnWrites") {
		t.Fatalf("a 4th write: %v; want ErrTxnTooLarge naming MaxTxnWrites", err)
	}
	if err := tx.Delete("d", "v"); !errors.Is(err, ErrTxnTooLarge) {
		t.Fatalf("a 4th write, a delete: %v", err)
	}
	if err := tx.Set("a", "v", []byte("rewritten")); err != nil { // the same cell: no new write
		t.Fatalf("a rewrite at the limit: %v", err)
	}
	// 3 cells of 2 bytes of key each: 6, plus "rewritten" and two "1".
	err = tx.Set("b", "v", make([]byte, 40))
	if !errors.Is(err, ErrTxnTooLarge) || !strings.Contains(err.Error(), "MaxTxnBytes") {
		t.Fatalf("a write past the bytes: %v; want ErrTxnTooLarge naming MaxTxnBytes", err)
	}
	if got, _ := tx.Get(ctx, "b", "v"); string(got) != "1" {
		t.Fatalf("the refused write changed b to %q", got)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rd, _ := c.Begin(ctx)
	for row, want := range map[string]string{"a": "rewritten", "b": "1", "c": "1"} {
		if v, err := rd.Get(ctx, row, "v"); err != nil || string(v) != want {
			t.Errorf("%s = %q, %v; want %q", row, v, err, want)
		}
	}
	if _, err := rd.Get(ctx, "d", "v"); !errors.Is(err, ErrNotFound) {
		t.Errorf("d: %v; want not found", err)
	}
}

// TestLockTTLGrowsWithSize: a transaction's locks are valid for LockTTL
// plus 6s per √MiB it writes, at most MaxLockTTLGrowth more; the lock
// record carries it.
func TestLockTTLGrowsWithSize(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	c := e.client("w")
	for _, x := range []struct {
		bytes int
		want  time.Duration
	}{
		{0, 10 * time.Second},
		{1 << 20, 16 * time.Second},
		{4 << 20, 22 * time.Second},
		{100 << 20, 10*time.Second + MaxLockTTLGrowth},
	} {
		tx := &Txn{c: c, bytes: x.bytes}
		if got := tx.lockTTL(); got != x.want {
			t.Errorf("%d bytes: lock TTL %v, want %v", x.bytes, got, x.want)
		}
	}
	tx, _ := c.Begin(ctx)
	if err := tx.Set("big", "v", make([]byte, 4<<20)); err != nil {
		t.Fatal(err)
	}
	c.crash = func(point string) bool { return point == crashAfterPrimaryPrewrite }
	_ = tx.Commit(ctx)
	r, err := e.store.ReadRow(ctx, []byte("big"), storage.Filter{{Family: FamilyLock, AllQualifiers: true}})
	if err != nil || len(r.Cells) != 1 {
		t.Fatalf("the lock: %v, %v", r.Cells, err)
	}
	l, err := decodeLock(r.Cells[0].Value)
	if err != nil || l.TTLMS < uint64((22*time.Second).Milliseconds()) {
		t.Fatalf("the 4 MiB transaction's lock TTL: %dms, %v; want 22s", l.TTLMS, err)
	}
}

func TestTxnLimitOptions(t *testing.T) {
	for _, o := range []Options{{Owner: "x", MaxTxnWrites: -1}, {Owner: "x", MaxTxnBytes: -1}} {
		o.EnsureDefaults()
		if err := o.Validate(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	var o Options
	o.EnsureDefaults()
	if o.MaxTxnWrites != DefaultMaxTxnWrites || o.MaxTxnBytes != DefaultMaxTxnBytes {
		t.Errorf("defaults %d, %d", o.MaxTxnWrites, o.MaxTxnBytes)
	}
}
