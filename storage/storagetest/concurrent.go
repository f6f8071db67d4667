package storagetest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

// testConcurrentCAS races compare-and-set increments on one row. Each
// attempt reads the current version and replaces it, conditioned on that
// exact version still being there. Lost updates or two winners from one
// version mean CheckAndMutate is not atomic.
func testConcurrentCAS(t *testing.T, s storage.Store) {
	const workers, attempts = 32, 200
	put(t, s, "ctr", set("a", "v", 1, counter(0)))
	var (
		mu   sync.Mutex
		won  = map[uint64]int{} // version -> winners
		wins int64
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range attempts {
				ts, ok, err := casOnce(s)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					won[ts]++
					wins++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for ts, n := range won {
		if n > 1 {
			t.Errorf("%d CheckAndMutate calls succeeded on version %d", n, ts)
		}
	}
	got := read(t, s, "ctr", storage.Filter{fam("a")})
	if wins == 0 || !cellsEqual(got, versions("a", "v", counter(wins), uint64(wins)+1)) {
		t.Fatalf("after %d successful CAS: %s", wins, fmtCells(got))
	}
}

// casOnce reads the counter and tries to replace version ts by ts+1.
func casOnce(s storage.Store) (uint64, bool, error) {
	r, err := s.ReadRow(ctx, []byte("ctr"), storage.Filter{{Family: "a", Qualifier: "v", Limit: 1}})
	if err != nil || len(r.Cells) != 1 || len(r.Cells[0].Value) != 8 {
		return 0, false, fmt.Errorf("reading the counter: %s, %v", fmtCells(r.Cells), err)
	}
	ts, v := r.Cells[0].TS, int64(binary.BigEndian.Uint64(r.Cells[0].Value))
	ok, err := s.CheckAndMutate(ctx, []byte("ctr"), storage.Filter{col("a", "v", storage.At(ts))},
		[]storage.Mutation{storage.DeleteCell("a", "v", ts), set("a", "v", ts+1, counter(v+1))}, nil)
	return ts, ok, err
}

// testConcurrentRows runs writers on disjoint rows against readers and a
// scanner. Each write sets the same value in three families at once:
// a reader seeing different values saw half a write.
func testConcurrentRows(t *testing.T, s storage.Store) {
	const writers, rowsPerWriter, writes, readers = 8, 4, 60, 4
	var done atomic.Bool
	var wg, rg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range writes {
				row := []byte(fmt.Sprintf("w%d-%d", w, i%rowsPerWriter))
				if err := writeAndCheck(s, row, int64(i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for r := range readers {
		rg.Add(1)
		go func() {
			defer rg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			last := map[string]int64{}
			for !done.Load() {
				row := fmt.Sprintf("w%d-%d", rng.IntN(writers), rng.IntN(rowsPerWriter))
				if err := readAndCheck(s, row, last); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	rg.Add(1)
	go func() {
		defer rg.Done()
		for !done.Load() {
			if err := scanAndCheck(s); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	done.Store(true)
	rg.Wait()
}

var threeFamilies = storage.Filter{fam("a"), fam("b"), fam("notify")}

func writeAndCheck(s storage.Store, row []byte, i int64) error {
	v := counter(i)
	if err := s.Mutate(ctx, row, set("a", "v", 0, v), set("b", "v", 0, v), set("notify", "v", 0, v)); err != nil {
		return err
	}
	r, err := s.ReadRow(ctx, row, threeFamilies)
	if err != nil {
		return err
	}
	if len(r.Cells) != 3 || string(r.Cells[0].Value) != v {
		return fmt.Errorf("row %q: wrote %d, read back %s", row, i, fmtCells(r.Cells))
	}
	return nil
}

// sameValue reports the value all cells share.
func sameValue(cells []storage.Cell) (int64, error) {
	if len(cells) != 3 {
		return 0, fmt.Errorf("%d cells, want 3: %s", len(cells), fmtCells(cells))
	}
	for _, c := range cells[1:] {
		if !bytes.Equal(c.Value, cells[0].Value) {
			return 0, fmt.Errorf("torn row: %s", fmtCells(cells))
		}
	}
	return int64(binary.BigEndian.Uint64(cells[0].Value)), nil
}

func readAndCheck(s storage.Store, row string, last map[string]int64) error {
	r, err := s.ReadRow(ctx, []byte(row), threeFamilies)
	if err != nil || len(r.Cells) == 0 {
		return err
	}
	v, err := sameValue(r.Cells)
	if err != nil {
		return fmt.Errorf("row %q: %w", row, err)
	}
	if prev, ok := last[row]; ok && v < prev {
		return fmt.Errorf("row %q went back from %d to %d", row, prev, v)
	}
	last[row] = v
	return nil
}

func scanAndCheck(s storage.Store) error {
	var bad error
	err := s.Scan(ctx, []byte("w"), []byte("x"), threeFamilies, 0, func(r storage.Row) bool {
		if _, err := sameValue(r.Cells); err != nil {
			bad = fmt.Errorf("scan of row %q: %w", r.Key, err)
			return false
		}
		return true
	})
	return errors.Join(err, bad)
}

// testCloseRacing closes the store under load: every call must succeed or
// return ErrClosed, and none may crash.
func testCloseRacing(t *testing.T, s storage.Store) {
	const workers = 8
	started := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := []byte(fmt.Sprintf("r%d", w))
			signalled := false
			defer func() {
				if !signalled {
					started <- struct{}{}
				}
			}()
			for i := 0; ; i++ {
				if i == 10 {
					started <- struct{}{}
					signalled = true
				}
				_, rerr := s.ReadRow(ctx, row, storage.Filter{fam("a")})
				errs := []error{
					s.Mutate(ctx, row, set("a", "q", uint64(i), "v")),
					s.Scan(ctx, nil, nil, storage.Filter{fam("a")}, 3, func(storage.Row) bool { return true }),
					rerr,
				}
				if !closedOrNil(t, errs) {
					return
				}
			}
		}()
	}
	for range workers {
		<-started
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close under load: %v", err)
	}
	wg.Wait()
}

// closedOrNil reports whether every error is nil, failing the test for any
// error other than ErrClosed.
func closedOrNil(t *testing.T, errs []error) bool {
	ok := true
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, storage.ErrClosed):
			ok = false
		default:
			t.Errorf("call racing Close: %v", err)
			ok = false
		}
	}
	return ok
}
