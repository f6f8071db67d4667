package graph

import (
	"context"
	"errors"
	"fmt"

	"github.com/seed-992972ee/percolator/storage"
)

// errTakenOver: a holder's lock was taken over before it released it; the
// taker rolls its mutations forward, so its caller fetches until they are
// settled rather than report them failed.
var errTakenOver = fmt.Errorf("%w: lock taken over while releasing", ErrLocked)

// mutateStrong is S2Graph's state machine, retried: each attempt starts
// Trying from a fresh fetch; one that finds the edge under a live lock,
// loses the race for it or cannot learn an outcome backs off and starts
// again, up to MaxRetries × 4 attempts.
func (g *Graph) mutateStrong(ctx context.Context, l *Label, m *Mutation) (Result, error) {
	row := snapshotRow(l.Name, m.Src, m.Tgt)
	var lastErr error
	for attempt := 0; attempt < g.opts.MaxRetries*4; attempt++ {
		if attempt > 0 {
			if err := g.backoff(ctx, attempt); err != nil {
				return Result{}, err
			}
		}
		res, final, err := g.attempt(ctx, l, m, row)
		if final {
			return res, err
		}
		lastErr = err
	}
	if errors.Is(lastErr, ErrLocked) {
		return Result{}, fmt.Errorf("%w: %s -%s-> %s", ErrLocked, m.Src, m.Label, m.Tgt)
	}
	return Result{}, lastErr
}

// attempt is one pass through the states: Trying (try), then, holding
// the lock, Locked → Updated → Done (finish). final reports that res and
// err are m's outcome; otherwise err says why m fetches again.
func (g *Graph) attempt(ctx context.Context, l *Label, m *Mutation, row []byte) (res Result, final bool, err error) {
	t, err := g.try(ctx, l, m, row)
	switch t.verdict {
	case settled, dropped, refused:
		return t.res, true, err
	case waiting, lost, unknown:
		return Result{}, false, err
	}
	res, err = g.finish(ctx, l, m, row, t.s, t.ver)
	if errors.Is(err, errTakenOver) {
		return Result{}, false, err // the taker settles it: fetch until it has
	}
	return res, true, err
}

// verdict is what the Trying state made of a mutation.
type verdict int

const (
	// locked: the edge was free and m locked it (Trying → Locked).
	locked verdict = iota
	// tookOver: the edge's lock had expired and m took it over: the
	// lock's mutations stay queued before m, to be rolled forward first.
	tookOver
	// held: m's own lock (a lock call whose reply was lost): go on from it.
	held
	// settled: m was settled before (a re-sent mutation): res is its
	// outcome.
	settled
	// dropped: m is older than the edge; nothing changed.
	dropped
	// refused: m's index rows would exceed the store's key limit (err).
	refused
	// waiting: a live lock (ErrLocked): back off and fetch again.
	waiting
	// lost: another writer locked the edge first (ErrLocked).
	lost
	// unknown: a store call failed (err), the lock's outcome unknown: the
	// next fetch tells.
	unknown
)

func (v verdict) String() string {
	return [...]string{"locked", "took over", "held", "settled", "dropped", "refused", "waiting", "lost", "unknown"}[v]
}

// trying is the Trying state's outcome: the verdict and, when m holds the
// lock (locked, tookOver, held), the snapshot as locked and its version;
// m's result when settled or dropped.
type trying struct {
	verdict verdict
	s       snapshot
	ver     uint64
	res     Result
}

// try is the Trying state: fetch the snapshot edge, judge it, and lock it
// for m by CAS if m may (Trying → Locked).
func (g *Graph) try(ctx context.Context, l *Label, m *Mutation, row []byte) (trying, error) {
	s, ver, err := g.fetch(ctx, row)
	if err != nil {
		return trying{verdict: unknown}, err
	}
	if r, ok := s.settled(m.ID); ok {
		return trying{verdict: settled, res: r.result()}, nil
	}
	if s.holds(m.ID) {
		return trying{verdict: held, s: s, ver: ver}, nil
	}
	v := g.judge(&s, m)
	switch v {
	case waiting:
		g.stats.lockRetries.Add(1)
		return trying{verdict: v}, ErrLocked
	case dropped:
		return trying{verdict: v, res: Result{Dropped: true}}, nil
	case tookOver:
		g.stats.takeovers.Add(1)
	}
	if err := checkQueued(l, m, &s, ver); err != nil {
		return trying{verdict: refused}, err
	}
	return g.lock(ctx, m, row, s, ver, v)
}

