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

// mutateStrong is S2Graph's state machine: Trying (fetch, lock by CAS),
// Locked (fire the EdgeMutate), Updated (release by CAS), Done.
func (g *Graph) mutateStrong(ctx context.Context, l *Label, m *Mutation) (Result, error) {
	row := snapshotRow(l.Name, m.Src, m.Tgt)
	var lastErr error
	for attempt := 0; attempt < g.opts.MaxRetries*4; attempt++ {
		if attempt > 0 {
			if err := g.backoff(ctx, attempt); err != nil {
				return Result{}, err
			}
		}
		// Trying: fetch the snapshot edge.
		s, ver, err := g.fetch(ctx, row)
		if err != nil {
			lastErr = err
			continue
		}
		if r, done := s.settled(m.ID); done {
			return Result{Dropped: r.Dropped, Existed: r.Existed}, nil // a re-sent mutation: settled before
		}
		if s.holds(m.ID) {
			// Our lock (a lock call whose reply was lost): go on from it.
			res, err := g.finish(ctx, l, m, row, s, ver)
			if errors.Is(err, errTakenOver) {
				lastErr = err
				continue // the taker settles it: fetch until it has
			}
			return res, err
		}
		if s.locked() && g.nowMS()-s.LockedAt <= g.opts.LockExpiry.Milliseconds() {
			lastErr = ErrLocked // a live lock: back off and fetch again
			g.stats.lockRetries.Add(1)
			continue
		}
		if s.locked() {
			g.stats.takeovers.Add(1)
		}
		if !s.locked() && s.Edge.dropped(m) {
			return Result{Dropped: true}, nil
		}
		// m's rows are built on the state the queued mutations leave
		// (as drive builds them): refused now, not found too long while
		// the lock is held, which would wedge the edge.
		state := s.Edge
		for _, p := range s.Pending {
			if !state.dropped(&p.M) {
				state = state.apply(&p.M)
			}
		}
		if !state.dropped(m) {
			after := state.apply(m)
			if em := buildEdgeMutate(l, m.Src, m.Tgt, &state, &after, ver+1); checkRows(m, &em) != nil {
				return Result{}, checkRows(m, &em)
			}
		}
		// Trying → Locked: set the pending mutation and lockedAt by CAS. An
		// expired lock is taken over: its mutations stay queued before
		// ours and are rolled forward first.
		next := s
		next.Pending = append(append([]pending(nil), s.Pending...), pending{M: *m, Ver: ver + 1})
		next.LockedAt = g.nowMS()
		won, err := g.casSnapshot(ctx, row, ver, &next)
		if err != nil {
			lastErr = err
			continue // the outcome is unknown: the fetch tells
		}
		if !won {
			lastErr = ErrLocked
			g.stats.lockRetries.Add(1)
			continue
		}
		res, err := g.finish(ctx, l, m, row, next, ver+1)
		if errors.Is(err, errTakenOver) {
			lastErr = err
			continue // the taker settles it: fetch until it has
		}
		return res, err
	}
	if errors.Is(lastErr, ErrLocked) {
		return Result{}, fmt.Errorf("%w: %s -%s-> %s", ErrLocked, m.Src, m.Label, m.Tgt)
	}
	return Result{}, lastErr
}

// finish runs a held lock to Done and reports m's outcome.
func (g *Graph) finish(ctx context.Context, l *Label, m *Mutation, row []byte, s snapshot, ver uint64) (Result, error) {
	done, err := g.drive(ctx, l, m.Src, m.Tgt, row, s, ver)
	if err != nil {
		return Result{}, err
	}
	if r, ok := done.settled(m.ID); ok {
		return Result{Dropped: r.Dropped, Existed: r.Existed}, nil
	}
	return Result{}, fmt.Errorf("graph: mutation %x not settled by its own lock", m.ID)
}

