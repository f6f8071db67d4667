package txn

import (
	"context"
	"errors"
	"fmt"

	"github.com/seed-992972ee/percolator/internal/mutant"
	"github.com/seed-992972ee/percolator/storage"
)

// errRetryNow asks the read driver to try again at once: a lock it found
// was resolved, or vanished between the index and the store.
var errRetryNow = errors.New("txn: retry read")

// A read asks for the newest write record below its snapshot alone
// (firstPage), in the same call as its lock check: that record is the
// one it needs unless it is a rollback or lock-only record, which a read
// skips. Bigtable returns a row cell by cell, and a commit record carries
// its value inline, so each further record is a cell and up to InlineSize
// bytes that the read would drop: a read of a cell with history that
// fetched a page of eight records returned eight cells where a raw read
// of the newest version returns one.
//
// Only when every record it got is skipped does the read fetch more, in
// pages that double what it has fetched (1, then 2, 4, 8, ...; at most
// maxPage at a time): a read that must pass k skipped records makes
// about log2(k+2) calls and gets back fewer than twice the k+1 records it
// needs. A page of one record each time would fetch no more than needed
// but make k+1 calls; a fixed page of eight would return up to seven
// records too many to every read that skips one. The newest records
// below a snapshot are rollbacks or lock-only records only on a cell
// whose last transactions aborted or read it for update, and the
// collector removes such records below the safe point; so the extra call
// is rare, and a cell that has many of them is the one the doubling is
// for.
const (
	firstPage = 1
	maxPage   = 64
)

// get reads (row, col) at snapshot ts, waiting on or resolving every lock
// with start_ts < ts (invariant 2): one operation (Options.Operation).
func (c *Client) get(ctx context.Context, ts uint64, row []byte, col string) ([]byte, error) {
	ctx = c.operation(ctx)
	var v []byte
	err := c.untilSettled(ctx, func() (err error) {
		v, err = c.getOnce(ctx, ts, row, col)
		return err
	})
	if err == nil || ctx.Err() == nil {
		// A value, its absence, or a record found missing may be what a
		// collection left: judged only now that the read returned.
		if serr := c.checkSnapshot(ctx, ts); serr != nil {
			return nil, serr
		}
	}
	return v, err
}

// retryNowFree is how many errRetryNow a read retries at once before it
// backs off: a resolved lock usually needs one more look, but a lock that
// keeps reappearing (a store that has not caught up) must not spin.
const retryNowFree = 3

// untilSettled drives a read step until it returns something other than
// errRetryNow (try again, at once the first few times, then backing off)
// or errLocked (wait for a live lock, backing off). It returns ctx's error
// once ctx ends.
func (c *Client) untilSettled(ctx context.Context, step func() error) error {
	for attempt, again := 0, 0; ; {
		err := step()
		switch {
		case err == errRetryNow && again < retryNowFree:
			again++
			if err := ctx.Err(); err != nil {
				return err
			}
			continue
		case err == errLocked:
			c.stats.lockWaits.Add(1)
		case err != errRetryNow:
			return err
		}
		if err := c.backoff(ctx, attempt); err != nil {
			return err
		}
		attempt++
	}
}

// getOnce is one step of get: it returns the value, ErrNotFound,
// errLocked (wait for a live lock), or errRetryNow.
func (c *Client) getOnce(ctx context.Context, ts uint64, row []byte, col string) ([]byte, error) {
	if c.index != nil {
		return c.getIndexed(ctx, ts, row, col)
	}
	w, _, found, err := c.visibleCommit(ctx, ts, row, col)
	if err != nil || !found {
		return nil, orNotFound(err)
	}
	return c.value(ctx, row, col, &w)
}