// judge decides what m does with the fetched snapshot s (not its own
// lock): wait for a live lock, take over an expired one, drop m if it is
// older than the free edge, or lock it.
func (g *Graph) judge(s *snapshot, m *Mutation) verdict {
	switch {
	case s.locked() && !g.expired(s):
		return waiting
	case s.locked():
		return tookOver
	case s.Edge.dropped(m):
		return dropped
	}
	return locked
}

// expired reports whether s's lock is older than LockExpiry by this
// process's clock: another mutation may take it over.
func (g *Graph) expired(s *snapshot) bool {
	return g.nowMS()-s.LockedAt > g.opts.LockExpiry.Milliseconds()
}

// checkQueued refuses m if its index rows, built on the state s's queued
// mutations leave (as update builds them), would exceed the store's key
// limit: refused now, not found while the lock is held, which would wedge
// the edge.
func checkQueued(l *Label, m *Mutation, s *snapshot, ver uint64) error {
	state := s.Edge
	for _, p := range s.Pending {
		if !state.dropped(&p.M) {
			state = state.apply(&p.M)
		}
	}
	if state.dropped(m) {
		return nil
	}
	after := state.apply(m)
	em := buildEdgeMutate(l, m.Src, m.Tgt, &state, &after, ver+1)
	return checkRows(m, &em)
}

// lock is Trying → Locked: m joins s's pending mutations (behind those of
// an expired lock it takes over), with lockedAt now, by CAS from version
// ver. v is the verdict when the CAS wins.
func (g *Graph) lock(ctx context.Context, m *Mutation, row []byte, s snapshot, ver uint64, v verdict) (trying, error) {
	next := s
	next.Pending = append(append([]pending(nil), s.Pending...), pending{M: *m, Ver: ver + 1})
	next.LockedAt = g.nowMS()
	won, err := g.casSnapshot(ctx, row, ver, &next)
	switch {
	case err != nil:
		return trying{verdict: unknown}, err
	case !won:
		g.stats.lockRetries.Add(1)
		return trying{verdict: lost}, ErrLocked
	}
	return trying{verdict: v, s: next, ver: ver + 1}, nil
}

// finish runs a held lock to Done and reports m's outcome.
func (g *Graph) finish(ctx context.Context, l *Label, m *Mutation, row []byte, s snapshot, ver uint64) (Result, error) {
	done, err := g.drive(ctx, l, m.Src, m.Tgt, row, s, ver)
	if err != nil {
		return Result{}, err
	}
	if r, ok := done.settled(m.ID); ok {
		return r.result(), nil
	}
	return Result{}, fmt.Errorf("graph: mutation %x not settled by its own lock", m.ID)
}

// drive takes the snapshot s, locked at version ver by this caller, from
// Locked to Done (update, then release) and returns the released
// snapshot. src and tgt are the edge's (a pending mutation's own were
// decoded from JSON, which keeps only UTF-8).
func (g *Graph) drive(ctx context.Context, l *Label, src, tgt string, row []byte, s snapshot, ver uint64) (snapshot, error) {
	done, err := g.update(ctx, l, src, tgt, &s)
	if err != nil {
		return snapshot{}, err // Locked stays: a later mutation takes it over
	}
	return g.release(ctx, row, ver, s.Pending, done)
}

