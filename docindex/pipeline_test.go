package docindex

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
)

func openIndex(t *testing.T, dir string) *percolator.DB {
	t.Helper()
	db, err := percolator.Open(context.Background(), percolator.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := Register(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

func drain(t *testing.T, db *percolator.DB, scanners int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := db.RunWorkers(ctx, percolator.WorkerOptions{Scanners: scanners, Drain: true, MaxIdle: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
}

func checkEqualsBatch(t *testing.T, db *percolator.DB, files map[string][]byte, when string) {
	t.Helper()
	got, err := Export(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	want := Build(files)
	if err := got.Equal(want); err != nil {
		t.Fatalf("%s: incremental index differs from a batch build: %v", when, err)
	}
	counts, err := CountIndex(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if counts != want.Counts() {
		t.Fatalf("%s: counts %+v, want %+v", when, counts, want.Counts())
	}
}

// TestIncrementalEqualsBatch: after random loads, edits and deletes, with
// workers running concurrently, the index equals a from-scratch build.
func TestIncrementalEqualsBatch(t *testing.T) {
	corpus, err := ReadCorpus("../testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PERCOLATOR_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (replay with PERCOLATOR_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	var paths []string
	for p := range corpus {
		paths = append(paths, p)
	}
	db := openIndex(t, t.TempDir())
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // workers run while the corpus changes under them
		defer wg.Done()
		_, _ = db.RunWorkers(ctx, percolator.WorkerOptions{Scanners: 2, MaxIdle: 5 * time.Millisecond})
	}()
	files := map[string][]byte{}
	for round := range 10 {
		for range 1 + rng.IntN(12) {
			p := paths[rng.IntN(len(paths))]
			switch rng.IntN(4) {
			case 0: // delete
				delete(files, p)
			case 1: // edit: a new word, a duplicate of another file, or back to the original
				files[p] = append(append([]byte{}, corpus[p]...), fmt.Sprintf(" edited%d ", rng.IntN(3))...)
			case 2:
				files[p] = corpus[paths[rng.IntN(len(paths))]]
			default:
				files[p] = corpus[p]
			}
		}
		snapshot := map[string][]byte{}
		for p, c := range files {
			snapshot[p] = c
		}
		if _, err := Sync(context.Background(), db, MemFiles(snapshot), nil, SyncOptions{Load: percolator.LoadOptions{Concurrency: 4}, AllowDeletes: true}); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(2) == 0 { // fold while the workers run, two folds at once
			var folds sync.WaitGroup
			for range 2 {
				folds.Go(func() {
					if _, err := CountIndex(context.Background(), db); err != nil {
						t.Error(err)
					}
				})
			}
			folds.Wait()
		}
		if round%2 == 1 {
			cancel()
			wg.Wait()
			drain(t, db, 3)
			checkEqualsBatch(t, db, snapshot, fmt.Sprintf("round %d", round))
			ctx, cancel = context.WithCancel(context.Background())
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = db.RunWorkers(ctx, percolator.WorkerOptions{Scanners: 2, MaxIdle: 5 * time.Millisecond})
			}()
		}
	}
	cancel()
	wg.Wait()
}

// TestRerunReprocessesOnlyChanges: a second sync after editing one file
// runs observers only for it (and what it touches).
func TestRerunReprocessesOnlyChanges(t *testing.T) {
	corpus, err := ReadCorpus("../testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	db := openIndex(t, t.TempDir())
	defer db.Close()
	ctx := context.Background()
	if st, err := Sync(ctx, db, MemFiles(corpus), nil, SyncOptions{}); err != nil || st.New != len(corpus) {
		t.Fatalf("first sync: %+v, %v", st, err)
	}
	drain(t, db, 2)
	checkEqualsBatch(t, db, corpus, "first build")
	runs := func() int64 {
		st, err := db.ObserverStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, o := range st.Observers {
			n += o.Counts["runs"]
		}
		return n
	}
	before := runs()
	var one string
	for p := range corpus {
		one = p
		break
	}
	corpus[one] = append(append([]byte{}, corpus[one]...), " zzzuniqueword "...)
	st, err := Sync(ctx, db, MemFiles(corpus), nil, SyncOptions{})
	if err != nil || st.Changed != 1 || st.Unchanged != len(corpus)-1 {
		t.Fatalf("second sync: %+v, %v", st, err)
	}
	drain(t, db, 2)
	checkEqualsBatch(t, db, corpus, "after one edit")
	if d := runs() - before; d < 3 || d > 6 {
		t.Fatalf("one edited file took %d observer runs, want 3..6 (document, clusters, terms)", d)
	}
	if got, err := Query(ctx, db, "ZZZUNIQUEWORD"); err != nil || len(got) != 1 || got[0] != one {
		t.Fatalf("query = %v, %v; want [%s]", got, err, one)
	}
}
