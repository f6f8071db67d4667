package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/bigtable"
	"github.com/seed-992972ee/percolator/txn"
)

// The Bigtable reads figure's count of what a read returns: the cells and
// value bytes a transactional read of one cell gets back from Bigtable,
// against a raw ReadRow of the same cell's newest version (its newest
// write record, which holds the value inline). A row of Bigtable is
// returned cell by cell, each with its qualifier and timestamp, so every
// cell a read does not need is bytes on the wire and work for the
// servers.

// cellCounts is what the reads of a countingStore returned. Safe for
// concurrent use.
type cellCounts struct {
	mu sync.Mutex
	// calls counts ReadRow calls, and Scan calls that returned a
	// counted row; cells and bytes the cells and their value bytes, and
	// lockCells and lockBytes those of the lock family among them.
	calls, cells, bytes, lockCells, lockBytes int
}

func (c *cellCounts) addCall() {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
}

func (c *cellCounts) addRow(r *storage.Row) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range r.Cells {
		n := len(r.Cells[i].Value)
		c.cells++
		c.bytes += n
		if r.Cells[i].Family == txn.FamilyLock {
			c.lockCells++
			c.lockBytes += n
		}
	}
}

// take returns the counts since the last take.
func (c *cellCounts) take() readCost {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := readCost{calls: c.calls, cells: c.cells, bytes: c.bytes, lockCells: c.lockCells, lockBytes: c.lockBytes}
	c.calls, c.cells, c.bytes, c.lockCells, c.lockBytes = 0, 0, 0, 0, 0
	return got
}

// readCost is a cellCounts taken.
type readCost struct{ calls, cells, bytes, lockCells, lockBytes int }

// countingStore is a Bigtable store whose ReadRow and Scan count, in n,
// the cells they return of rows under prefix (the reads of other rows,
// such as the safe point's re-read, are not a cell's). Embedding the
// store forwards every other method, and with them every optional
// capability the store has.
type countingStore struct {
	*bigtable.Store
	prefix []byte
	n      *cellCounts
}

func (s countingStore) counted(row []byte) bool { return bytes.HasPrefix(row, s.prefix) }

// ReadRow implements storage.Store.
func (s countingStore) ReadRow(ctx context.Context, row []byte, filter storage.Filter) (storage.Row, error) {
	r, err := s.Store.ReadRow(ctx, row, filter)
	if s.counted(row) {
		s.n.addCall()
		s.n.addRow(&r)
	}
	return r, err
}

// Scan implements storage.Store.
func (s countingStore) Scan(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) error {
	_, err := s.ScanCounted(ctx, start, end, filter, limit, fn)
	return err
}

// ScanCounted implements storage.Counted.
func (s countingStore) ScanCounted(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) (uint64, error) {
	called := false
	return s.Store.ScanCounted(ctx, start, end, filter, limit, func(r storage.Row) bool {
		if s.counted(r.Key) {
			if !called {
				called = true
				s.n.addCall()
			}
			s.n.addRow(&r)
		}
		return fn(r)
	})
}

// The histories of the cells measured. A history cell has historyPuts
// committed values, each of the even-numbered ones but the last followed
// by a rollback record and a lock-only (OpLock) record: more write
// records than a read fetched in one page before this figure existed
// (8), its newest a put. A buried cell has the same history under
// buriedRounds more pairs of them, which a read must pass.
const (
	historyPuts  = 5
	buriedRounds = 2
)

// readCellGroup is one kind of cell the figure reads.
type readCellGroup struct {
	name string
	rows []string
	// records is the write records a read must fetch at least: the
	// newest put, and the rollback and lock-only records above it.
	records int
}

// bigtableReadCells measures, for n cells of each kind (fresh, with
// history, buried), the cells and bytes Bigtable returns to a
// transactional read of the cell (a read-only transaction's Get)
// against a raw ReadRow of the cell's newest version, and prints one
// line per kind with its target.
func (b *runner) bigtableReadCells(ctx context.Context, r *Report, n int) error {
	counts := &cellCounts{}
	prefix := fmt.Appendf(nil, "readcells/%d/", time.Now().UnixNano())
	wrap := func(st *bigtable.Store) storage.Store { return countingStore{st, prefix, counts} }
	db, st, closeAll, err := b.openBigtablePair(ctx, &rpcCounter{n: map[string]int{}}, wrap)
	if err != nil {
		return err
	}
	defer closeAll()
	raw := countingStore{st, prefix, counts}
	groups, want, err := b.loadReadCells(ctx, db, string(prefix), n)
	if err != nil {
		return err
	}
	for _, g := range groups {
		txnCost, rawCost, err := measureReadCells(ctx, db, raw, counts, g.rows, want)
		if err != nil {
			return err
		}
		printReadCells(r, g, txnCost, rawCost, len(g.rows))
	}
	return nil
}

// loadReadCells writes the cells of the three groups and returns them
// with the value every cell's read must return.
func (b *runner) loadReadCells(ctx context.Context, db *percolator.DB, prefix string, n int) ([]readCellGroup, []byte, error) {
	rows := func(kind string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%s/%05d", prefix, kind, i)
		}
		return out
	}
	fresh, history, buried := rows("fresh"), rows("history"), rows("buried")
	value := func(v int) []byte { return bytes.Repeat([]byte{byte('a' + v)}, b.opts.ValueSize) }
	if err := setAll(ctx, db, fresh, value(historyPuts-1)); err != nil {
		return nil, nil, err
	}
	aged := append(append([]string(nil), history...), buried...)
	aux := prefix + "aux/" // outside every group: rows read by no measurement
	for v := range historyPuts {
		if err := setAll(ctx, db, aged, value(v)); err != nil {
			return nil, nil, err
		}
		if v%2 == 1 || v == historyPuts-1 {
			continue
		}
		if err := skipRecords(ctx, db, aged, aux+"aux"); err != nil {
			return nil, nil, err
		}
	}
	for range buriedRounds {
		if err := skipRecords(ctx, db, buried, aux+"aux"); err != nil {
			return nil, nil, err
		}
	}
	groups := []readCellGroup{
		{name: "fresh cells (1 version)", rows: fresh, records: 1},
		{name: fmt.Sprintf("cells with history (%d write records, %d rollback or lock-only; newest a put)", historyRecords(), historyRecords()-historyPuts), rows: history, records: 1},
		{name: fmt.Sprintf("buried cells (that history under %d newer rollback and lock-only records)", 2*buriedRounds), rows: buried, records: 2*buriedRounds + 1},
	}
	return groups, value(historyPuts - 1), nil
}

