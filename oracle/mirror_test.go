package oracle

import (
	"context"
	"errors"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// TestMirror: the mark's copy only rises, whatever order its writes land
// in (a late write of a lower mark changes nothing), and bad values are
// refused.
func TestMirror(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	defer st.Close()
	if m, err := ReadMirror(ctx, st); err != nil || m != 0 {
		t.Fatalf("no copy: %d %v", m, err)
	}
	for _, w := range []uint64{100, 5000, 300, 5000, 4999} {
		if err := WriteMirror(ctx, st, w); err != nil {
			t.Fatal(err)
		}
		if m, err := ReadMirror(ctx, st); err != nil || m != 5000 && w != 100 {
			t.Fatalf("after writing %d: %d %v", w, m, err)
		}
	}
	if err := WriteMirror(ctx, st, MaxTimestamp+2); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a mark above MaxTimestamp+1: %v", err)
	}
	if err := WriteMirror(ctx, st, MaxTimestamp+1); err != nil {
		t.Fatalf("the largest mark: %v", err)
	}
	if err := st.Mutate(ctx, markRow, storage.SetCell(FamilyOracle, mirrorQual, storage.MaxTimestamp, []byte("bad"))); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMirror(ctx, st); !errors.Is(err, ErrCorruptMark) {
		t.Fatalf("a corrupt copy: %v", err)
	}
}