// update is Locked → Updated: each of s's queued mutations has its
// EdgeMutate built once, from the state before it, and fired (only its
// calls are re-sent on failure, never rebuilt). It returns the snapshot
// to release: the merged state, without pending or lockedAt, recording
// the mutations settled.
func (g *Graph) update(ctx context.Context, l *Label, src, tgt string, s *snapshot) (snapshot, error) {
	state := s.Edge
	rec := append([]recent(nil), s.Recent...)
	for _, p := range s.Pending {
		if state.dropped(&p.M) {
			rec = append(rec, recent{ID: p.M.ID, Dropped: true})
			continue
		}
		after := state.apply(&p.M)
		if err := g.fire(ctx, buildEdgeMutate(l, src, tgt, &state, &after, p.Ver)); err != nil {
			return snapshot{}, err
		}
		rec = append(rec, recent{ID: p.M.ID, Existed: state.live()})
		state = after
	}
	if len(rec) > maxRecent {
		rec = rec[len(rec)-maxRecent:]
	}
	return snapshot{Edge: state, Recent: rec}, nil
}

// release is Updated → Done: the snapshot locked at version ver by the
// mutations ps is replaced by done, by CAS. A CAS lost or unknown is
// judged by fetching: the newest snapshot is ours released (done), or our
// lock was taken over (errTakenOver: the new holder rolls ps forward).
func (g *Graph) release(ctx context.Context, row []byte, ver uint64, ps []pending, done snapshot) (snapshot, error) {
	for range g.opts.MaxRetries {
		won, err := g.casSnapshot(ctx, row, ver, &done)
		if err == nil && won {
			return done, nil
		}
		cur, cver, ferr := g.fetch(ctx, row)
		if ferr == nil && cver > ver && allSettled(&cur, ps) {
			return cur, nil
		}
		if ferr == nil && cver > ver {
			return snapshot{}, errTakenOver // our lock expired meanwhile
		}
		if err := g.backoff(ctx, 3); err != nil {
			return snapshot{}, err
		}
	}
	return snapshot{}, fmt.Errorf("graph: releasing the lock of %q failed", row)
}

// casSnapshot replaces the snapshot at version ver by s at ver+1, if ver
// is still the newest: S2Graph's compareAndSet on the snapshot edge
// (every write of it makes a new, higher version). ok false: another
// writer got there first.
func (g *Graph) casSnapshot(ctx context.Context, row []byte, ver uint64, s *snapshot) (bool, error) {
	pred := storage.Filter{{Family: Family, Qualifier: qualSnapshot, Time: storage.From(ver + 1), Limit: 1}}
	muts := []storage.Mutation{
		storage.SetCell(Family, qualSnapshot, ver+1, encodeSnapshot(s)),
		{Kind: storage.DeleteCells, Family: Family, Qualifier: qualSnapshot, Time: storage.Before(ver + 1)},
	}
	// A nonce over a server, so a re-sent call learns its own outcome;
	// safe in any order anyway: a late copy finds version ver+1 or newer
	// and applies nothing.
	matched, err := g.store.CheckAndMutate(ctx, row, pred, nil, muts)
	return !matched && err == nil, err
}

// fire sends every write of em, re-sending a failed one (the same call)
// until it succeeds or MaxRetries runs out.
func (g *Graph) fire(ctx context.Context, em edgeMutate) error {
	for _, op := range em.index {
		if err := g.retry(ctx, func() error { return g.writeIndex(ctx, op) }); err != nil {
			return err
		}
	}
	for _, op := range em.degree {
		if err := g.retry(ctx, func() error { return g.flipDegree(ctx, op) }); err != nil {
			return err
		}
	}
	return nil
}

func (g *Graph) retry(ctx context.Context, call func() error) error {
	var err error
	for attempt := range g.opts.MaxRetries {
		if err = call(); err == nil || ctx.Err() != nil {
			return err
		}
		if berr := g.backoff(ctx, attempt); berr != nil {
			return berr
		}
	}
	return err
}

