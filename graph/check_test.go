package graph

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// TestCheckWhileMutating: mutations of another process that run between
// Check's reads of the snapshots and of the index edges and degrees (an
// update moving an edge's index rows, a new edge, a delete) are no
// mismatch: the graph is consistent before and after each.
func TestCheckWhileMutating(t *testing.T) {
	for _, when := range []string{"s/", "i/", "d/"} {
		t.Run("after scanning "+when, func(t *testing.T) {
			mem := memory.New()
			defer mem.Close()
			fs := newFaultStore(mem, 1)
			g := New(fs, Options{})
			if err := g.CreateLabel(ctx, rates); err != nil {
				t.Fatal(err)
			}
			other := New(mem, Options{})
			mustMutate(t, other, Mutation{Op: Insert, Label: "rates", Src: "a", Tgt: "b", TS: 1, Props: rating(1)})
			mustMutate(t, other, Mutation{Op: Insert, Label: "rates", Src: "a", Tgt: "c", TS: 1, Props: rating(1)})
			var once sync.Once
			fs.afterScan = func(_ context.Context, start []byte) {
				if !bytes.HasPrefix(start, []byte(rowPrefix+when)) {
					return
				}
				once.Do(func() {
					mustMutate(t, other, Mutation{Op: Update, Label: "rates", Src: "a", Tgt: "b", TS: 2, Props: rating(3)})
					mustMutate(t, other, Mutation{Op: Insert, Label: "rates", Src: "a", Tgt: "d", TS: 2, Props: rating(2)})
					mustMutate(t, other, Mutation{Op: Delete, Label: "rates", Src: "a", Tgt: "c", TS: 2})
				})
			}
			rep, err := g.Check(ctx, "rates")
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Mismatches) > 0 {
				t.Fatalf("a consistent graph, changed during the check: %d mismatches\n%s", len(rep.Mismatches), fmt.Sprint(rep.Mismatches))
			}
			checkClean(t, g, "rates")
			// A real mismatch is still found while another edge moves.
			gone := indexRow("rates", &rates.Indexes[0], Out, "a", "d", rating(2))
			if err := mem.Mutate(ctx, gone, storage.Mutation{Kind: storage.DeleteRow}); err != nil {
				t.Fatal(err)
			}
			once = sync.Once{}
			fs.afterScan = func(_ context.Context, start []byte) {
				if bytes.HasPrefix(start, []byte(rowPrefix+when)) {
					once.Do(func() {
						mustMutate(t, other, Mutation{Op: Update, Label: "rates", Src: "a", Tgt: "b", TS: 3, Props: rating(4)})
					})
				}
			}
			rep, err = g.Check(ctx, "rates")
			if err != nil || len(rep.Mismatches) != 1 || !strings.Contains(rep.Mismatches[0], "a -rates-> d is missing") {
				t.Fatalf("a deleted index row, another edge moving: %v %v", rep.Mismatches, err)
			}
		})
	}
}

// TestCheckUnderLoad: Check, run again and again while other goroutines
// mutate a few edges, never reports a mismatch.
func TestCheckUnderLoad(t *testing.T) {
	g, _ := newGraph(t, Options{MaxBackOff: time.Millisecond})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ts atomic.Int64
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m := Mutation{Op: Update, Label: "rates", Src: "u", Tgt: fmt.Sprint("p", (i+w)%3), TS: ts.Add(1), Props: rating(float64(i % 4))}
				if i%5 == 4 {
					m.Op, m.Props = Delete, nil
				}
				if _, err := g.Mutate(ctx, m); err != nil && !errors.Is(err, ErrLocked) {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 30 {
		rep, err := g.Check(ctx, "rates")
		if err != nil || len(rep.Mismatches) > 0 {
			t.Errorf("check under load: %v %v", rep.Mismatches, err)
			break
		}
	}
	close(stop)
	wg.Wait()
	checkClean(t, g, "rates")
}
