package graph

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/seed-992972ee/percolator/internal/manualclock"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// TestScenarios runs the strong protocol's scenarios in testdata/: one
// edge's mutations driven a state at a time (try: Trying → Locked;
// update: Locked → Updated; release: Updated → Done), a holder that
// crashes simply taking no further step, time moved by hand through
// Options.Now. Regenerate with -rewrite.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := newScenario(t)
		datadriven.RunTest(t, path, s.run)
	})
}

// scenarioStart is where the scenario's clock starts.
var scenarioStart = time.UnixMilli(1_700_000_000_000)

// scenarioStore is a memory store that loses the reply of the next
// CheckAndMutate of a snapshot edge when told to (the write applies),
// and can crash its caller: after crashIn more reads and conditional
// writes, it cancels the caller's context (the process is gone) and
// fails every call.
type scenarioStore struct {
	*memory.Store
	lose    bool
	crashIn int
	crash   context.CancelFunc // nil: no crash coming
}

var errReplyLost = errors.New("reply lost")

func (s *scenarioStore) enter() error {
	if s.crash == nil {
		return nil
	}
	if s.crashIn == 0 {
		s.crash()
		return context.Canceled
	}
	s.crashIn--
	return nil
}

func (s *scenarioStore) ReadRow(ctx context.Context, row []byte, f storage.Filter) (storage.Row, error) {
	if err := s.enter(); err != nil {
		return storage.Row{}, err
	}
	return s.Store.ReadRow(ctx, row, f)
}

func (s *scenarioStore) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, a, b []storage.Mutation) (bool, error) {
	if err := s.enter(); err != nil {
		return false, err
	}
	matched, err := s.Store.CheckAndMutate(ctx, row, p, a, b)
	if s.lose && strings.HasPrefix(string(row), rowPrefix+"s/") {
		s.lose = false
		return false, errReplyLost
	}
	return matched, err
}

// scenarioLabel is the label of every scenario: a rating, one index on
// it, strong consistency.
var scenarioLabel = Label{Name: "rates", Props: map[string]Type{"rating": Float},
	Indexes: []Index{{Name: "by_rating", Props: []string{"rating"}}}, Consistency: Strong}

// scenario is one file's world: one Graph (each mutation is driven by
// its own steps, as if by its own process), the mutations by id, the
// lock each holds after its try, the snapshot its update built, and the
// steps so far, for the table.
type scenario struct {
	t     *testing.T
	clock *manualclock.Clock
	store *scenarioStore
	g     *Graph
	l     *Label
	muts  map[uint64]*Mutation
	held  map[uint64]trying
	built map[uint64]snapshot
	steps [][]string
}

