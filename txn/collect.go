package txn

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/seed-992972ee/percolator/storage"
)

// FamilyFence holds a row's GC fence: one cell (fenceQual) whose newest
// version is the safe point the row was last collected at. Every prewrite
// fails on a fence version at or above its start_ts (doc.go, "Garbage
// collection").
const FamilyFence = "gcfence"

const fenceQual = "fence"

// fenceSince selects a fence version at or after ts: the prewrite's
// condition.
func fenceSince(ts uint64) storage.Selector {
	return storage.Selector{Family: FamilyFence, Qualifier: fenceQual, Time: storage.From(ts)}
}

// ErrRowLocked: CollectRow left a row alone because a live owner's
// unexpired lock below the safe point is in it; collect it later.
var ErrRowLocked = errors.New("txn: row holds a live lock below the safe point")

// Collected is what a collection of one row removed.
type Collected struct {
	// Versions are the write records and data versions removed.
	Versions int
	// Bytes are their values' bytes.
	Bytes int
}

// CollectRow removes from row what no snapshot at or above the safe point
// sp reads (doc.go, "Garbage collection"): of each column, the write
// records at or below sp but the newest commit record of a put or delete,
// every rollback and lock-only record at or below sp, and the data
// versions the removed records point to, or that no record points to,
// below sp. It first resolves the locks below sp whose owners are dead or
// expired; a live owner's lock makes it leave the row (ErrRowLocked). The
// removal is one CheckAndMutate that applies only while the row holds no
// lock below sp, and raises the row's fence to sp, so a prewrite below sp
// can never land on what it removed. The newest commit record at or below
// sp goes too when it is a delete of a column no observer watches; an
// observed column keeps it until every observer of the column that keeps
// an ack has acked past it (ProcessedPast): before, its removal would
// make an unprocessed delete look clean to the observers' dirty check.
func (c *Client) CollectRow(ctx context.Context, row []byte, sp uint64) (Collected, error) {
	return c.collectRow(ctx, row, sp, false)
}

// collectRow is CollectRow; dry, it resolves nothing and removes nothing,
// and returns what it would remove (ErrRowLocked for any lock below sp).
func (c *Client) collectRow(ctx context.Context, row []byte, sp uint64, dry bool) (Collected, error) {
	ctx = c.operation(ctx)
	for range maxResolveSteps {
		r, err := c.read(ctx, row, storage.Filter{
			{Family: FamilyLock, AllQualifiers: true, Time: storage.Before(sp)},
			{Family: FamilyWrite, AllQualifiers: true},
			{Family: FamilyData, AllQualifiers: true, Time: storage.Before(sp)},
			{Family: FamilyPush, AllQualifiers: true, Time: storage.Before(sp)},
		})
		if err != nil {
			return Collected{}, err
		}
		locked := false
		for _, cell := range r.Cells {
			if cell.Family != FamilyLock {
				continue
			}
			locked = true
			if dry {
				return Collected{}, ErrRowLocked
			}
			switch err := c.resolveCell(ctx, row, cell.Qualifier, cell.TS, cell.Value); {
			case errors.Is(err, errLocked):
				return Collected{}, ErrRowLocked
			case err != nil:
				return Collected{}, err
			}
		}
		if locked {
			continue // resolved: read the row again
		}
		observed, err := c.observedNow(ctx)
		if err != nil {
			return Collected{}, err
		}
		var processed processedFunc
		if a, ok := c.observers.(AckReader); ok && observed != nil {
			processed = a.ProcessedPast
		}
		muts, got, err := collectMutations(r.Cells, sp, observed, processed)
		if err != nil || len(muts) == 0 || dry {
			return got, err
		}
		anyLock := storage.Filter{{Family: FamilyLock, AllQualifiers: true, Time: storage.Before(sp)}}
		muts = append(muts,
			storage.SetCell(FamilyFence, fenceQual, sp, nil),
			storage.Mutation{Kind: storage.DeleteCells, Family: FamilyFence, Qualifier: fenceQual, Time: storage.Before(sp)})
		// Safe in any order: a late copy deletes only versions below sp
		// that a later collection would delete too, and raises the fence
		// to sp, which a later collection has raised past already.
		// Deferred where the store has one ordered log: a removal lost
		// with its fence in a crash leaves the row's history whole, which
		// the next pass collects again (doc.go, "Durability").
		matched, err := c.casIndexed(ctx, row, nil, anyLock, anyLock, nil, muts, true)
		if err != nil {
			return Collected{}, err
		}
		if !matched {
			return got, nil
		}
		// A lock landed since the read: resolve it, or leave the row.
	}
	return Collected{}, ErrRowLocked
}