// writeIndex inserts or removes one index edge at op.ver: a CheckAndMutate
// that applies only if the row holds nothing of a newer version (a newer
// insert, or the marker a newer delete leaves). Sent twice it writes the
// same cells; sent late, after a newer version, it changes nothing.
func (g *Graph) writeIndex(ctx context.Context, op indexOp) error {
	pred := storage.Filter{
		{Family: Family, Qualifier: qualEdge, Time: storage.From(op.ver + 1), Limit: 1},
		{Family: Family, Qualifier: qualGone, Time: storage.From(op.ver + 1), Limit: 1},
	}
	// With a nonce over a server; safe in any order anyway (above).
	_, err := g.store.CheckAndMutate(ctx, op.row, pred, nil, op.mutations())
	return err
}

// flipDegree sets one edge's presence cell in a degree row to op.present
// at op.ver, and moves the row's count in the same CheckAndMutate when the
// presence changes. The write is refused when the presence cell or the
// count has a newer version than read (then it reads again); a flip
// already applied (or overtaken by a newer one) changes nothing.
func (g *Graph) flipDegree(ctx context.Context, op degreeOp) error {
	for range 64 {
		d, err := g.readDegree(ctx, op)
		if err != nil {
			return err
		}
		if d.presenceTS >= op.ver {
			return nil // applied, or overtaken
		}
		pred, muts := d.flip(op)
		// A nonce over a server; safe in any order anyway: a late copy
		// finds the presence cell (or the count) newer than it read.
		refused, err := g.store.CheckAndMutate(ctx, op.row, pred, nil, muts)
		if err != nil || !refused {
			return err
		}
	}
	return fmt.Errorf("graph: degree row %q kept changing", op.row)
}

// degree is what flipDegree read of a degree row: one edge's presence
// cell and the count, with their versions (0: absent).
type degree struct {
	qual                string // the presence cell's qualifier
	presenceTS, countTS uint64
	present             bool
	count               int64
}

func (g *Graph) readDegree(ctx context.Context, op degreeOp) (degree, error) {
	d := degree{qual: presencePref + op.other}
	r, err := g.store.ReadRow(ctx, op.row, storage.Filter{
		{Family: Family, Qualifier: d.qual, Limit: 1},
		{Family: Family, Qualifier: qualCount, Limit: 1},
	})
	for _, c := range r.Cells {
		switch c.Qualifier {
		case d.qual:
			d.presenceTS, d.present = c.TS, len(c.Value) == 1 && c.Value[0] == 1
		case qualCount:
			d.countTS, d.count = c.TS, decodeCount(c.Value)
		}
	}
	return d, err
}

// flip is the CheckAndMutate of op on the row as read in d: the
// predicate matches (and refuses the write) if the presence cell, or the
// count when it moves, has a version newer than read.
func (d *degree) flip(op degreeOp) (storage.Filter, []storage.Mutation) {
	pred := storage.Filter{{Family: Family, Qualifier: d.qual, Time: storage.From(d.presenceTS + 1), Limit: 1}}
	muts := []storage.Mutation{
		storage.SetCell(Family, d.qual, op.ver, presence(op.present)),
		{Kind: storage.DeleteCells, Family: Family, Qualifier: d.qual, Time: storage.Before(op.ver)},
	}
	if d.present == op.present {
		return pred, muts
	}
	count := d.count + 1
	if !op.present {
		count = d.count - 1
	}
	pred = append(pred, storage.Selector{Family: Family, Qualifier: qualCount, Time: storage.From(d.countTS + 1), Limit: 1})
	return pred, append(muts,
		storage.SetCell(Family, qualCount, d.countTS+1, encodeCount(count)),
		storage.Mutation{Kind: storage.DeleteCells, Family: Family, Qualifier: qualCount, Time: storage.Before(d.countTS + 1)})
}

func presence(p bool) []byte {
	if p {
		return []byte{1}
	}
	return []byte{0}
}

// allSettled reports whether s records every one of ps as settled.
func allSettled(s *snapshot, ps []pending) bool {
	for _, p := range ps {
		if _, ok := s.settled(p.M.ID); !ok {
			return false
		}
	}
	return true
}
