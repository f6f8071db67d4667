package observer

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seed-992972ee/percolator/internal/ctxwait"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// scanner is one scanner thread.
type scanner struct {
	f     *Framework
	opts  WorkerOptions
	part  *partitioner // nil without a Membership
	owner string
	rng   *rand.Rand
	id    int

	passes   int    // passes begun
	epoch    uint64 // Partition.epoch of its last pass
	wantFull bool   // the next pass covers the whole keyspace
}

// randomKey is a random position in the row space below the rows
// reserved for the system (storage.ReservedPrefix), where no scan may
// begin: a server refuses one, and the pass would fail (one pass in
// 65,536 did).
func (s *scanner) randomKey() []byte {
	for {
		k := binary.BigEndian.AppendUint64(nil, s.rng.Uint64())
		if !storage.IsReserved(k) {
			return k
		}
	}
}

// run scans from a random position to the end of the keyspace (or of
// its worker's range) and around from its start, jumping to a new random
// position when it runs into a row another scanner holds (the paper's fix
// for scanners clumping like buses), and backing off when a whole pass
// finds nothing.
func (s *scanner) run(ctx context.Context, idle *idleTracker) error {
	wait, failWait, failing := time.Millisecond, outageFirstWait, false
	for ctx.Err() == nil {
		epoch := idle.passStart()
		spans, full := s.plan()
		worked, pending, err := s.pass(ctx, spans, idle)
		switch {
		case err != nil && (fatal(err) || ctx.Err() != nil):
			return err
		case err != nil: // an outage (outage.go): back off and scan again
			if failing {
				s.f.outageFailedAgain()
			} else {
				s.f.outageBegan(err)
			}
			failing = true
			if !retryPass(ctx, &failWait) {
				return nil
			}
			continue
		case failing:
			s.f.outageEnded()
			failing, failWait = false, outageFirstWait
		}
		s.f.maybeCompact(ctx, s.opts)
		// A drain ends only after a pass over the whole keyspace found
		// nothing: one over a range leaves the rest unchecked.
		s.wantFull = s.opts.Drain && !full && !worked && !pending
		if worked {
			wait = time.Millisecond
			continue
		}
		if !pending && full {
			idle.idlePass(s.id, epoch)
		}
		if err := ctxwait.Sleep(ctx, wait); err != nil {
			return nil
		}
		wait = min(2*wait, s.opts.MaxIdle)
	}
	return nil
}

// plan chooses the next pass: over the worker's range when partitioned,
// else — and on a member-list change, every FallbackEvery-th pass, and at
// a drain's end — over the whole keyspace (full). Both begin at a random
// place and wrap around.
func (s *scanner) plan() (spans [][2][]byte, full bool) {
	s.passes++
	p := s.part.current()
	switch {
	case p == nil || p.Self < 0:
	case p.epoch != s.epoch: // the others may still scan the old ranges
		s.epoch = p.epoch
	case s.wantFull:
	case s.opts.FallbackEvery > 0 && s.passes%s.opts.FallbackEvery == 0:
	default:
		start, end := p.Range(p.Self)
		s.f.rangePasses.Add(1)
		s.f.stats.add("", statRangePasses, 1)
		return around(p.origin(s.rng, p.Self), start, end), false
	}
	s.f.fullPasses.Add(1)
	s.f.stats.add("", statFullPasses, 1)
	return around(s.randomKey(), nil, nil), true
}

// pass scans spans in order once, or until it jumps. worked reports that
// it ran an observer or cleared a notification; pending, that it left
// runnable work (a failed run waiting to be retried, a row another
// scanner held).
func (s *scanner) pass(ctx context.Context, spans [][2][]byte, idle *idleTracker) (worked, pending bool, err error) {
	for _, span := range spans {
		pos, end := span[0], span[1]
		for {
			rows, err := s.f.scanNotify(ctx, pos, end, s.opts.Batch)
			var set *regSet
			if err == nil {
				// After the scan: a registration whose backfill wrote any
				// notification the scan returned shows here (the version is
				// raised before the backfill), so no notification is
				// cleared for an observer this process does not know.
				set, err = s.f.reg.refresh(ctx)
			}
			if err != nil {
				if ctx.Err() != nil {
					return worked, true, nil
				}
				return worked, true, fmt.Errorf("observer: scanning notifications: %w", err)
			}
			for _, r := range rows {
				did, left, jump, err := s.row(ctx, r, set)
				if err != nil {
					return worked, true, err
				}
				if did {
					worked = true
					idle.worked()
				}
				pending = pending || left
				if jump {
					s.f.stats.add("", statJumps, 1)
					return worked, true, nil
				}
			}
			if len(rows) < s.opts.Batch {
				break
			}
			pos = append(bytes.Clone(rows[len(rows)-1].Key), 0)
		}
	}
	return worked, pending, nil
}