// observedNow is the observer registry as stored now (nil: none).
func (c *Client) observedNow(ctx context.Context) (Observed, error) {
	if c.observers == nil {
		return nil, nil
	}
	obs, _, err := c.observers.Refresh(ctx)
	return obs, err
}

// processedFunc is AckReader.ProcessedPast.
type processedFunc func(column string, ts uint64, value func(column string) ([]byte, bool)) bool

// collectMutations returns the deletions of what no snapshot at or above
// sp reads, given the row's write records and its data versions below sp
// (doc.go, "What goes, per cell"). Records above sp are kept, and so is
// the data they point to (a transaction that started below sp and
// committed above it). A lock-only record (OpLock) at or below sp goes as
// a rollback record does: it points at no data, so it is never the
// newest commit record kept, and the fence raised with it refuses the
// prewrites below sp it would have refused. The newest record at or below
// sp, when a delete, goes too if no observer watches its column, or if
// processed says every observer's ack is past it.
//
// Of each column and family, the removed versions below the lowest kept
// one go in one delete of the time range [0, newest of them + 1), which
// holds only versions this read saw (nothing new lands there: a version
// below sp needs a lock below sp, which the caller's condition refuses,
// or is a rollback record the raised fence covers); the rest one by one.
func collectMutations(cells []storage.Cell, sp uint64, observed Observed, processed processedFunc) ([]storage.Mutation, Collected, error) {
	writes := map[string][]storage.Cell{}
	data := map[string][]storage.Cell{}
	var muts []storage.Mutation
	var got Collected
	for _, cell := range cells {
		switch cell.Family {
		case FamilyWrite:
			writes[cell.Qualifier] = append(writes[cell.Qualifier], cell)
		case FamilyData:
			data[cell.Qualifier] = append(data[cell.Qualifier], cell)
		case FamilyPush:
			// A push below sp is of a lock below it, which the call's
			// condition says is gone: its transaction is decided, and
			// the push asks nothing of anyone any more.
			got.Versions++
			muts = append(muts, storage.DeleteCell(FamilyPush, cell.Qualifier, cell.TS))
		}
	}
	for _, ws := range writes {
		sort.Slice(ws, func(i, j int) bool { return ws[i].TS > ws[j].TS })
	}
	// value is the newest committed value at or below sp of a column of
	// the row, from what was read (inline in its record, or in its data
	// version, which is below sp).
	value := func(col string) ([]byte, bool) {
		for _, cell := range writes[col] {
			if cell.TS > sp {
				continue
			}
			w, err := DecodeWrite(cell.Value)
			switch {
			case err != nil || w.Op == OpDelete:
				return nil, false
			case w.Op != OpPut:
				continue
			case w.Inline:
				return w.Value, true
			}
			for _, d := range data[col] {
				if d.TS == w.StartTS {
					return d.Value, true
				}
			}
			return nil, false
		}
		return nil, false
	}
	cols := make([]string, 0, len(writes)+len(data))
	for col := range writes {
		cols = append(cols, col)
	}
	for col := range data {
		if _, ok := writes[col]; !ok {
			cols = append(cols, col)
		}
	}
	sort.Strings(cols)
	for _, col := range cols {
		ws := writes[col]
		keepData := map[uint64]bool{} // data versions kept records point to
		kept := false                 // the newest commit record at or below sp
		var removed []bool            // of ws, by index
		for _, cell := range ws {
			w, err := DecodeWrite(cell.Value)
			if err != nil {
				return nil, Collected{}, fmt.Errorf("txn: collecting %q/%s at %d: %w", cell.Qualifier, col, cell.TS, err)
			}
			rm := false
			switch {
			case cell.TS > sp:
				keepData[w.StartTS] = w.Op != OpRollback
			case w.Op == OpRollback || w.Op == OpLock:
				rm = true // the fence raised with it does its work
			case !kept && w.Op == OpDelete && (observed == nil || !observed(col) ||
				processed != nil && processed(col, cell.TS, value)):
				kept, rm = true, true // nothing below it is read, nor it
			case !kept:
				kept, keepData[w.StartTS] = true, true
			default:
				rm = true
			}
			removed = append(removed, rm)
		}
		muts = appendRemovals(muts, &got, FamilyWrite, ws, removed)
		ds := data[col]
		sort.Slice(ds, func(i, j int) bool { return ds[i].TS > ds[j].TS })
		removed = removed[:0]
		for _, cell := range ds {
			removed = append(removed, !keepData[cell.TS])
		}
		muts = appendRemovals(muts, &got, FamilyData, ds, removed)
	}
	return muts, got, nil
}