// drive takes the snapshot s, locked at version ver by this caller, from
// Locked to Done: each queued mutation's EdgeMutate, built once from the
// state before it, is fired (only its calls are re-sent on failure, never
// rebuilt), then the lock is released by CAS with the merged snapshot.
// It returns the released snapshot. src and tgt are the edge's (a pending
// mutation's own were decoded from JSON, which keeps only UTF-8).
func (g *Graph) drive(ctx context.Context, l *Label, src, tgt string, row []byte, s snapshot, ver uint64) (snapshot, error) {
	state := s.Edge
	rec := append([]recent(nil), s.Recent...)
	for _, p := range s.Pending {
		if state.dropped(&p.M) {
			rec = append(rec, recent{ID: p.M.ID, Dropped: true})
			continue
		}
		after := state.apply(&p.M)
		em := buildEdgeMutate(l, src, tgt, &state, &after, p.Ver)
		if err := g.fire(ctx, em); err != nil {
			return snapshot{}, err // Locked stays: a later mutation takes it over
		}
		rec = append(rec, recent{ID: p.M.ID, Existed: state.live()})
		state = after
	}
	if len(rec) > maxRecent {
		rec = rec[len(rec)-maxRecent:]
	}
	// Updated → Done: the merged snapshot, without pending or lockedAt.
	done := snapshot{Edge: state, Recent: rec}
	for range g.opts.MaxRetries {
		won, err := g.casSnapshot(ctx, row, ver, &done)
		if err == nil && won {
			return done, nil
		}
		// Lost, or unknown: if the newest snapshot is ours released, done.
		cur, cver, ferr := g.fetch(ctx, row)
		if ferr == nil && cver > ver && allSettled(&cur, s.Pending) {
			return cur, nil
		}
		if ferr == nil && cver > ver {
			// Taken over (our lock expired meanwhile): the new holder
			// rolls our mutations forward.
			return snapshot{}, errTakenOver
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
// presence changes. The CAS holds only while neither the presence cell nor
// the count has a newer version than read; a flip already applied (or
// overtaken by a newer one) changes nothing.
func (g *Graph) flipDegree(ctx context.Context, op degreeOp) error {
	q := presencePref + op.other
	for range 64 {
		r, err := g.store.ReadRow(ctx, op.row, storage.Filter{
			{Family: Family, Qualifier: q, Limit: 1},
			{Family: Family, Qualifier: qualCount, Limit: 1},
		})
		if err != nil {
			return err
		}
		var pTS, cTS uint64
		var was bool
		var count int64
		for _, c := range r.Cells {
			switch c.Qualifier {
			case q:
				pTS, was = c.TS, len(c.Value) == 1 && c.Value[0] == 1
			case qualCount:
				cTS, count = c.TS, decodeCount(c.Value)
			}
		}
		if pTS >= op.ver {
			return nil // applied, or overtaken
		}
		pred := storage.Filter{{Family: Family, Qualifier: q, Time: storage.From(pTS + 1), Limit: 1}}
		muts := []storage.Mutation{
			storage.SetCell(Family, q, op.ver, presence(op.present)),
			{Kind: storage.DeleteCells, Family: Family, Qualifier: q, Time: storage.Before(op.ver)},
		}
		if was != op.present {
			if op.present {
				count++
			} else {
				count--
			}
			pred = append(pred, storage.Selector{Family: Family, Qualifier: qualCount, Time: storage.From(cTS + 1), Limit: 1})
			muts = append(muts,
				storage.SetCell(Family, qualCount, cTS+1, encodeCount(count)),
				storage.Mutation{Kind: storage.DeleteCells, Family: Family, Qualifier: qualCount, Time: storage.Before(cTS + 1)})
		}
		// A nonce over a server; safe in any order anyway: a late copy
		// finds the presence cell (or the count) newer than it read.
		changed, err := g.store.CheckAndMutate(ctx, op.row, pred, nil, muts)
		if err != nil || !changed {
			return err
		}
	}
	return fmt.Errorf("graph: degree row %q kept changing", op.row)
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