func newScenario(t *testing.T) *scenario {
	clock := manualclock.New(scenarioStart)
	st := &scenarioStore{Store: memory.New()}
	t.Cleanup(func() { st.Close() })
	g := New(st, Options{MaxBackOff: time.Millisecond, MaxRetries: 2, LockExpiry: time.Second, Now: clock.Now})
	if err := g.CreateLabel(ctx, scenarioLabel); err != nil {
		t.Fatal(err)
	}
	l, err := g.Label(ctx, scenarioLabel.Name)
	if err != nil {
		t.Fatal(err)
	}
	return &scenario{t: t, clock: clock, store: st, g: g, l: l,
		muts: map[uint64]*Mutation{}, held: map[uint64]trying{}, built: map[uint64]snapshot{}}
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	handlers := map[string]func(*datadriven.TestData) string{
		"mutate": s.mutate, "try": s.try, "update": s.update, "release": s.release,
		"repair": s.repair, "check": s.check, "advance": s.advance, "dump": s.dump, "steps": s.table,
	}
	h, ok := handlers[d.Cmd]
	if !ok {
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	s.store.lose = d.HasArg("lose-reply")
	out := h(d)
	if s.store.lose {
		d.Fatalf(t, "no reply was lost")
	}
	return out
}

// mutation is the mutation id names: defined by its first command's
// arguments (op, src, tgt, ts, rating), the same one when named again
// (a re-send).
func (s *scenario) mutation(d *datadriven.TestData) *Mutation {
	var id uint64
	d.ScanArgs(s.t, "id", &id)
	if m := s.muts[id]; m != nil {
		return m
	}
	var op, src, tgt string
	var ts int64
	d.ScanArgs(s.t, "op", &op)
	d.ScanArgs(s.t, "src", &src)
	d.ScanArgs(s.t, "tgt", &tgt)
	d.ScanArgs(s.t, "ts", &ts)
	m := &Mutation{Label: scenarioLabel.Name, Src: src, Tgt: tgt, TS: ts, ID: id,
		Op: map[string]Op{"insert": Insert, "update": Update, "delete": Delete, "increment": Increment}[op]}
	if d.HasArg("rating") {
		var r float64
		d.ScanArgs(s.t, "rating", &r)
		m.Props = rating(r)
	}
	s.muts[id] = m
	return m
}

func mutString(m *Mutation) string {
	out := fmt.Sprintf("%d %v ts=%d", m.ID, m.Op, m.TS)
	if r, ok := m.Props["rating"]; ok {
		out += " rating=" + r.String()
	}
	return out
}

// mutate is a whole Mutate call: every state, retried as the Graph does.
func (s *scenario) mutate(d *datadriven.TestData) string {
	m := s.mutation(d)
	res, err := s.g.Mutate(ctx, *m)
	out := fmt.Sprintf("%+v", res)
	if err != nil {
		out = err.Error()
	}
	s.step(m, "mutate "+mutString(m), "Done", err)
	return out
}

// try is the Trying state once: fetch, judge, lock by CAS.
func (s *scenario) try(d *datadriven.TestData) string {
	m := s.mutation(d)
	t, err := s.g.try(ctx, s.l, m, snapshotRow(m.Label, m.Src, m.Tgt))
	state := map[verdict]string{locked: "Locked", tookOver: "Locked", held: "Locked",
		settled: "Done (settled before)", dropped: "Done (dropped)"}[t.verdict]
	if state == "" {
		state = "Trying"
	}
	if state == "Locked" {
		s.held[m.ID] = t
	}
	s.step(m, "try "+mutString(m), state, err)
	out := fmt.Sprintf("%s → %s", t.verdict, state)
	if state == "Locked" {
		out += fmt.Sprintf(" (snapshot @%d)", t.ver)
	}
	if t.verdict == settled || t.verdict == dropped {
		out = fmt.Sprintf("%s: %+v", t.verdict, t.res)
	}
	if err != nil {
		out += ": " + err.Error()
	}
	return out
}

func (s *scenario) holder(d *datadriven.TestData) (*Mutation, trying) {
	m := s.mutation(d)
	t, ok := s.held[m.ID]
	if !ok {
		d.Fatalf(s.t, "mutation %d holds no lock", m.ID)
	}
	return m, t
}

// update is Locked → Updated for the lock mutation id holds: the
// EdgeMutate of every mutation queued on it, in order. With crash-after,
// its process dies after so many store calls.
func (s *scenario) update(d *datadriven.TestData) string {
	m, t := s.holder(d)
	uctx := ctx
	if d.HasArg("crash-after") {
		var cancel context.CancelFunc
		uctx, cancel = context.WithCancel(ctx)
		d.ScanArgs(s.t, "crash-after", &s.store.crashIn)
		s.store.crash = cancel
	}
	done, err := s.g.update(uctx, s.l, m.Src, m.Tgt, &t.s)
	s.store.crash = nil
	if errors.Is(err, context.Canceled) {
		s.step(m, fmt.Sprintf("update %d", m.ID), "Locked (crashed)", nil)
		return "crashed mid-update"
	}
	if err != nil {
		s.step(m, fmt.Sprintf("update %d", m.ID), "Locked", err)
		return err.Error()
	}
	s.built[m.ID] = done
	s.step(m, fmt.Sprintf("update %d", m.ID), "Updated", nil)
	var ids []string
	for _, p := range t.s.Pending {
		ids = append(ids, strconv.FormatUint(p.M.ID, 10))
	}
	return fmt.Sprintf("Locked → Updated: fired the EdgeMutates of [%s]", strings.Join(ids, " "))
}

// release is Updated → Done: the merged snapshot replaces the lock by
// CAS from the version the lock was taken at.
func (s *scenario) release(d *datadriven.TestData) string {
	m, t := s.holder(d)
	done, ok := s.built[m.ID]
	if !ok {
		d.Fatalf(s.t, "mutation %d has not updated", m.ID)
	}
	cur, err := s.g.release(ctx, snapshotRow(m.Label, m.Src, m.Tgt), t.ver, t.s.Pending, done)
	switch {
	case errors.Is(err, errTakenOver):
		s.step(m, fmt.Sprintf("release %d", m.ID), "Trying", err)
		return "taken over: fetch again until the taker settles it"
	case err != nil:
		s.step(m, fmt.Sprintf("release %d", m.ID), "Updated", err)
		return err.Error()
	}
	r, _ := cur.settled(m.ID)
	s.step(m, fmt.Sprintf("release %d", m.ID), "Done", nil)
	return fmt.Sprintf("Updated → Done: %+v", r.result())
}

// repair is a reader finding the edge's lock expired: it rolls the
// lock's mutations forward (Graph.Repair).
func (s *scenario) repair(d *datadriven.TestData) string {
	var src, tgt string
	d.ScanArgs(s.t, "src", &src)
	d.ScanArgs(s.t, "tgt", &tgt)
	did, err := s.g.Repair(ctx, scenarioLabel.Name, src, tgt)
	s.stepEdge(src, tgt, "repair (a reader)", "-", err)
	if err != nil {
		return err.Error()
	}
	if !did {
		return "nothing to repair"
	}
	return "rolled forward"
}

func (s *scenario) check(*datadriven.TestData) string {
	rep, err := s.g.Check(ctx, scenarioLabel.Name)
	if err != nil {
		return err.Error()
	}
	out := fmt.Sprintf("%d edges, %d locked, %d repaired", rep.Edges, rep.Locked, rep.Repaired)
	for _, m := range rep.Mismatches {
		out += "\nmismatch: " + m
	}
	return out
}

func (s *scenario) advance(d *datadriven.TestData) string {
	var by string
	d.ScanArgs(s.t, "by", &by)
	dur, err := time.ParseDuration(by)
	if err != nil {
		d.Fatalf(s.t, "by: %v", err)
	}
	s.clock.Advance(dur)
	return "now " + s.rel(s.clock.Now().UnixMilli())
}

func (s *scenario) rel(ms int64) string {
	return "+" + time.UnixMilli(ms).Sub(scenarioStart).String()
}

// dump is the label's rows: the snapshot edges (version after @, the
// state, the lock: its pending mutations and lockedAt, the settled
// ids), the index edges (present at the version that wrote them, or
// gone) and the degrees (the count, and each edge's presence cell).
func (s *scenario) dump(*datadriven.TestData) string {
	var lines []string
	s.scan("s/", storage.Filter{{Family: Family, Qualifier: qualSnapshot, Limit: 1}}, func(r storage.Row, rest []byte) {
		src, rest, _ := readPart(rest)
		tgt, _, _ := readPart(rest)
		snap, err := decodeSnapshot(r.Cells[0].Value)
		if err != nil {
			s.t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("snapshot %s→%s @%d: %s", src, tgt, r.Cells[0].TS, s.snapString(&snap)))
	})
	s.scan("i/", indexFilter(&Label{Consistency: Weak}), func(r storage.Row, rest []byte) {
		lines = append(lines, "index    "+indexString(r, rest))
	})
	s.scan("d/", storage.Filter{{Family: Family, AllQualifiers: true, Limit: 1}}, func(r storage.Row, rest []byte) {
		lines = append(lines, "degree   "+degreeString(r, rest))
	})
	return strings.Join(lines, "\n")
}

// scan reads the label's rows of one kind ("s/", "i/", "d/"), handing
// fn each row and its key after the label.
func (s *scenario) scan(kind string, f storage.Filter, fn func(r storage.Row, rest []byte)) {
	p := appendPart([]byte(rowPrefix+kind), scenarioLabel.Name)
	err := s.store.Scan(ctx, p, storage.PrefixEnd(p), f, 0, func(r storage.Row) bool {
		fn(r, r.Key[len(p):])
		return true
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

func (s *scenario) snapString(snap *snapshot) string {
	out := edgeString(&snap.Edge)
	if snap.locked() {
		var ps []string
		for _, p := range snap.Pending {
			ps = append(ps, fmt.Sprintf("%s @%d", mutString(&p.M), p.Ver))
		}
		out += fmt.Sprintf("; locked at %s by [%s]", s.rel(snap.LockedAt), strings.Join(ps, ", "))
	}
	var ids []string
	for _, r := range snap.Recent {
		ids = append(ids, strconv.FormatUint(r.ID, 10))
	}
	return out + fmt.Sprintf("; settled [%s]", strings.Join(ids, " "))
}

func edgeString(e *edgeState) string {
	if !e.live() {
		return fmt.Sprintf("no edge (deleted at ts %d)", e.DelTS)
	}
	return fmt.Sprintf("rating=%v (ts %d)", e.Props["rating"].V, e.Props["rating"].TS)
}

// indexString shows an index row (after the label): direction, vertex,
// rating, other vertex, and its newest cell.
func indexString(r storage.Row, rest []byte) string {
	_, rest, _ = readPart(rest) // the index: there is one
	dir := rest[0]
	vertex, rest, _ := readPart(rest[1:])
	rating := "none"
	if rest[0] == 1 {
		bits := binary.BigEndian.Uint64(rest[1:9])
		if bits&(1<<63) != 0 {
			bits &^= 1 << 63
		} else {
			bits = ^bits
		}
		rating = strconv.FormatFloat(math.Float64frombits(bits), 'g', -1, 64)
		rest = rest[9:]
	} else {
		rest = rest[1:]
	}
	other, _, _ := readPart(rest)
	arrow := "→"
	if dir == In {
		arrow = "←"
	}
	cell := "gone"
	if c, ok := indexPresent(r.Cells); ok {
		cell = fmt.Sprintf("edge @%d", c.TS)
	} else {
		for _, c := range r.Cells {
			cell = fmt.Sprintf("gone @%d", c.TS)
		}
	}
	return fmt.Sprintf("%s %-4s rating=%-3s %s %-4s %s", dirName(dir), vertex, rating, arrow, other, cell)
}

func dirName(dir byte) string {
	if dir == In {
		return "in "
	}
	return "out"
}

// degreeString shows a degree row (after the label).
func degreeString(r storage.Row, rest []byte) string {
	vertex, _, _ := readPart(rest[1:])
	count := "?"
	var ps []string
	for _, c := range r.Cells {
		switch {
		case c.Qualifier == qualCount:
			count = fmt.Sprint(decodeCount(c.Value))
		case strings.HasPrefix(c.Qualifier, presencePref):
			state := "absent"
			if len(c.Value) == 1 && c.Value[0] == 1 {
				state = "present"
			}
			ps = append(ps, fmt.Sprintf("%s %s @%d", c.Qualifier[len(presencePref):], state, c.TS))
		}
	}
	sort.Strings(ps)
	return fmt.Sprintf("%s %-4s %s (%s)", dirName(rest[0]), vertex, count, strings.Join(ps, ", "))
}

// step records one row of the table: the step, the state the mutation
// is in after it, and the edge's snapshot, out-index and out-degree.
func (s *scenario) step(m *Mutation, what, state string, err error) {
	s.stepEdge(m.Src, m.Tgt, what, state, err)
}

func (s *scenario) stepEdge(src, tgt, what, state string, err error) {
	switch {
	case errors.Is(err, ErrLocked):
		state += " (locked: back off)"
	case err != nil:
		state += " (" + err.Error() + ")"
	}
	row := []string{what, state}
	snap, ver, ferr := s.g.fetch(ctx, snapshotRow(scenarioLabel.Name, src, tgt))
	if ferr != nil {
		s.t.Fatal(ferr)
	}
	lock := "-"
	if snap.locked() {
		var ids []string
		for _, p := range snap.Pending {
			ids = append(ids, strconv.FormatUint(p.M.ID, 10))
		}
		lock = fmt.Sprintf("[%s] at %s", strings.Join(ids, " "), s.rel(snap.LockedAt))
	}
	edge := "no edge"
	if snap.Edge.live() {
		edge = "rating=" + snap.Edge.Props["rating"].V.String()
	}
	row = append(row, fmt.Sprintf("@%d %s", ver, edge), lock)
	es, err := s.g.Neighbors(ctx, Query{Label: scenarioLabel.Name, Vertex: src, Dir: Out})
	if err != nil {
		s.t.Fatal(err)
	}
	var idx []string
	for _, e := range es {
		idx = append(idx, fmt.Sprintf("%s rating=%v", e.Tgt, e.Props["rating"]))
	}
	deg, err := s.g.Degree(ctx, scenarioLabel.Name, src, Out)
	if err != nil {
		s.t.Fatal(err)
	}
	if len(idx) == 0 {
		idx = []string{"-"}
	}
	s.steps = append(s.steps, append(row, strings.Join(idx, ", "), fmt.Sprint(deg)))
}

// table prints the steps so far, one row each.
func (s *scenario) table(*datadriven.TestData) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "step\tstate after\tsnapshot\tlock\tindex (out)\tdegree (out)")
	for _, r := range s.steps {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	_ = w.Flush()
	return strings.TrimRight(b.String(), "\n")
}
