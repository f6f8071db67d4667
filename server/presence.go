package server

import (
	"bytes"
	"context"
	"hash/maphash"
	"slices"
	"sync"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// presence is the server's in-memory index of the cells of the lock family
// (DESIGN: a store that one process owns may keep the locks in memory, so
// the mandatory lock check costs a map lookup). Every transactional read
// asks for a cell's locks beside its write records; most cells have none,
// but on Pebble a column whose locks were all erased still costs the read
// a walk over their deletion markers until a compaction drops them. A
// ReadRow selector on the lock family that the index says selects nothing
// is dropped before the store is read, so is one of a conditional
// write's predicate (under the row's latch, where the index is exact for
// the row: pebble.Store.SetPruner), and a Scan of the lock family
// alone (a reader resolving the locks of a range first) reads only the
// rows the index says hold one (rowsIn); a malformed read is never
// pruned, so the store validates every read alike (invariant 3).
//
// Invariants:
//
//  1. The index is changed only by the store's apply hook, under the row's
//     latch, after the write is visible and durable, in the order of the
//     row's writes; it was loaded from the lock family after the hook was
//     installed (at Open, before serving). A cell in the store is
//     therefore in the index from the moment its write returns to its
//     caller; a cell the index holds may already be gone (a deletion whose
//     hook has not run), which only costs a read.
//  2. Dropping a selector is safe for a read at any start_ts T: a lock the
//     index cannot see yet belongs to a prewrite still in flight (its
//     CheckAndMutate has not returned), whose transaction cannot have a
//     commit timestamp yet, so none below T: the read may order itself
//     before that prewrite, as a read that reached the store a moment
//     earlier would have. An async prewrite in flight has taken its
//     timestamp, which may be below T, under the rows' latches with
//     their stripes marked; so a read first waits for the marks of its
//     row (a scan: of every row) and only then asks the index
//     (storage.go, readRow and Scan), as the store's own reads do.
//  3. A read the store would refuse is passed to it whole: bad input gets
//     InvalidArgument from the store, whatever family it names, and never
//     an empty answer from the index.
//
// Concurrency: shards of the (row, qualifier) → timestamps map, each
// under its own lock.
type presence struct {
	family string
	seed   maphash.Seed
	shards [64]struct {
		sync.RWMutex
		m map[string]map[string][]uint64 // row → qualifier → timestamps, sorted
	}
}

func newPresence(family string) *presence {
	p := &presence{family: family, seed: maphash.MakeSeed()}
	for i := range p.shards {
		p.shards[i].m = map[string]map[string][]uint64{}
	}
	return p
}

func (p *presence) shard(row []byte) int {
	return int(maphash.Bytes(p.seed, row) % uint64(len(p.shards)))
}

// apply is the store's apply hook.
func (p *presence) apply(row []byte, ms []storage.Mutation) {
	var sh *struct {
		sync.RWMutex
		m map[string]map[string][]uint64
	}
	for i := range ms {
		m := &ms[i]
		if m.Kind != storage.DeleteRow && m.Family != p.family {
			continue
		}
		if sh == nil {
			sh = &p.shards[p.shard(row)]
			sh.Lock()
			defer sh.Unlock()
		}
		cols := sh.m[string(row)]
		switch m.Kind {
		case storage.DeleteRow:
			delete(sh.m, string(row))
			continue
		case storage.Put:
			if cols == nil {
				cols = map[string][]uint64{}
				sh.m[string(row)] = cols
			}
			ts := cols[m.Qualifier]
			if i, found := slices.BinarySearch(ts, m.TS); !found {
				cols[m.Qualifier] = slices.Insert(ts, i, m.TS)
			}
		case storage.DeleteCells:
			ts := slices.DeleteFunc(cols[m.Qualifier], m.Time.Contains)
			if len(ts) == 0 {
				delete(cols, m.Qualifier)
			} else {
				cols[m.Qualifier] = ts
			}
		}
		if len(cols) == 0 {
			delete(sh.m, string(row))
		}
	}
}

// load adds every cell of the family in st.
func (p *presence) load(ctx context.Context, st storage.Store) error {
	return st.Scan(ctx, nil, nil, storage.Filter{{Family: p.family, AllQualifiers: true}}, 0, func(r storage.Row) bool {
		ms := make([]storage.Mutation, len(r.Cells))
		for i, c := range r.Cells {
			ms[i] = storage.SetCell(p.family, c.Qualifier, c.TS, nil)
		}
		p.apply(r.Key, ms)
		return true
	})
}

// selects reports whether sel may select a cell of row.
func (p *presence) selects(row []byte, sel *storage.Selector) bool {
	sh := &p.shards[p.shard(row)]
	sh.RLock()
	defer sh.RUnlock()
	cols := sh.m[string(row)]
	if sel.AllQualifiers {
		for _, ts := range cols {
			if anyIn(ts, sel.Time) {
				return true
			}
		}
		return false
	}
	return anyIn(cols[sel.Qualifier], sel.Time)
}

func anyIn(ts []uint64, tr storage.TimeRange) bool {
	i, _ := slices.BinarySearch(ts, tr.Start)
	return i < len(ts) && (tr.End == 0 || ts[i] < tr.End)
}

// prune returns filter without its selectors of the indexed family that
// select nothing in row (filter itself when it drops none). A read the
// store would refuse (storage.ValidateRow, storage.ValidateFilter: what
// storage.CheckRead checks beside the context) is returned whole, so that
// the store refuses it: dropping a malformed selector, or answering a
// read of malformed selectors alone with no cells, would turn bad input
// into OK.
func (p *presence) prune(row []byte, filter storage.Filter) storage.Filter {
	if storage.ValidateRow(row) != nil || storage.ValidateFilter(filter) != nil {
		return filter
	}
	drop := -1
	for i := range filter {
		if filter[i].Family == p.family && !p.selects(row, &filter[i]) {
			drop = i
			break
		}
	}
	if drop < 0 {
		return filter
	}
	out := make(storage.Filter, 0, len(filter)-1)
	out = append(out, filter[:drop]...)
	for i := drop + 1; i < len(filter); i++ {
		if filter[i].Family != p.family || p.selects(row, &filter[i]) {
			out = append(out, filter[i])
		}
	}
	return out
}

// lockFamily is the family the server indexes: the protocol's locks.
const lockFamily = txn.FamilyLock

// rowsIn returns, in key order, the rows in [start, end) (end nil: to
// the last) where filter, whose selectors are all of the indexed family,
// may select a cell; ok is false when the index cannot answer for filter
// (another family, or a malformed filter or range, which the store must
// see to refuse). A scan of the lock family then reads only those rows:
// the others hold no lock, however many deletion markers of erased ones
// they keep. A lock the index cannot see yet is a prewrite in flight
// (invariant 2): the scan may order itself before it.
func (p *presence) rowsIn(start, end []byte, filter storage.Filter) (rows [][]byte, ok bool) {
	if len(filter) == 0 || storage.ValidateFilter(filter) != nil || storage.CheckScan(start, end, filter, 0) != nil {
		return nil, false
	}
	for i := range filter {
		if filter[i].Family != p.family {
			return nil, false
		}
	}
	for i := range p.shards {
		sh := &p.shards[i]
		sh.RLock()
		for row := range sh.m {
			if row < string(start) || (len(end) > 0 && row >= string(end)) {
				continue
			}
			rows = append(rows, []byte(row))
		}
		sh.RUnlock()
	}
	rows = slices.DeleteFunc(rows, func(row []byte) bool {
		for i := range filter {
			if p.selects(row, &filter[i]) {
				return false
			}
		}
		return true
	})
	slices.SortFunc(rows, func(a, b []byte) int { return bytes.Compare(a, b) })
	return rows, true
}
