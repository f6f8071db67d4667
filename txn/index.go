package txn

import (
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/seed-992972ee/percolator/storage"
)

// cellIndex is the single owner's in-memory view of the lock keyspace and
// of each cell's latest commit_ts (DESIGN.md, "one process owns the
// store"). It is changed only by the store's ApplyHook, which runs under the
// row latch after each write is applied (before its sync), so per row it
// changes in the same order as the store; the one exception, the readers'
// pushes of primary locks (push), also changes under the row latch, and
// is never written to the store. Readers consult it
// without the latch.
//
// Why it is safe to read without the latch (the argument the read path
// relies on):
//
//  1. A lock is added after its write but before the prewrite call
//     returns. A reader that misses it has a start_ts older than the
//     writer's commit_ts (which is requested only after the prewrite
//     returns; oracle invariant 1), so it must not see that write anyway.
//  2. A commit writes the cell's commit record before it deletes the
//     cell's lock, in one call whose mutations the hook applies in order
//     (commitMutations, rollForward, rollbackMutations all put the write
//     record first; TestCommitMutationOrder checks it). The two changes
//     are separate critical sections of the cell's shard, so a reader
//     between them sees both the lock and the new latest commit_ts: it
//     resolves the lock, finds it gone, and reads again. Were the order
//     reversed, a reader between them would see neither, and read the old
//     value: the order, not one critical section, is what 2 rests on.
//  3. A reader that fills a missing latest commit_ts from the store does so
//     only if no commit touched the shard since it looked (the shard's
//     generation), so it cannot install a stale value; the store's read
//     returns no durable write before it is durable (storage.Store), so it
//     cannot install one a crash could take back either.
//  4. The hook installs an incoming commit record as a cell's latest only
//     when it is provably the newest: above a known latest, or, with
//     none known, above every write record of the cell (the knowledge
//     conflicts decides by: above base, the shard's floor and the cell's
//     written mark). A re-sent or late duplicate of an old commit record (a
//     secondary commit retried after a timeout) may arrive after the
//     cell's entry was dropped and a newer commit was written: it must not
//     become the latest, or readers would return the overwritten value.
//
// Safe for concurrent use.
type cellIndex struct {
	seed   maphash.Seed
	shards []indexShard
	// base is a timestamp the oracle issued after the hook was installed
	// (MaxUint64 until the first transaction offers its start_ts). Every
	// write record the hook did not see was written before, so its
	// timestamp, issued before it was written, is below base.
	base atomic.Uint64
	// fenced is the highest GC fence version the hook has applied, in any
	// row. A fence written before the hook is below base (its version is
	// a safe point, below a timestamp issued before it was written).
	fenced atomic.Uint64
	// maxPerShard bounds each shard's map of cells; a full map
	// is dropped whole (entries are only an optimization; readers refill
	// them).
	maxPerShard int
}

// maxLatestPerShard is the default bound of a shard's maps.
const maxLatestPerShard = 1 << 14

type indexShard struct {
	mu sync.RWMutex
	// gen counts changes to latest; Invariant: bumped under mu on every
	// write of a put's or delete's commit record, and every write-record
	// delete, in this shard.
	gen   uint64
	locks map[string][]uint64 // cell key → start_ts of its locks
	// cells holds what the index knows of each cell's write records, in
	// one map so that a commit looks its cell up once (cellEntry). A
	// full map is dropped whole and floor raised to the largest written
	// timestamp it held.
	floor uint64
	cells map[string]cellEntry
	// pushes holds the pushes of this shard's primary locks on a store
	// the client owns (doc.go, "Reads through locks"): for a lock, the
	// highest reader start_ts that pushed it. Invariant: an entry exists
	// only while its lock does (set under the row latch where the lock
	// is, removed by the hook with the lock); nil until the first push.
	pushes map[lockID]uint64
}

// cellEntry is the index's knowledge of one cell's write records.
type cellEntry struct {
	// latest is the commit_ts of the cell's latest put or delete (0:
	// none), where readers read, valid when known: rollback and
	// lock-only (OpLock) records are no version of the value, and never
	// latest.
	latest uint64
	known  bool
	// written answers "has the cell a write record (commit, lock-only or
	// rollback) at or after ts?" for every ts above the shard's floor
	// and the index's base. Invariant: each write record of a cell of
	// the shard that the hook saw, with ts > floor, has written >= ts in
	// the cell's entry.
	written uint64
}

// lockID names one lock: its cell's key and its start_ts.
type lockID struct {
	key string
	ts  uint64
}

