package storagetest

import (
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

// SeedEnv names the environment variable that replays a randomized run.
const SeedEnv = "STORAGETEST_SEED"

func seed(t *testing.T) uint64 {
	s := rand.Uint64()
	if env := os.Getenv(SeedEnv); env != "" {
		v, err := strconv.ParseUint(env, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, env, err)
		}
		s = v
	}
	t.Logf("seed %d (replay with %s=%d)", s, SeedEnv, s)
	return s
}

// gen draws operations over a small space, so that they collide.
type gen struct {
	*rand.Rand
	max uint64 // the store's MaxTimestamp
}

var (
	genRows       = []string{"\x00", "a", "a\x00", "a\x00\x00", "ab", "b", "\xff"}
	genFamilies   = []string{"a", "ab", "b"}
	genQualifiers = []string{"", "q", "q\x00", "r"}
	genTimes      = []uint64{0, 1, 2, 3, 5, 8, 0} // the last is the store's MaxTimestamp
)

func (g gen) pick(xs []string) string { return xs[g.IntN(len(xs))] }
func (g gen) ts() uint64 {
	if i := g.IntN(len(genTimes)); i < len(genTimes)-1 {
		return genTimes[i]
	}
	return g.max
}
func (g gen) row() []byte { return []byte(g.pick(genRows)) }

func (g gen) timeRange() storage.TimeRange {
	switch a, b := g.ts(), g.ts(); g.IntN(5) {
	case 0:
		return storage.TimeRange{}
	case 1:
		return storage.At(a)
	case 2:
		return storage.Before(a)
	case 3:
		return storage.From(a)
	default:
		return storage.TimeRange{Start: min(a, b), End: max(a, b)}
	}
}

func (g gen) filter() storage.Filter {
	f := make(storage.Filter, 1+g.IntN(3))
	for i := range f {
		f[i] = storage.Selector{Family: g.pick(genFamilies), Time: g.timeRange(), Limit: g.IntN(4)}
		if g.IntN(3) == 0 {
			f[i].AllQualifiers = true
		} else {
			f[i].Qualifier = g.pick(genQualifiers)
		}
	}
	return f
}

func (g gen) mutations() []storage.Mutation {
	ms := make([]storage.Mutation, g.IntN(4))
	for i := range ms {
		f, q := g.pick(genFamilies), g.pick(genQualifiers)
		switch n := g.IntN(10); {
		case n < 6:
			ms[i] = storage.SetCell(f, q, g.ts(), []byte{byte(g.IntN(256))})
		case n < 9:
			ms[i] = storage.Mutation{Kind: storage.DeleteCells, Family: f, Qualifier: q, Time: g.timeRange()}
		default:
			ms[i] = storage.Mutation{Kind: storage.DeleteRow}
		}
	}
	return ms
}

// testRandomized checks random operations against the reference model.
func testRandomized(t *testing.T, s storage.Store) {
	g := gen{rand.New(rand.NewPCG(seed(t), 0)), storage.MaxTimestampOf(s)}
	m := newModel()
	for i := range 600 {
		randomOp(t, s, m, g, i)
	}
	want := m.scan(nil, nil, everything(), 0)
	expectRows(t, "final contents", dump(t, s), want)
}

func randomOp(t *testing.T, s storage.Store, m *model, g gen, i int) {
	t.Helper()
	row := g.row()
	switch g.IntN(7) {
	case 0, 1:
		ms := g.mutations()
		put(t, s, string(row), ms...)
		m.apply(row, ms)
	case 2:
		randomCheckAndMutate(t, s, m, g, row, i)
	case 3:
		randomIncrement(t, s, m, g, row, i)
	case 4:
		randomMutateRows(t, s, m, g)
	case 5:
		f := g.filter()
		expectCells(t, "op "+strconv.Itoa(i)+": ReadRow "+strconv.Quote(string(row))+" "+fmtFilter(f), read(t, s, string(row), f), m.read(row, f))
	default:
		randomScan(t, s, m, g, i)
	}
}

func randomCheckAndMutate(t *testing.T, s storage.Store, m *model, g gen, row []byte, i int) {
	t.Helper()
	pred, ifTrue, ifFalse := g.filter(), g.mutations(), g.mutations()
	want := len(m.read(row, pred)) > 0
	if got := checkAndMutate(t, s, string(row), pred, ifTrue, ifFalse); got != want {
		t.Fatalf("op %d: CheckAndMutate(%q, %s) = %v, want %v", i, row, fmtFilter(pred), got, want)
	}
	if want {
		m.apply(row, ifTrue)
	} else {
		m.apply(row, ifFalse)
	}
}

func randomIncrement(t *testing.T, s storage.Store, m *model, g gen, row []byte, i int) {
	t.Helper()
	f, q, delta := "b", "ctr", int64(g.IntN(21)-10)
	if g.IntN(4) == 0 {
		f, q = g.pick(genFamilies), g.pick(genQualifiers)
	}
	want, ok := m.increment(row, f, q, delta)
	got, err := s.Increment(ctx, row, f, q, delta)
	switch {
	case !ok && !errors.Is(err, storage.ErrInvalidArgument):
		t.Fatalf("op %d: Increment of a non-counter %s:%q: %v, want ErrInvalidArgument", i, f, q, err)
	case ok && (err != nil || got != want):
		t.Fatalf("op %d: Increment(%q, %s:%q, %d) = %d, %v; want %d", i, row, f, q, delta, got, err, want)
	}
}

func randomMutateRows(t *testing.T, s storage.Store, m *model, g gen) {
	t.Helper()
	b, ok := s.(storage.Batcher)
	if !ok {
		return
	}
	rows := make([]storage.RowMutation, g.IntN(4))
	for i := range rows {
		rows[i] = storage.RowMutation{Row: g.row(), Mutations: g.mutations()}
	}
	if errs, err := b.MutateRows(ctx, rows); err != nil || errs != nil {
		t.Fatalf("MutateRows: %v %v", errs, err)
	}
	for _, r := range rows {
		m.apply(r.Row, r.Mutations)
	}
}

func randomScan(t *testing.T, s storage.Store, m *model, g gen, i int) {
	t.Helper()
	start, end := g.pick(append(genRows, "")), g.pick(append(genRows, ""))
	if end != "" && start > end {
		start, end = end, start
	}
	f, limit := g.filter(), g.IntN(4)
	expectRows(t, "op "+strconv.Itoa(i)+": Scan ["+strconv.Quote(start)+", "+strconv.Quote(end)+") "+fmtFilter(f),
		scan(t, s, start, end, f, limit), m.scan([]byte(start), []byte(end), f, limit))
}

func fmtFilter(f storage.Filter) string {
	s := ""
	for _, sel := range f {
		s += strconv.Quote(sel.Family) + ":"
		if sel.AllQualifiers {
			s += "*"
		} else {
			s += strconv.Quote(sel.Qualifier)
		}
		s += "[" + strconv.FormatUint(sel.Time.Start, 10) + "," + strconv.FormatUint(sel.Time.End, 10) + ")"
		s += "/" + strconv.Itoa(sel.Limit) + " "
	}
	return "{" + s + "}"
}