// appendRemovals appends the deletions of the versions of one column and
// family (cells, newest first) that removed marks, counting them in got:
// those below the lowest kept version in one time-range delete, the
// others one by one.
func appendRemovals(muts []storage.Mutation, got *Collected, family string, cells []storage.Cell, removed []bool) []storage.Mutation {
	low := len(cells) // cells[low:] are all removed
	for low > 0 && removed[low-1] {
		low--
	}
	for i, cell := range cells {
		if removed[i] {
			got.Versions++
			got.Bytes += len(cell.Value)
			if i < low {
				muts = append(muts, storage.DeleteCell(family, cell.Qualifier, cell.TS))
			}
		}
	}
	switch n := len(cells) - low; {
	case n == 1:
		muts = append(muts, storage.DeleteCell(family, cells[low].Qualifier, cells[low].TS))
	case n > 1:
		muts = append(muts, storage.Mutation{
			Kind: storage.DeleteCells, Family: family, Qualifier: cells[low].Qualifier,
			Time: storage.Before(cells[low].TS + 1),
		})
	}
	return muts
}

// CollectBelow resolves every lock below the safe point sp it may (doc.go,
// "Locks first"), then collects every row of the store from start on
// below sp (CollectRow), in row order, and returns what it removed,
// the rows it left for a live lock, and where it stopped: nil when it
// went through the whole keyspace, else the row to resume at (its context
// ended, or a row failed). A row is visited only if it has two write
// records at or below sp, a rollback record, a lock-only record or a
// delete: a row written once and never since costs a scan step.
func (c *Client) CollectBelow(ctx context.Context, sp uint64, start []byte) (got Collected, skipped int, next []byte, err error) {
	if err := c.resolveBelow(ctx, sp); err != nil {
		return got, 0, start, err
	}
	got, _, skipped, next, err = c.collectBelow(ctx, sp, start, false, nil, nil)
	return got, skipped, next, err
}