func newCellIndex(shards, maxPerShard int) *cellIndex {
	if maxPerShard <= 0 {
		maxPerShard = maxLatestPerShard
	}
	ix := &cellIndex{seed: maphash.MakeSeed(), shards: make([]indexShard, shards), maxPerShard: maxPerShard}
	for i := range ix.shards {
		ix.shards[i].locks = make(map[string][]uint64)
		ix.shards[i].cells = make(map[string]cellEntry)
	}
	ix.base.Store(math.MaxUint64)
	return ix
}

// offerBase sets base to ts, a timestamp the oracle issued after the hook
// was installed, unless base is set already.
func (ix *cellIndex) offerBase(ts uint64) {
	if ix.base.Load() == math.MaxUint64 {
		ix.base.CompareAndSwap(math.MaxUint64, ts)
	}
}

// conflicts decides a prewrite's predicate over rw's cells (a lock at a
// start_ts other than except, a GC fence at or after ts, a write record
// at or after ts) where the index can: decided is false when a fence may
// be there or the write records are not known (ts not above base and a
// cell's shard's floor). Exact only under rw's row latch
// (storage.Conditioned). Each cell's lock and write records are looked
// up under one hold of its shard.
func (ix *cellIndex) conflicts(rw *rowWrites, except, ts uint64) (matched, decided bool) {
	written, known := false, ts > ix.base.Load()
	for _, m := range rw.muts {
		key := cellKey(rw.row, m.col)
		s := ix.shard(key)
		s.mu.RLock()
		locks := s.locks[key]
		other := len(locks) > 1 || (len(locks) == 1 && locks[0] != except)
		if known && !written {
			known = ts > s.floor
			written = known && s.cells[key].written >= ts
		}
		s.mu.RUnlock()
		if other {
			return true, true
		}
	}
	switch {
	case ix.fencedSince(ts):
		return false, false // the store reads the fence
	case written:
		return true, true
	}
	return false, known
}

// fencedSince reports whether some row may hold a GC fence at or after
// ts: the index then cannot decide a prewrite's predicate (conflicts
// declines below base anyway).
func (ix *cellIndex) fencedSince(ts uint64) bool { return ts <= ix.fenced.Load() }

// cellKey names a cell in the index. Columns never contain NUL
// (validateColumn), so the key is unambiguous.
func cellKey(row []byte, col string) string {
	b := make([]byte, 0, len(col)+1+len(row))
	b = append(b, col...)
	b = append(b, 0)
	b = append(b, row...)
	return string(b)
}

func (ix *cellIndex) shard(key string) *indexShard {
	return &ix.shards[maphash.String(ix.seed, key)%uint64(len(ix.shards))]
}

// indexView is what a reader learns about a cell in one look.
type indexView struct {
	lockTS []uint64 // locks with start_ts < the reader's start_ts
	latest uint64   // latest commit_ts, valid when known
	known  bool
	gen    uint64
	shard  *indexShard
	key    string
}

func (ix *cellIndex) view(row []byte, col string, startTS uint64) indexView {
	key := cellKey(row, col)
	s := ix.shard(key)
	v := indexView{shard: s, key: key}
	s.mu.RLock()
	for _, ts := range s.locks[key] {
		if ts < startTS {
			v.lockTS = append(v.lockTS, ts)
		}
	}
	e := s.cells[key]
	v.latest, v.known = e.latest, e.known
	v.gen = s.gen
	s.mu.RUnlock()
	return v
}

// hasLock reports whether the cell has a lock at ts. Exact only under the
// row's latch.
func (ix *cellIndex) hasLock(row []byte, col string, ts uint64) bool {
	key := cellKey(row, col)
	s := ix.shard(key)
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Contains(s.locks[key], ts)
}

// push asks the transaction whose lock of the cell is at startTS to
// commit above ts: it raises the lock's push to ts and reports true if
// that lock stands, else changes nothing and reports false. Called only
// under the row's latch, where the lock is known exactly.
func (ix *cellIndex) push(row []byte, col string, startTS, ts uint64) bool {
	key := cellKey(row, col)
	s := ix.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.locks[key], startTS) {
		return false
	}
	if s.pushes == nil {
		s.pushes = make(map[lockID]uint64)
	}
	id := lockID{key, startTS}
	s.pushes[id] = max(s.pushes[id], ts)
	return true
}

// pushedFrom reports whether a push of the cell's lock at startTS stands
// at or above ts. Exact under the row's latch; without it, a push it
// reports stood a moment ago, and stands still while the lock does.
func (ix *cellIndex) pushedFrom(row []byte, col string, startTS, ts uint64) bool {
	key := cellKey(row, col)
	s := ix.shard(key)
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.pushes[lockID{key, startTS}]
	return ok && p >= ts
}