// visibleCommit is one read step without the index: the newest commit
// record of a put or delete of (row, col) below ts and its commit_ts, once
// no lock older than ts is left; errLocked or errRetryNow as getOnce.
func (c *Client) visibleCommit(ctx context.Context, ts uint64, row []byte, col string) (Write, uint64, bool, error) {
	r, err := c.read(ctx, row, visibleFilter(col, ts))
	if err != nil {
		return Write{}, 0, false, err
	}
	return c.visibleIn(ctx, ts, row, col, r.Cells)
}

// visibleFilter is what visibleCommit reads of (row, col) at snapshot ts:
// the locks below ts, and the newest write record below it (commitFrom
// pages on past rollback and lock-only records).
func visibleFilter(col string, ts uint64) storage.Filter {
	return storage.Filter{
		{Family: FamilyLock, Qualifier: col, Time: storage.Before(ts)},
		{Family: FamilyWrite, Qualifier: col, Time: storage.Before(ts), Limit: firstPage},
	}
}

// visibleIn is visibleCommit on cells read through visibleFilter.
func (c *Client) visibleIn(ctx context.Context, ts uint64, row []byte, col string, cells []storage.Cell) (Write, uint64, bool, error) {
	for i := range cells {
		if cell := &cells[i]; cell.Family == FamilyLock {
			if mutant.On(mutant.SkipLockCheck) {
				continue // breaks invariant 2: reads past the lock
			}
			err := c.resolveForRead(ctx, ts, row, col, cell.TS, cell.Value)
			if err == errPushed {
				continue // its transaction commits above ts, if at all
			}
			return Write{}, 0, false, resolved(err)
		}
	}
	return c.commitFrom(ctx, row, col, ts, cells, firstPage)
}

// getIndexed is getOnce with the lock check and the write lookup served by
// the in-memory index: a lock check costs a map lookup, and a cell whose
// latest commit is known costs one exact-key read.
func (c *Client) getIndexed(ctx context.Context, ts uint64, row []byte, col string) ([]byte, error) {
	if c.awaitOnePhase != nil {
		// A one-phase commit of the row in flight may be below ts: the
		// index learns of it only once its write returns.
		if err := c.awaitOnePhase.AwaitOnePhase(ctx, row); err != nil {
			return nil, err
		}
	}
	v := c.index.view(row, col, ts)
	// The mutant skip-lock-check breaks invariant 2: it reads past the lock.
	for _, lockTS := range v.lockTS {
		if mutant.On(mutant.SkipLockCheck) {
			break
		}
		lr, err := c.read(ctx, row, storage.Filter{{Family: FamilyLock, Qualifier: col, Time: storage.At(lockTS)}})
		if err != nil {
			return nil, err
		}
		if len(lr.Cells) == 0 {
			return nil, errRetryNow // removed; the hook has not caught up
		}
		if err := c.resolveForRead(ctx, ts, row, col, lockTS, lr.Cells[0].Value); err != errPushed {
			return nil, resolved(err)
		}
		// Pushed: its transaction commits above ts, if at all.
	}
	if !v.known {
		latest, err := c.latestCommitTS(ctx, row, col)
		if err != nil {
			return nil, err
		}
		c.index.fill(&v, latest)
		v.latest = latest
	}
	if v.latest == 0 {
		return nil, ErrNotFound
	}
	if v.latest >= ts {
		w, _, found, err := c.newestCommit(ctx, row, col, ts, nil)
		if err != nil || !found {
			return nil, orNotFound(err)
		}
		return c.value(ctx, row, col, &w)
	}
	r, err := c.read(ctx, row, storage.Filter{{Family: FamilyWrite, Qualifier: col, Time: storage.At(v.latest)}})
	if err != nil {
		return nil, err
	}
	if len(r.Cells) == 0 {
		return nil, fmt.Errorf("txn: commit record of %q/%s at %d missing: %w", row, col, v.latest, errCorrupt)
	}
	w, err := DecodeWrite(r.Cells[0].Value)
	if err != nil {
		return nil, err
	}
	c.sawCommit(v.latest) // a read returns it (stable.go)
	return c.value(ctx, row, col, &w)
}