// collectBelow is CollectBelow, dry or not, of the rows mine selects (nil:
// every row), telling progress of each batch of rows; it also returns the
// rows visited.
func (c *Client) collectBelow(ctx context.Context, sp uint64, start []byte, dry bool, mine func(row []byte) bool, progress func(rows int, got Collected, next []byte)) (got Collected, visited, skipped int, next []byte, err error) {
	const batch = 256
	f := storage.Filter{{Family: FamilyWrite, AllQualifiers: true, Time: storage.Before(sp + 1), Limit: 2}}
	for {
		var rows [][]byte
		seen := 0
		err := c.store.Scan(ctx, start, []byte(storage.ReservedPrefix), f, batch, func(r storage.Row) bool {
			seen++
			collectable := len(r.Cells) > 1 || hasOp(r.Cells, OpRollback) || hasOp(r.Cells, OpLock) || hasOp(r.Cells, OpDelete)
			if collectable && (mine == nil || mine(r.Key)) {
				rows = append(rows, r.Key)
			}
			start = append(append([]byte{}, r.Key...), 0) // the row after it
			return true
		})
		if err != nil {
			return got, visited, skipped, start, err
		}
		visited += seen
		gs, errs := c.collectRows(ctx, rows, sp, dry)
		for i := range rows {
			switch err := errs[i]; {
			case errors.Is(err, ErrRowLocked):
				skipped++
			case err != nil:
				return got, visited, skipped, rows[i], err
			}
			got.Versions += gs[i].Versions
			got.Bytes += gs[i].Bytes
		}
		if seen < batch {
			if progress != nil {
				progress(visited, got, nil)
			}
			return got, visited, skipped, nil, nil
		}
		if progress != nil {
			progress(visited, got, start)
		}
		if err := ctx.Err(); err != nil {
			return got, visited, skipped, start, err
		}
	}
}

// collectParallel is how many rows of a batch a pass collects at once on
// a store it reaches over the network (each row one or two round trips);
// on a store this client owns (Indexed) it collects one at a time.
const collectParallel = 8

// collectRows collects rows (collectRow), several at once where the store
// is remote, and returns each row's result in order. Rows are independent:
// each removal stands on its own row's predicate and fence.
func (c *Client) collectRows(ctx context.Context, rows [][]byte, sp uint64, dry bool) ([]Collected, []error) {
	gs, errs := make([]Collected, len(rows)), make([]error, len(rows))
	if c.Indexed() || len(rows) < 2 {
		for i, row := range rows {
			if gs[i], errs[i] = c.collectRow(ctx, row, sp, dry); errs[i] != nil && !errors.Is(errs[i], ErrRowLocked) {
				break // the caller stops at this row
			}
		}
		return gs, errs
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, collectParallel)
	for i, row := range rows {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			gs[i], errs[i] = c.collectRow(ctx, row, sp, dry)
		})
	}
	wg.Wait()
	return gs, errs
}

// hasOp reports whether cells (write records) hold a record of op.
func hasOp(cells []storage.Cell, op Op) bool {
	for _, cell := range cells {
		if writeOp(cell.Value) == op {
			return true
		}
	}
	return false
}

// resolveBelow resolves every lock in the store below sp whose
// transaction is decided or whose owner is dead or expired, as readers
// resolve them: the first phase of a pass (doc.go, "Locks first"). A
// live owner's lock stays; its transaction commits above sp.
func (c *Client) resolveBelow(ctx context.Context, sp uint64) error {
	ctx = c.operation(ctx)
	type lockAt struct {
		row, col []byte
		ts       uint64
		value    []byte
	}
	var start []byte
	const batch = 256
	f := storage.Filter{{Family: FamilyLock, AllQualifiers: true, Time: storage.Before(sp)}}
	for {
		var locks []lockAt
		seen := 0
		err := c.store.Scan(ctx, start, []byte(storage.ReservedPrefix), f, batch, func(r storage.Row) bool {
			seen++
			for _, cell := range r.Cells {
				locks = append(locks, lockAt{row: r.Key, col: []byte(cell.Qualifier), ts: cell.TS, value: cell.Value})
			}
			start = append(append([]byte{}, r.Key...), 0)
			return true
		})
		if err != nil {
			return err
		}
		for _, l := range locks {
			if err := c.resolveCell(ctx, l.row, string(l.col), l.ts, l.value); err != nil && !errors.Is(err, errLocked) {
				return fmt.Errorf("txn: resolving the lock of %q/%s at %d before collecting: %w", l.row, l.col, l.ts, err)
			}
		}
		if seen < batch {
			return nil
		}
	}
}