// fill records a latest commit_ts read from the store, unless a commit
// touched the shard since v was taken.
func (ix *cellIndex) fill(v *indexView, latest uint64) {
	s := v.shard
	s.mu.Lock()
	if s.gen == v.gen {
		e, ok := s.cells[v.key]
		e.latest, e.known = latest, true
		ix.putLocked(s, v.key, e, ok)
	}
	s.mu.Unlock()
}

// apply is the store's ApplyHook.
func (ix *cellIndex) apply(row []byte, muts []storage.Mutation) {
	for i := range muts {
		m := &muts[i]
		switch {
		case m.Kind == storage.DeleteRow:
			ix.dropRow(row)
		case m.Family == FamilyLock:
			ix.applyLock(row, m)
		case m.Family == FamilyWrite:
			ix.applyWrite(row, m)
		case m.Family == FamilyFence && m.Kind == storage.Put:
			for old := ix.fenced.Load(); m.TS > old && !ix.fenced.CompareAndSwap(old, m.TS); old = ix.fenced.Load() {
			}
		}
	}
}

func (ix *cellIndex) applyLock(row []byte, m *storage.Mutation) {
	key := cellKey(row, m.Qualifier)
	s := ix.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.locks[key]
	if m.Kind == storage.Put {
		for _, t := range ts {
			if t == m.TS {
				return // a retried or late prewrite
			}
		}
		s.locks[key] = append(ts, m.TS)
		return
	}
	kept := ts[:0]
	for _, t := range ts {
		if !m.Time.Contains(t) {
			kept = append(kept, t)
		} else if s.pushes != nil {
			delete(s.pushes, lockID{key, t}) // the pushes go with their lock
		}
	}
	if len(kept) == 0 {
		delete(s.locks, key)
	} else {
		s.locks[key] = kept
	}
}

func (ix *cellIndex) applyWrite(row []byte, m *storage.Mutation) {
	key := cellKey(row, m.Qualifier)
	s := ix.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.cells[key]
	old := e
	put := m.Kind == storage.Put
	// newest: the index knows every write record of the cell above base
	// and the shard's floor, and none of them is above m.TS (argument 4).
	newest := put && m.TS > ix.base.Load() && m.TS > s.floor && m.TS >= e.written
	if put && m.TS > s.floor && m.TS > e.written {
		e.written = m.TS
	}
	// A deleted write record stays counted in written: an upper bound
	// costs at most a spurious conflict, never a missed one. A rollback or
	// lock-only record counts there (prewrite conflicts on it) but changes
	// no value: latest and gen stay.
	if !put || valueOp(writeOp(m.Value)) {
		s.gen++
		switch {
		case !put:
			e.latest, e.known = 0, false
		case e.known && m.TS > e.latest:
			e.latest = m.TS
		case !e.known && newest:
			e.latest, e.known = m.TS, true
		}
	}
	if e != old {
		ix.putLocked(s, key, e, ok)
	}
}

// putLocked stores a cell's entry e (existed: the cell had one), first
// dropping the shard's map when a new entry finds it full: the floor
// rises to the largest written timestamp it held, so written's
// invariant holds for the cells it forgets. s.mu is held.
func (ix *cellIndex) putLocked(s *indexShard, key string, e cellEntry, existed bool) {
	if !existed && len(s.cells) >= ix.maxPerShard {
		for _, c := range s.cells {
			s.floor = max(s.floor, c.written)
		}
		clear(s.cells)
	}
	if e.written <= s.floor {
		e.written = 0 // the floor answers for it
	}
	if e == (cellEntry{}) {
		delete(s.cells, key)
		return
	}
	s.cells[key] = e
}

// dropRow forgets every cell of row (a DeleteRow, never issued by the
// protocol itself).
func (ix *cellIndex) dropRow(row []byte) {
	inRow := func(k string) bool { return k[strings.IndexByte(k, 0)+1:] == string(row) }
	for i := range ix.shards {
		s := &ix.shards[i]
		s.mu.Lock()
		s.gen++
		for k := range s.cells {
			if inRow(k) {
				delete(s.cells, k)
			}
		}
		for k := range s.locks {
			if inRow(k) {
				delete(s.locks, k)
			}
		}
		for id := range s.pushes {
			if inRow(id.key) {
				delete(s.pushes, id)
			}
		}
		s.mu.Unlock()
	}
}

// lockCount returns the number of locks indexed (tests and stats).
func (ix *cellIndex) lockCount() int {
	n := 0
	for i := range ix.shards {
		s := &ix.shards[i]
		s.mu.RLock()
		for _, ts := range s.locks {
			n += len(ts)
		}
		s.mu.RUnlock()
	}
	return n
}
