package txn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// TestEnsureFormat: a new store gets today's version recorded; one made
// before stores recorded their format (cells, no record) is version 1,
// refused until Upgrade records today's; a store of a newer version is
// refused, naming both versions, and left as it is; a corrupt record is
// an error.
func TestEnsureFormat(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	if v, recorded, err := ReadFormat(ctx, st); err != nil || recorded || v != 1 {
		t.Fatalf("a store without a record: version %d, recorded %v, %v; want 1, false", v, recorded, err)
	}
	for range 2 { // recording is idempotent
		if v, err := EnsureFormat(ctx, st); err != nil || v != FormatVersion {
			t.Fatalf("EnsureFormat: %d, %v", v, err)
		}
	}
	if v, recorded, err := ReadFormat(ctx, st); err != nil || !recorded || v != FormatVersion {
		t.Fatalf("after EnsureFormat: version %d, recorded %v, %v", v, recorded, err)
	}

	old := memory.New()
	if err := old.Mutate(ctx, []byte("r"), storage.SetCell(FamilyData, "c", 5, []byte("v"))); err != nil {
		t.Fatal(err)
	}
	_, err := EnsureFormat(ctx, old)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Found != 1 || !strings.Contains(err.Error(), "percolator upgrade") {
		t.Fatalf("a store from before formats were recorded: %v; want format 1, to upgrade", err)
	}
	if _, recorded, _ := ReadFormat(ctx, old); recorded {
		t.Fatal("a refused store got a record")
	}
	for range 2 {
		if from, err := Upgrade(ctx, old); err != nil || (from != 1 && from != FormatVersion) {
			t.Fatalf("Upgrade: from %d, %v", from, err)
		}
	}
	if v, err := EnsureFormat(ctx, old); err != nil || v != FormatVersion {
		t.Fatalf("after Upgrade: %d, %v", v, err)
	}

	newer := memory.New()
	if err := RecordFormat(ctx, newer, 7); err != nil {
		t.Fatal(err)
	}
	if err := RecordFormat(ctx, newer, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("RecordFormat 0: %v", err)
	}
	if _, err := Upgrade(ctx, newer); !errors.As(err, &fe) || fe.Found != 7 {
		t.Fatalf("Upgrade of a newer store: %v", err)
	}
	_, err = EnsureFormat(ctx, newer)
	if !errors.Is(err, ErrFormat) || !errors.As(err, &fe) || fe.Found != 7 || fe.Build != FormatVersion {
		t.Fatalf("a newer store: %v; want a FormatError of 7 and %d", err, FormatVersion)
	}
	if !strings.Contains(err.Error(), "format 7") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("message %q does not name the versions or say nothing changed", err)
	}
	if v, _, _ := ReadFormat(ctx, newer); v != 7 {
		t.Fatalf("the newer store's record became %d", v)
	}

	corrupt := memory.New()
	if err := corrupt.Mutate(ctx, formatRow, storage.SetCell(familyFormat, formatQual, 1, []byte("x"))); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureFormat(ctx, corrupt); err == nil || errors.Is(err, ErrFormat) {
		t.Fatalf("a corrupt record: %v; want a corrupt-record error", err)
	}
}

// TestUnknownRecordFormat: a reader that meets a lock of a newer record
// version, or with an operation it does not know, fails with ErrFormat
// and never rolls the lock back; a write record of either kind fails the
// read the same way.
func TestUnknownRecordFormat(t *testing.T) {
	locks := map[string][]byte{
		"newer version": {asyncLockVersion + 1, byte(OpPut), 0},
		"unknown op":    encodeLock(&Lock{Op: OpRollback + 5, PrimaryRow: []byte("r"), PrimaryCol: "v", Owner: "future"}),
		"next op":       encodeLock(&Lock{Op: OpLock + 1, PrimaryRow: []byte("r"), PrimaryCol: "v", Owner: "future"}),
	}
	for _, backend := range []string{"indexed", "shared"} {
		for name, raw := range locks {
			t.Run(backend+"/"+name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				e := newEnvBackend(t, backend)
				for range 10 { // timestamps past the lock's
					if _, err := e.client("reader").Begin(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if err := e.store.Mutate(ctx, []byte("r"), storage.SetCell(FamilyLock, "v", 5, raw)); err != nil {
					t.Fatal(err)
				}
				e.clock.Advance(time.Hour) // far past any TTL
				tx, err := e.client("reader").Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Get(ctx, "r", "v"); !errors.Is(err, ErrFormat) {
					t.Fatalf("Get over the lock: %v; want ErrFormat", err)
				}
				r, err := e.store.ReadRow(ctx, []byte("r"), storage.Filter{{Family: FamilyLock, AllQualifiers: true}, {Family: FamilyWrite, AllQualifiers: true}})
				if err != nil || len(r.Cells) != 1 || r.Cells[0].Family != FamilyLock {
					t.Fatalf("after the read: %v, %v; want the lock untouched and no rollback record", r.Cells, err)
				}
			})
		}
	}
	for name, raw := range map[string][]byte{
		"newer version": {recordVersion + 1, byte(OpPut), 0, 5},
		"unknown op":    encodeWrite(&Write{Op: OpRollback + 5, StartTS: 5}),
		"next op":       encodeWrite(&Write{Op: OpLock + 1, StartTS: 5}),
	} {
		if _, err := DecodeWrite(raw); !errors.Is(err, ErrFormat) {
			t.Errorf("write record of a %s: %v; want ErrFormat", name, err)
		}
	}
}
