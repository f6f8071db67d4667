package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// cursor is this process's position in a queue's index: entries below it
// were resolved when this process last looked, or are found by the
// shared cursor's catch-up.
type cursor struct {
	mu       sync.Mutex
	local    string // entry key to scan from
	loaded   bool
	nextTurn time.Time
}

func (q *Queue) cursorOf(name string) *cursor {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := q.cursors[name]
	if c == nil {
		c = &cursor{}
		q.cursors[name] = c
	}
	return c
}

func (c *cursor) get() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.local
}

func (c *cursor) set(k string) {
	c.mu.Lock()
	c.local = k
	c.mu.Unlock()
}

// sharedCursor is the cursor row's value: every index entry below Key
// was resolved, as judged at store time At.
type sharedCursor struct {
	Key string `json:"key"`
	At  int64  `json:"at"`
}

// catchUpBatch bounds the entries one catch-up reads.
const catchUpBatch = 1024

// turn keeps the shared cursor: a process reads it when it starts and
// every CatchUp/2, and when no process has advanced it for CatchUp, this
// one does (by CheckAndMutate on its version, so one at a time): it reads
// the entries from it up to twice Grace before the store's time, deletes
// the stale ones and fences off the pending ones (so that they become
// stale), and stops at the first item's current entry, which this
// process then looks at next. An entry written late, behind the
// processes' own cursors, is found so within Grace + CatchUp. The
// cursor's advance is conditioned on its version, so a late copy of it
// changes nothing once another advanced it.
func (q *Queue) turn(ctx context.Context, name string, c *cursor) error {
	c.mu.Lock()
	due := !c.loaded || !q.clock.local().Before(c.nextTurn)
	c.mu.Unlock()
	if !due {
		return nil
	}
	p, version, err := q.readCursor(ctx, name)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if !c.loaded || p.Key > c.local {
		c.local, c.loaded = p.Key, true
	}
	c.nextTurn = q.clock.local().Add(q.opts.CatchUp/2 + q.jitter(q.opts.CatchUp/4+1))
	c.mu.Unlock()
	lo, _, err := q.clock.bounds(ctx)
	if err != nil {
		return err
	}
	if p.At+q.opts.CatchUp.Milliseconds() > lo {
		return nil
	}
	end := fmt.Sprintf("%016x", uint64(max(0, lo-2*q.opts.Grace.Milliseconds())))
	if p.Key >= end {
		return nil
	}
	next, err := q.catchUp(ctx, name, p.Key, end, lo)
	if err != nil || !q.advanceCursor(ctx, name, version, sharedCursor{Key: next, At: lo}) {
		return err
	}
	c.mu.Lock()
	if next < c.local {
		c.local = next // an entry this process's cursor passed while it was written
	}
	c.mu.Unlock()
	return nil
}

// readCursor reads queue name's shared cursor and its version (0: none
// yet).
func (q *Queue) readCursor(ctx context.Context, name string) (sharedCursor, uint64, error) {
	var p sharedCursor
	r, err := q.store.ReadRow(ctx, cursorRow(name), storage.Filter{{Family: Family, Qualifier: qualCursor, Limit: 1}})
	if err != nil || len(r.Cells) == 0 {
		return p, 0, err
	}
	if json.Unmarshal(r.Cells[0].Value, &p) != nil {
		return p, 0, fmt.Errorf("queue %s: corrupt cursor", name)
	}
	return p, r.Cells[0].TS, nil
}

// catchUp resolves the entries from key from up to end (lo: the low
// bound of the store's time now): it deletes the stale ones, fencing off
// the pending ones first, and stops at the first it cannot resolve. It
// returns where the shared cursor may move: that entry, or past every
// entry read.
func (q *Queue) catchUp(ctx context.Context, name, from, end string, lo int64) (string, error) {
	es, err := q.entries(ctx, name, from, end, catchUpBatch)
	if err != nil {
		return "", err
	}
	next := end
	if len(es) == catchUpBatch {
		next = es[len(es)-1].key + "\x00"
	}
	for _, e := range es {
		_, class, err := q.resolve(ctx, name, e, lo, false)
		if err != nil {
			return "", err
		}
		if class != stale {
			return e.key, nil // the item's current entry, or one that could not be fenced off yet: the cursor stops here
		}
		if err := q.deleteEntry(ctx, name, e.key); err != nil {
			return "", err
		}
	}
	return next, nil
}

// advanceCursor writes the shared cursor p at the version after the one
// read, and reports whether it did. The write is conditioned on no
// version above the one read, so a late copy changes nothing once
// another process advanced it.
func (q *Queue) advanceCursor(ctx context.Context, name string, version uint64, p sharedCursor) bool {
	b, _ := json.Marshal(p)
	lost, err := q.store.CheckAndMutate(ctx, cursorRow(name),
		storage.Filter{{Family: Family, Qualifier: qualCursor, Time: storage.From(version + 1), Limit: 1}}, nil,
		[]storage.Mutation{
			storage.SetCell(Family, qualCursor, version+1, b),
			{Kind: storage.DeleteCells, Family: Family, Qualifier: qualCursor, Time: storage.Before(version + 1)},
		})
	return err == nil && !lost // else another process advanced it first (or the next turn will)
}