// historyRecords is the write records of a history cell.
func historyRecords() int {
	n := historyPuts
	for v := range historyPuts {
		if v%2 == 0 && v != historyPuts-1 {
			n += 2
		}
	}
	return n
}

// setAll writes value to column v of rows, in one transaction.
func setAll(ctx context.Context, db *percolator.DB, rows []string, value []byte) error {
	return db.Update(ctx, func(tx *percolator.Txn) error {
		for _, row := range rows {
			if err := tx.Set(row, "v", value); err != nil {
				return err
			}
		}
		return nil
	})
}

// skipRecords leaves two write records a read skips on each of rows: a
// rollback record (a transaction whose primary is the row prewrites it,
// then conflicts on a row another transaction wrote since its start, and
// rolls the row back), then a lock-only record (a transaction reads the
// row for update and writes another).
func skipRecords(ctx context.Context, db *percolator.DB, rows []string, aux string) error {
	for _, row := range rows {
		loser, err := db.Begin(ctx)
		if err != nil {
			return err
		}
		if err := setAll(ctx, db, []string{aux}, nil); err != nil {
			return err
		}
		_ = loser.Set(row, "v", []byte("rolled back"))
		_ = loser.Set(aux, "v", nil)
		if err := loser.Commit(ctx); !errors.Is(err, percolator.ErrConflict) {
			return fmt.Errorf("%w: a transaction meant to conflict on %q returned %v", ErrCheck, aux, err)
		}
	}
	return db.Update(ctx, func(tx *percolator.Txn) error {
		if err := tx.Set(aux, "v", nil); err != nil { // the primary: a put
			return err
		}
		for _, row := range rows {
			if _, err := tx.GetForUpdate(ctx, row, "v"); err != nil {
				return err
			}
		}
		return nil
	})
}

// measureReadCells reads each row once in a read-only transaction, then
// once raw (its newest write record), one at a time, and returns what
// each side's reads returned in all.
func measureReadCells(ctx context.Context, db *percolator.DB, raw countingStore, counts *cellCounts, rows []string, want []byte) (txnCost, rawCost readCost, err error) {
	counts.take()
	for _, row := range rows {
		var got []byte
		if err := db.View(ctx, func(tx *percolator.Txn) (err error) {
			got, err = tx.Get(ctx, row, "v")
			return err
		}); err != nil {
			return readCost{}, readCost{}, err
		}
		if !bytes.Equal(got, want) {
			return readCost{}, readCost{}, fmt.Errorf("%w: read %q of %s, want %q", ErrCheck, got, row, want)
		}
	}
	txnCost = counts.take()
	newest := storage.Filter{{Family: txn.FamilyWrite, Qualifier: "v", Limit: 1}}
	for _, row := range rows {
		if _, err := raw.ReadRow(ctx, []byte(row), newest); err != nil {
			return readCost{}, readCost{}, err
		}
	}
	return txnCost, counts.take(), nil
}

// printReadCells prints one group's line. Cells whose newest record is
// a put are held to the raw read plus the lock check's cells; a buried
// cell, whose read must pass records a raw read of the newest version
// never sees, to twice the records it must fetch.
func printReadCells(r *Report, g readCellGroup, t, raw readCost, n int) {
	per := func(v int) float64 { return float64(v) / float64(n) }
	line := fmt.Sprintf("bigtable read cells: %s: a transactional read %.2f ReadRows, %.2f cells, %.1f value bytes (the lock check's %.2f cells, %.1f bytes) vs a raw ReadRow of the newest version %.2f cells, %.1f bytes",
		g.name, per(t.calls), per(t.cells), per(t.bytes), per(t.lockCells), per(t.lockBytes), per(raw.cells), per(raw.bytes))
	cells, byteRatio := show(per(t.cells)/per(raw.cells+t.lockCells), 2), show(per(t.bytes)/per(raw.bytes+t.lockBytes), 2)
	if g.records == 1 {
		ok := cells.atMost(1) && byteRatio.atMost(1)
		r.printf("%s: ratio %sx cells, %sx bytes to the raw read's plus the lock check's (target <= 1x: %s)",
			line, cells, byteRatio, r.mark("bigtable read cells: "+g.name+" <= raw + lock check", ok))
		return
	}
	passed := show(per(t.cells-t.lockCells)/float64(g.records), 2)
	r.printf("%s: %sx cells to the %d write records it must fetch (target <= 2x: %s)",
		line, passed, g.records, r.mark("bigtable read cells: "+g.name+" <= 2x the records fetched", passed.atMost(2)))
}

// emulatorNote is what a line printing a rate adds on the emulator.
func (b *runner) emulatorNote() string {
	if !b.opts.BigtableEmulator {
		return ""
	}
	return fmt.Sprintf("; rates of the emulator (bttest) on %d cores, client and emulator in one process, not of Bigtable", runtime.NumCPU())
}