// notified is a data row and its notifications.
type notified struct {
	Key []byte
	ns  []txn.Notification
}

// scanNotify reads up to limit notified rows of [start, end), reading the
// notify keyspace only, and counts what finding them cost.
func (f *Framework) scanNotify(ctx context.Context, start, end []byte, limit int) ([]notified, error) {
	var rows []notified
	collect := func(row []byte, ns []txn.Notification) bool {
		rows = append(rows, notified{row, ns})
		return true
	}
	began := f.opts.Now()
	visited, err := f.notify.Scan(ctx, start, end, limit, collect)
	f.stats.add("", statScanKeys, int64(visited))
	f.stats.add("", statScans, 1)
	f.stats.add("", statScanRows, int64(len(rows)))
	f.stats.add("", statScanMicros, f.opts.Now().Sub(began).Microseconds())
	return rows, err
}

// maybeCompact compacts the notify keyspace, on a store that keeps
// deletion markers, once enough notifications were cleared since the last
// compaction (WorkerOptions.CompactAfter). One scanner compacts at a time;
// the others go on scanning. A failed compaction is logged, not fatal:
// it costs only scan time.
func (f *Framework) maybeCompact(ctx context.Context, opts WorkerOptions) {
	if !f.notify.Compactable() || opts.CompactAfter < 0 {
		return
	}
	n := f.clears.Load()
	if n < int64(opts.CompactAfter) || !f.compacting.CompareAndSwap(false, true) {
		return
	}
	defer f.compacting.Store(false)
	f.clears.Add(-n)
	if _, err := f.notify.Compact(ctx); err != nil {
		if ctx.Err() == nil {
			f.opts.Logger.Warn("observer: compacting the notify keyspace", "err", err)
		}
		f.clears.Add(n) // try again later
		return
	}
	f.stats.add("", statCompactions, 1)
}

// row processes the notifications of one row under the advisory lock,
// with the registry set: columns whose observers all have code here run
// them; columns no observer watches any more are cleared; the others are
// left for a process that has their code. left reports runnable work left
// behind; jump, that another scanner holds the row.
func (s *scanner) row(ctx context.Context, r notified, set *regSet) (did, left, jump bool, err error) {
	cols := set.byCol
	runnable := false
	for _, n := range r.ns {
		if regs := cols[n.Column]; len(regs) == 0 || hasCode(regs) {
			runnable = true
			break
		}
	}
	if !runnable {
		return false, false, false, nil
	}
	unlock, held, err := s.f.locker.TryLock(ctx, string(r.Key), s.owner)
	if err != nil {
		return false, true, false, err
	}
	if held {
		return false, true, true, nil
	}
	defer unlock()
	byCol := map[string][]uint64{}
	ahead := map[string][]uint64{} // versions written ahead of their prewrite
	var order []string
	for _, n := range r.ns {
		if _, ok := byCol[n.Column]; !ok {
			order = append(order, n.Column)
		}
		byCol[n.Column] = append(byCol[n.Column], n.TS)
		if n.Ahead {
			ahead[n.Column] = append(ahead[n.Column], n.TS)
		}
	}
	for _, col := range order {
		regs := cols[col]
		if len(regs) > 0 && !hasCode(regs) {
			continue
		}
		d, l, err := s.f.cell(ctx, r.Key, col, regs, byCol[col], ahead[col])
		if err != nil {
			return did, true, false, err
		}
		did, left = did || d, left || l
	}
	return did, left, false, nil
}

func hasCode(regs []*registration) bool {
	for _, g := range regs {
		if g.fn == nil {
			return false
		}
	}
	return true
}
