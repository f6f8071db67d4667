package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
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
	r, err := q.store.ReadRow(ctx, cursorRow(name), storage.Filter{{Family: Family, Qualifier: qualCursor, Limit: 1}})
	if err != nil {
		return err
	}
	var p sharedCursor
	var version uint64
	if len(r.Cells) > 0 {
		if json.Unmarshal(r.Cells[0].Value, &p) != nil {
			return fmt.Errorf("queue %s: corrupt cursor", name)
		}
		version = r.Cells[0].TS
	}
	c.mu.Lock()
	if !c.loaded || p.Key > c.local {
		c.local, c.loaded = p.Key, true
	}
	c.nextTurn = q.clock.local().Add(q.opts.CatchUp/2 + rand.N(q.opts.CatchUp/4+1))
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
	var es []entry
	err = q.scan(ctx, entryRow(name, p.Key), entryRow(name, end), catchUpBatch, func(r storage.Row) bool {
		if e, ok := parseEntry(name, r); ok {
			es = append(es, e)
		}
		return true
	})
	if err != nil {
		return err
	}
	next := end
	if len(es) == catchUpBatch {
		next = es[len(es)-1].key + "\x00"
	}
	for _, e := range es {
		_, class, err := q.resolve(ctx, name, e, lo, false)
		if err != nil {
			return err
		}
		if class == stale {
			if err := q.deleteEntry(ctx, name, e.key); err != nil {
				return err
			}
			continue
		}
		next = e.key // the item's current entry, or one that could not be fenced off yet: the cursor stops here
		break
	}
	b, _ := json.Marshal(sharedCursor{Key: next, At: lo})
	lost, err := q.store.CheckAndMutate(ctx, cursorRow(name),
		storage.Filter{{Family: Family, Qualifier: qualCursor, Time: storage.From(version + 1), Limit: 1}}, nil,
		[]storage.Mutation{
			storage.SetCell(Family, qualCursor, version+1, b),
			{Kind: storage.DeleteCells, Family: Family, Qualifier: qualCursor, Time: storage.Before(version + 1)},
		})
	if err != nil || lost {
		return nil // another process advanced it first (or the next turn will)
	}
	c.mu.Lock()
	if next < c.local {
		c.local = next // an entry this process's cursor passed while it was written
	}
	c.mu.Unlock()
	return nil
}
