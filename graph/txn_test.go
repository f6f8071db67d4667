package graph

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seed-992972ee/percolator/storage/memory"
)

// TestTxnContended: goroutines update, delete and increment a few edges
// of a txn label at once: every mutation commits whole (retried on
// conflict), check passes in one snapshot, and each edge's state is the
// fold of the mutations applied, in version order.
func TestTxnContended(t *testing.T) {
	g := newGraphOf(t, Txn)
	s := seed(t)
	var ts atomic.Int64
	var mu sync.Mutex
	applied := map[string][]Mutation{}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(s, uint64(w)))
			for range 25 {
				m := Mutation{Label: "rates", Src: "u", Tgt: fmt.Sprint("p", rng.IntN(3)), TS: ts.Add(1), Op: Update, Props: rating(float64(rng.IntN(4)))}
				switch rng.IntN(5) {
				case 0:
					m.Op, m.Props = Delete, nil
				case 1:
					m.Op, m.Props = Increment, Props{"visits": IntValue(1)}
				}
				r, err := g.Mutate(ctx, m)
				if err != nil {
					t.Error(err)
					return
				}
				if !r.Dropped {
					mu.Lock()
					applied[m.Tgt] = append(applied[m.Tgt], m)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	checkClean(t, g, "rates")
	for tgt, ms := range applied {
		var want edgeState
		for _, m := range sortedByTS(ms) {
			want = want.apply(&m)
		}
		got, live, err := g.GetEdge(ctx, "rates", "u", tgt)
		if err != nil {
			t.Fatal(err)
		}
		if live != want.live() || (live && fmt.Sprint(got.Props) != fmt.Sprint(want.props())) {
			t.Errorf("edge %s: %v live %v, the applied mutations fold to %v live %v", tgt, got.Props, live, want.props(), want.live())
		}
	}
}

func sortedByTS(ms []Mutation) []Mutation {
	out := append([]Mutation(nil), ms...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].TS < out[j-1].TS; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// TestTxnNeedsDB: a txn label on a Graph without a DB is refused.
func TestTxnNeedsDB(t *testing.T) {
	mem := memory.New()
	defer mem.Close()
	g := New(mem, Options{})
	l := rates
	l.Consistency = Txn
	if err := g.CreateLabel(ctx, l); err != nil {
		t.Fatal(err)
	}
	_, err := g.Mutate(ctx, Mutation{Op: Insert, Label: "rates", Src: "a", Tgt: "b", TS: 1})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("%v, want ErrInvalidArgument", err)
	}
}
