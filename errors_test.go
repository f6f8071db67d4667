package percolator_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/txn"
)

// TestAPIErrors: every error of the root API says "percolator: ..." (not
// an internal package's name), matches its root sentinel with errors.Is,
// and still unwraps to the internal error; a conflict is found with
// errors.As as a *percolator.ConflictError.
func TestAPIErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := open(t, percolator.Options{Dir: dir})
	set(t, db, "r", "1")
	a, _ := db.Begin(ctx)
	b, _ := db.Begin(ctx)
	_ = a.Set("r", "v", []byte("a"))
	_ = b.Set("r", "v", []byte("b"))
	_ = a.Commit(ctx)
	conflict := b.Commit(ctx)
	ro, _ := db.BeginReadOnly(ctx)
	_, notFound := ro.Get(ctx, "absent", "v")
	readOnly := ro.Set("r", "v", nil)
	_, secondOpen := percolator.Open(ctx, percolator.Options{Dir: dir})
	mem := memory.New()
	defer mem.Close()
	first := open(t, percolator.Options{Store: mem})
	_, secondDB := percolator.Open(ctx, percolator.Options{Store: mem})
	_ = first
	cases := []struct {
		name string
		err  error
		is   error
	}{
		{"conflict", conflict, percolator.ErrConflict},
		{"not found", notFound, percolator.ErrNotFound},
		{"read-only", readOnly, percolator.ErrReadOnly},
		{"finished", a.Commit(ctx), percolator.ErrTxnFinished},
		{"empty row", func() error { w, _ := db.Begin(ctx); return w.Set("", "v", nil) }(), percolator.ErrInvalidArgument},
		{"value too large", func() error { w, _ := db.Begin(ctx); return w.Set("r", "v", make([]byte, 11<<20)) }(), percolator.ErrInvalidArgument},
		{"reserved column", func() error { _, err := ro.Get(ctx, "r", "__x"); return err }(), percolator.ErrInvalidArgument},
		{"directory open in this process", secondOpen, percolator.ErrInUse},
		{"second DB on a store", secondDB, percolator.ErrInUse},
		{"bad options", func() error { _, err := percolator.Open(ctx, percolator.Options{LockTTL: -1}); return err }(), percolator.ErrInvalidArgument},
	}
	for _, c := range cases {
		switch {
		case c.err == nil:
			t.Errorf("%s: no error", c.name)
		case !errors.Is(c.err, c.is):
			t.Errorf("%s: %v does not match %v", c.name, c.err, c.is)
		case !strings.HasPrefix(c.err.Error(), "percolator: ") || strings.Contains(c.err.Error(), "txn:"):
			t.Errorf("%s: message %q: want it to say percolator, not an internal package", c.name, c.err)
		}
		t.Logf("%s: %v", c.name, c.err)
	}
	if !errors.Is(conflict, txn.ErrConflict) {
		t.Errorf("conflict does not unwrap to the internal error: %v", conflict)
	}
	var ce *percolator.ConflictError
	if !errors.As(conflict, &ce) || string(ce.Row) != "r" || ce.Column != "v" || ce.Reason == "" {
		t.Errorf("errors.As(conflict) = %+v", ce)
	}
	if errors.Is(notFound, percolator.ErrConflict) || errors.Is(conflict, percolator.ErrInvalidArgument) {
		t.Error("an error matches a sentinel of another kind")
	}
	_ = db.Close()
	if _, err := db.Begin(ctx); !errors.Is(err, percolator.ErrClosed) {
		t.Errorf("Begin on a closed DB: %v, want ErrClosed", err)
	}
}

// TestMustExist: Options.MustExist refuses a directory without a store,
// creating nothing, and opens one that has a store.
func TestMustExist(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir() + "/absent"
	_, err := percolator.Open(ctx, percolator.Options{Dir: dir, MustExist: true})
	if !errors.Is(err, percolator.ErrNoStore) || !strings.HasPrefix(err.Error(), "percolator: no store at ") {
		t.Fatalf("MustExist on a missing directory: %v, want ErrNoStore", err)
	}
	if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("MustExist created %s (%v)", dir, serr)
	}
	db := open(t, percolator.Options{Dir: dir})
	set(t, db, "r", "v")
	_ = db.Close()
	db = open(t, percolator.Options{Dir: dir, MustExist: true})
	if got := get(t, db, "r"); got != "v" {
		t.Fatalf("reopened with MustExist: %q", got)
	}
}
