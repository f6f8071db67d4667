package observer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// failures tracks failed runs per (row, column, observer) in this
// process: when each may be retried, and how many in a row failed.
type failures struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*failure
}

type failure struct {
	n    int
	next time.Time
}

func failKey(row, col, name string) string { return name + "\x00" + col + "\x00" + row }

// waiting reports that a failed run's back-off has not yet passed.
func (f *failures) waiting(row, col, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	x := f.m[failKey(row, col, name)]
	return x != nil && f.now().Before(x.next)
}

// count returns the failures in a row recorded for (row, col, name).
func (f *failures) count(row, col, name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if x := f.m[failKey(row, col, name)]; x != nil {
		return x.n
	}
	return 0
}

func (f *failures) reset(row, col, name string) {
	f.mu.Lock()
	delete(f.m, failKey(row, col, name))
	f.mu.Unlock()
}

// record counts a failure and returns the failures in a row.
func (f *failures) record(row, col, name string, backoff time.Duration) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := failKey(row, col, name)
	x := f.m[k]
	if x == nil {
		x = &failure{}
		f.m[k] = x
	}
	x.n++
	x.next = f.now().Add(backoff << min(x.n-1, 10))
	return x.n
}

// failed records a failed run of g; at MaxFailures it quarantines the
// notification for g (quarantined reports it), so the scanners stop
// retrying it.
func (f *Framework) failed(ctx context.Context, row, col string, g *registration, runErr error) (quarantined bool, err error) {
	f.stats.add(g.name, statFailures, 1)
	n := f.fails.record(row, col, g.name, f.opts.RetryBackoff)
	f.opts.Logger.Warn("observer: run failed", "observer", g.name, "row", row, "column", col, "failures", n, "err", firstLine(runErr.Error()))
	if n < f.opts.MaxFailures {
		return false, nil
	}
	if err := f.quarantine(ctx, row, col, g, n, runErr); err != nil {
		return false, err
	}
	f.fails.reset(row, col, g.name)
	return true, nil
}

// quarantine sets the notification of (row, col) aside for g, recording
// why.
func (f *Framework) quarantine(ctx context.Context, row, col string, g *registration, failures int, why error) error {
	rec, _ := json.Marshal(quarantineRecord{Failures: failures, Error: why.Error(), WallMS: f.opts.Now().UnixMilli()})
	ts, err := f.oracle.Timestamp(ctx)
	if err != nil {
		return transient(err)
	}
	// A nonce over a server. A late copy lands under a newer record; after
	// a Retry it lists the cell again (a second Retry runs it once more).
	if err := f.store.Mutate(ctx, []byte(row), versioned(FamilyQuarantine, col+":"+g.name, ts, rec)...); err != nil {
		return transient(err)
	}
	f.stats.add(g.name, statQuarantined, 1)
	f.opts.Logger.Error("observer: notification quarantined", "observer", g.name, "row", row, "column", col, "failures", failures)
	return nil
}

// quarantineRecord is a quarantine cell's value. The row, column and
// observer are the cell's own key (row, qualifier column ":" observer):
// row keys are bytes, and JSON would rewrite those that are not UTF-8.
type quarantineRecord struct {
	Failures int    `json:"failures"`
	Error    string `json:"error"`
	WallMS   int64  `json:"wall_ms"`
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Quarantined is a notification set aside after its observer kept
// failing on it.
type Quarantined struct {
	Row      string `json:"row"`
	Column   string `json:"column"`
	Observer string `json:"observer"`
	Failures int    `json:"failures"`
	Error    string `json:"error"`
	WallMS   int64  `json:"wall_ms"`
	version  uint64 // the record's, which Retry removes
}

// Quarantine lists the quarantined notifications, in row order.
func (f *Framework) Quarantine(ctx context.Context) ([]Quarantined, error) {
	var out []Quarantined
	err := f.store.Scan(ctx, nil, nil, storage.Filter{{Family: FamilyQuarantine, AllQualifiers: true, Limit: 1}}, 0, func(r storage.Row) bool {
		for _, c := range r.Cells {
			col, name, ok := strings.Cut(c.Qualifier, ":")
			if !ok {
				continue
			}
			var rec quarantineRecord
			_ = json.Unmarshal(c.Value, &rec)
			out = append(out, Quarantined{Row: string(r.Key), Column: col, Observer: name,
				Failures: rec.Failures, Error: rec.Error, WallMS: rec.WallMS, version: c.TS})
		}
		return true
	})
	return out, err
}

// Retry re-queues quarantined notifications: each is removed from the
// quarantine and its cell notified again, in one atomic row write, so its
// observer runs once more (the others find the cell clean). It returns
// how many were re-queued. progress, if not nil, is called with (0,
// total) once they are listed and with (done, total) after each.
func (f *Framework) Retry(ctx context.Context, progress func(done, total int)) (int, error) {
	qs, err := f.Quarantine(ctx)
	if err != nil {
		return 0, err
	}
	if progress == nil {
		progress = func(int, int) {}
	}
	progress(0, len(qs))
	for i, q := range qs {
		ts, err := f.oracle.Timestamp(ctx)
		if err != nil {
			return i, err
		}
		// A nonce over a server; safe in any order anyway: it removes
		// exactly the record listed, never a newer one of the cell.
		unq := storage.DeleteCell(FamilyQuarantine, q.Column+":"+q.Observer, q.version)
		// A crash between the notification and the record's delete
		// leaves the cell both notified and listed, never neither.
		if err := f.notify.Requeue(ctx, []byte(q.Row), q.Column, ts, unq); err != nil {
			return i, fmt.Errorf("observer: re-queueing %q/%s: %w", q.Row, q.Column, err)
		}
		progress(i+1, len(qs))
	}
	return len(qs), nil
}
