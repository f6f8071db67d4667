package percolator_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/graph"
	"github.com/seed-992972ee/percolator/internal/userstore"
	"github.com/seed-992972ee/percolator/lock"
	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/queue"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/txn"
)

// libraryFamilies are the families each package declares for its own
// cells.
var libraryFamilies = []string{
	txn.FamilyData, txn.FamilyLock, txn.FamilyWrite, txn.FamilyNotify, txn.FamilyBeat,
	oracle.FamilyOracle,
	observer.FamilyObservers, observer.FamilyBackfill, observer.FamilyQuarantine, observer.FamilyStats, observer.FamilyPartitions,
	lock.Family, queue.Family, graph.Family,
}

// TestUserStoreRefusesLibraryCells: DB.Store() refuses, with
// ErrInvalidArgument and storage.ErrReserved and changing nothing, every
// write of a family the library keeps its cells in, a DeleteRow, any call
// naming a reserved row, and Close; it passes reads of those families and
// writes of the user's own; a scan stops short of the reserved rows; and
// the lock, queue and graph packages built on it still write their own.
func TestUserStoreRefusesLibraryCells(t *testing.T) {
	ctx := context.Background()
	db, err := percolator.Open(ctx, percolator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := db.Store()
	for _, f := range libraryFamilies {
		if !userstore.LibraryFamily(f) {
			t.Errorf("family %q of a library package is not in userstore.LibraryFamily", f)
		}
	}
	if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("r", "c", []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	snapshot := func() string {
		var b strings.Builder
		for _, f := range append(libraryFamilies, "mine") {
			_ = userstore.Raw(st).Scan(ctx, nil, nil, storage.Filter{{Family: f, AllQualifiers: true}}, 0, func(r storage.Row) bool {
				if f == oracle.FamilyOracle {
					return true // its lease is renewed in the background
				}
				b.WriteString(f + " " + storage.QuoteRow(r.Key) + "\n")
				return true
			})
		}
		return b.String()
	}
	before := snapshot()
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, percolator.ErrInvalidArgument) || !errors.Is(err, storage.ErrReserved) {
			t.Errorf("%s: %v, want ErrInvalidArgument and storage.ErrReserved", what, err)
		}
	}
	for _, f := range libraryFamilies {
		refused("Mutate "+f, st.Mutate(ctx, []byte("r"), storage.SetCell(f, "c", 1, nil)))
		refused("DeleteCells "+f, st.Mutate(ctx, []byte("r"), storage.Mutation{Kind: storage.DeleteCells, Family: f, Qualifier: "c"}))
		_, err := st.CheckAndMutate(ctx, []byte("r"), nil, nil, []storage.Mutation{storage.SetCell(f, "c", 1, nil)})
		refused("CheckAndMutate "+f, err)
		_, err = st.Increment(ctx, []byte("r"), f, "n", 1)
		refused("Increment "+f, err)
		_, err = st.(storage.Batcher).MutateRows(ctx, []storage.RowMutation{
			{Row: []byte("mine"), Mutations: []storage.Mutation{storage.SetCell("mine", "c", 1, nil)}},
			{Row: []byte("r"), Mutations: []storage.Mutation{storage.SetCell(f, "c", 1, nil)}}})
		refused("MutateRows "+f, err)
	}
	refused("DeleteRow", st.Mutate(ctx, []byte("r"), storage.Mutation{Kind: storage.DeleteRow}))
	for _, row := range [][]byte{oracle.StoreMarkRow(), []byte(storage.ReservedPrefix)} {
		_, err := st.ReadRow(ctx, row, storage.Filter{{Family: oracle.FamilyOracle, AllQualifiers: true}})
		refused("ReadRow of a reserved row", err)
		refused("Mutate of a reserved row", st.Mutate(ctx, row, storage.SetCell("mine", "c", 1, nil)))
		refused("Scan from a reserved row", st.Scan(ctx, row, nil, storage.Filter{{Family: oracle.FamilyOracle, AllQualifiers: true}}, 0, func(storage.Row) bool { return true }))
	}
	refused("Close", st.Close())
	if _, err := db.Begin(ctx); err != nil {
		t.Fatalf("the DB after its Store() was closed: %v", err)
	}
	if after := snapshot(); after != before {
		t.Errorf("refused calls changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set(storage.ReservedPrefix+"x", "c", nil) }); !errors.Is(err, percolator.ErrInvalidArgument) {
		t.Errorf("a transaction writing a reserved row: %v, want ErrInvalidArgument", err)
	}

	// Reads pass; the user's own family is theirs; a scan leaves the
	// reserved rows out.
	if r, err := st.ReadRow(ctx, []byte("r"), storage.Filter{{Family: txn.FamilyWrite, AllQualifiers: true}}); err != nil || len(r.Cells) == 0 {
		t.Errorf("reading the write family through Store(): %v %v", r.Cells, err)
	}
	if err := st.Mutate(ctx, []byte("mine"), storage.SetCell("mine", "c", 1, []byte("x"))); err != nil {
		t.Errorf("a write of the user's own family: %v", err)
	}
	n := 0
	if err := st.Scan(ctx, nil, nil, storage.Filter{{Family: oracle.FamilyOracle, AllQualifiers: true}}, 0, func(storage.Row) bool { n++; return true }); err != nil || n != 0 {
		t.Errorf("a whole-keyspace scan of the oracle's family through Store(): %d rows, %v", n, err)
	}

	// The packages built on Store() keep their cells in their families.
	lk, err := lock.New(st, lock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := lk.Acquire(ctx, "x", time.Minute)
	if err != nil {
		t.Fatalf("lock on Store(): %v", err)
	}
	if err := lk.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(st, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push(ctx, "jobs", []byte("a")); err != nil {
		t.Fatalf("queue on Store(): %v", err)
	}
	g := graph.New(st, graph.Options{DB: db})
	if err := g.CreateLabel(ctx, graph.Label{Name: "knows", Consistency: graph.Strong}); err != nil {
		t.Fatalf("graph on Store(): %v", err)
	}
}

// TestOpenStoreWrittenBefore opens a store written before the reserved
// namespace existed (testdata/store-v1.tar.gz: `percolator index` of the
// corpus, a `bank` run, lock "mylock" granted twice and held with token 2,
// queue "jobs" holding alpha, beta, gamma, and graph labels "depends"
// (strong) and "weakdeps" (weak) with abiword's 5 dependencies). The
// oracle's mark moves into the reserved row once, and timestamps resume
// above everything the store holds; the data, the observers'
// registrations, the lock's fencing tokens, the queue and the graph are
// all as they were.
func TestOpenStoreWrittenBefore(t *testing.T) {
	ctx := context.Background()
	dir := untar(t, "testdata/store-v1.tar.gz")
	raw, err := pebble.Open(filepath.Join(dir, "db", "store"), pebble.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	newest, err := txn.NewestTimestamp(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := raw.ReadRow(ctx, []byte("mark"), storage.Filter{{Family: oracle.FamilyOracle, AllQualifiers: true}})
	if err != nil || len(legacy.Cells) != 1 {
		t.Fatalf("the fixture's mark at row \"mark\": %v %v", legacy.Cells, err)
	}
	legacyMark, err := oracle.DescribeLease(legacy.Cells[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if v, recorded, err := txn.ReadFormat(ctx, raw); err != nil || recorded || v != 1 {
		t.Fatalf("the fixture's format: %d (recorded %v), %v; want 1, unrecorded", v, recorded, err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	// Format 1: refused until upgraded, and not changed by the refusal.
	_, err = percolator.Open(ctx, percolator.Options{Dir: filepath.Join(dir, "db")})
	var fe *txn.FormatError
	if !errors.Is(err, percolator.ErrFormat) || !errors.As(err, &fe) || fe.Found != 1 || !strings.Contains(err.Error(), "percolator upgrade") {
		t.Fatalf("Open of a store from before formats were recorded: %v; want format 1, to upgrade", err)
	}
	if from, err := percolator.Upgrade(ctx, percolator.Options{Dir: filepath.Join(dir, "db")}); err != nil || from != 1 {
		t.Fatalf("Upgrade: from %d, %v", from, err)
	}
	db, err := percolator.Open(ctx, percolator.Options{Dir: filepath.Join(dir, "db")})
	if err != nil {
		t.Fatal(err)
	}
	if v := db.FormatVersion(); v != percolator.FormatVersion {
		t.Fatalf("opened as format %d after the upgrade", v)
	}
	tx, err := db.BeginReadOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tx.StartTS() <= newest || tx.StartTS() < legacyMark.Mark {
		t.Fatalf("start_ts %d after the move: not above the store's newest timestamp %d and its old mark %d", tx.StartTS(), newest, legacyMark.Mark)
	}
	kvs, err := tx.Scan(ctx, "acct/", "acct0", "bal", 0)
	if err != nil || len(kvs) != 20 {
		t.Fatalf("the bank's accounts: %d, %v", len(kvs), err)
	}
	_ = tx.Rollback(ctx)
	status, err := db.ObserverStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range status.Observers {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"cluster", "document", "terms"}) {
		t.Errorf("registered observers: %v", names)
	}

	lk, err := lock.New(db.Store(), lock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	held, err := lk.Lease("mylock", 2, 2444661428471233625, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Release(ctx, held); err != nil {
		t.Fatalf("releasing the fixture's lease (token 2): %v", err)
	}
	l, err := lk.Acquire(ctx, "mylock", time.Minute)
	if err != nil || l.Token != 3 {
		t.Fatalf("the next grant of mylock: %+v %v, want token 3", l, err)
	}

	q, err := queue.New(db.Store(), queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"alpha", "beta", "gamma"} {
		d, err := q.TryPop(ctx, "jobs", time.Minute)
		if err != nil || d == nil || string(d.Body) != want {
			t.Fatalf("popping %q: %+v %v", want, d, err)
		}
		if err := q.Ack(ctx, d); err != nil {
			t.Fatal(err)
		}
	}

	g := graph.New(db.Store(), graph.Options{DB: db})
	for _, label := range []string{"depends", "weakdeps"} {
		es, err := g.Neighbors(ctx, graph.Query{Label: label, Vertex: "abiword", Dir: graph.Out})
		if err != nil || len(es) != 5 {
			t.Errorf("label %s: abiword's edges %d, %v", label, len(es), err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	raw, err = pebble.Open(filepath.Join(dir, "db", "store"), pebble.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	legacy, err = raw.ReadRow(ctx, []byte("mark"), storage.Filter{{Family: oracle.FamilyOracle, AllQualifiers: true}})
	if err != nil || len(legacy.Cells) != 0 {
		t.Errorf("row \"mark\" after the move: %v %v, want no cell", legacy.Cells, err)
	}
	moved, err := raw.ReadRow(ctx, oracle.StoreMarkRow(), storage.Filter{{Family: oracle.FamilyOracle, AllQualifiers: true}})
	if err != nil || len(moved.Cells) != 1 {
		t.Fatalf("the reserved mark row: %v %v", moved.Cells, err)
	}
	if m, err := oracle.DescribeLease(moved.Cells[0].Value); err != nil || m.Mark < legacyMark.Mark || m.Owner != "" {
		t.Errorf("the moved mark: %+v %v (was %+v)", m, err, legacyMark)
	}
}

// untar unpacks a .tar.gz into a temporary directory.
func untar(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.Clean(h.Name))
		if !strings.HasPrefix(target, dir+string(filepath.Separator)) {
			t.Fatalf("tar entry %q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			var out *os.File
			if out, err = os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644); err == nil {
				_, err = io.Copy(out, tr)
				err = errors.Join(err, out.Close())
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