// resolved turns a successful resolution into a request to read again.
func resolved(err error) error {
	if err == nil {
		return errRetryNow
	}
	return err
}

func orNotFound(err error) error {
	if err == nil {
		return ErrNotFound
	}
	return err
}

// latestCommitTS returns the commit_ts of the cell's newest put or
// delete, or 0 if it has none.
func (c *Client) latestCommitTS(ctx context.Context, row []byte, col string) (uint64, error) {
	_, ts, _, err := c.newestCommit(ctx, row, col, storage.MaxTimestamp+1, nil)
	return ts, err
}

// newestCommit finds the newest commit record of a put or delete of
// (row, col) with commit_ts < before, skipping rollback and lock-only
// (OpLock) records, which are no version of the value. first, if not nil,
// holds what a read of the write records of (row, col) below before
// already returned, newest first, whatever its Limit (a read that
// returned none passes an empty slice, not nil: there are none), and
// perhaps other cells of the row, which it ignores; nil, it reads them
// itself. It reads on, a page at a time (firstPage), only while every
// record it has is skipped.
func (c *Client) newestCommit(ctx context.Context, row []byte, col string, before uint64, first []storage.Cell) (Write, uint64, bool, error) {
	if first == nil {
		return c.commitFrom(ctx, row, col, before, nil, 0)
	}
	return c.commitFrom(ctx, row, col, before, first, -1)
}

// commitFrom is newestCommit from cells, which a read of the write
// records below before with Limit asked returned: asked 0, nothing was
// read yet; asked < 0, the Limit is not known, and a read that returned
// only skipped records may have left more.
func (c *Client) commitFrom(ctx context.Context, row []byte, col string, before uint64, cells []storage.Cell, asked int) (Write, uint64, bool, error) {
	fetched := 0
	for {
		if asked == 0 {
			asked = min(fetched+1, maxPage)
			r, err := c.read(ctx, row, storage.Filter{{Family: FamilyWrite, Qualifier: col, Time: storage.Before(before), Limit: asked}})
			if err != nil {
				return Write{}, 0, false, err
			}
			cells = r.Cells
		}
		w, ts, n, err := firstValue(cells, col)
		if err != nil || n < 0 {
			if err == nil {
				c.sawCommit(ts) // a read returns it (stable.go)
			}
			return w, ts, err == nil, err
		}
		if n == 0 || n < asked {
			return Write{}, 0, false, nil // no older record
		}
		fetched += n
		before, asked = ts, 0
	}
}

// firstValue returns the first record of a put or delete among the write
// cells of col in cells (newest first) and its timestamp, with n = -1;
// or, when there is none, the number n of those cells and the oldest
// one's timestamp.
func firstValue(cells []storage.Cell, col string) (w Write, ts uint64, n int, err error) {
	for i := range cells {
		if cells[i].Family != FamilyWrite || cells[i].Qualifier != col {
			continue
		}
		n++
		if w, err = DecodeWrite(cells[i].Value); err != nil {
			return Write{}, 0, 0, err
		}
		ts = cells[i].TS
		if valueOp(w.Op) {
			return w, ts, -1, nil
		}
	}
	return Write{}, ts, n, nil
}

// value returns the value a commit record points at.
func (c *Client) value(ctx context.Context, row []byte, col string, w *Write) ([]byte, error) {
	switch {
	case w.Op == OpDelete:
		return nil, ErrNotFound
	case w.Inline:
		return append([]byte(nil), w.Value...), nil
	}
	r, err := c.read(ctx, row, storage.Filter{{Family: FamilyData, Qualifier: col, Time: storage.At(w.StartTS)}})
	if err != nil {
		return nil, err
	}
	if len(r.Cells) == 0 {
		return nil, fmt.Errorf("txn: data of %q/%s at %d missing: %w", row, col, w.StartTS, errCorrupt)
	}
	return r.Cells[0].Value, nil
}
