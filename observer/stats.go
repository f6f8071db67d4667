package observer

import (
	"context"
	"encoding/binary"
	"sort"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// Counters kept per observer, in memory and (flushed by Run) in the store.
const (
	statRuns        = "runs"
	statCommits     = "commits"
	statConflicts   = "conflicts"
	statFailures    = "failures"
	statQuarantined = "quarantined"
	// self_triggers: committed runs that wrote the cell they observe.
	statSelfTriggers = "self_triggers"
)

// Counters of the scanners, kept under the observer name "" (stored in the
// row "_scanners").
const (
	statJumps       = "scanner_jumps"
	statScans       = "scans"       // scan calls over the notify keyspace
	statScanRows    = "scan_rows"   // notified rows they found
	statScanKeys    = "scan_keys"   // stored keys they visited (storage.Counted)
	statScanMicros  = "scan_micros" // time spent in them
	statCompactions = "compactions" // of the notify keyspace
	// Partitioned finding (WorkerOptions.Membership): passes over the
	// whole keyspace and over the worker's own range, and the keys the
	// samples of the notify keyspace visited (also in scan_keys).
	statFullPasses  = "full_passes"
	statRangePasses = "range_passes"
	statSampleKeys  = "sample_keys"
)

// scannersRow is the stats row of the scanners' counters.
const scannersRow = "_scanners"

var statNames = []string{statRuns, statCommits, statConflicts, statFailures, statQuarantined, statSelfTriggers}

// statsTable counts since the last flush.
type statsTable struct {
	mu sync.Mutex
	m  map[string]map[string]int64
}

func (s *statsTable) add(name, stat string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]map[string]int64{}
	}
	if s.m[name] == nil {
		s.m[name] = map[string]int64{}
	}
	s.m[name][stat] += n
}

func (s *statsTable) take() map[string]map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.m
	s.m = nil
	return m
}

// flushStats adds the counts since the last flush to the stored counters.
func (f *Framework) flushStats(ctx context.Context) {
	for name, stats := range f.stats.take() {
		row := name
		if row == "" {
			row = scannersRow
		}
		for stat, n := range stats {
			// A nonce over a server; on Bigtable an unknown outcome may
			// count twice (informational counters).
			if _, err := f.store.Increment(ctx, []byte(row), FamilyStats, stat, n); err != nil {
				f.opts.Logger.Warn("observer: storing counters", "err", err)
			}
		}
	}
}

// ObserverStatus is one observer's stored counters.
type ObserverStatus struct {
	Name, Column string
	Weak         bool
	Counts       map[string]int64 // runs, commits, conflicts, failures, quarantined, self_triggers
}

// ColumnStatus is the notification backlog of one observed column.
type ColumnStatus struct {
	Column  string
	Pending int           // notified cells not yet processed
	Oldest  time.Duration // age of the oldest pending notification
}

// Status is what `percolator status` prints.
type Status struct {
	Columns     []ColumnStatus
	Observers   []ObserverStatus
	Quarantined int
	// Scanners is the scanners' counters: scans, scan_rows (notified rows
	// found), scan_keys (stored keys visited finding them, on a
	// storage.Counted store), scan_micros, scanner_jumps, compactions;
	// full_passes, range_passes and sample_keys (partitioned finding).
	Scanners map[string]int64
	// Partitions is the range each live partitioned worker published
	// (WorkerOptions.Membership), sorted by Index; nil when none did.
	Partitions []PartitionStatus `json:",omitempty"`
	// Unowned counts the notified rows that no range in Partitions covers
	// (bounds from samples that differ): the fallback passes find them.
	Unowned int `json:",omitempty"`
}

// PartitionStatus is one partitioned worker's range, as it published it.
type PartitionStatus struct {
	Owner  string // its member identity (the Membership's owner)
	Worker string // the value it registered (its process and run)
	// Index of Of is its place in its view of the member list.
	Index, Of int
	// Start and End bound its range [Start, End); nil is the keyspace's
	// start (Start) or end (End).
	Start, End []byte
	Version    uint64    // of its view (its own count)
	Updated    time.Time // when it published it
	Backlog    int       // notified rows in its range now
}

// Status reads the backlog per observed column (a scan of the notify
// keyspace only) and every observer's counters.
func (f *Framework) Status(ctx context.Context) (Status, error) {
	cols := f.reg.columns()
	parts, err := f.partitions(ctx)
	if err != nil {
		return Status{}, err
	}
	backlog, unowned, err := f.backlog(ctx, parts)
	if err != nil {
		return Status{}, err
	}
	for col := range cols {
		if backlog[col] == nil {
			backlog[col] = &ColumnStatus{Column: col}
		}
	}
	st := Status{Partitions: parts, Unowned: unowned}
	for _, cs := range backlog {
		st.Columns = append(st.Columns, *cs)
	}
	sort.Slice(st.Columns, func(i, j int) bool { return st.Columns[i].Column < st.Columns[j].Column })
	for col, regs := range cols {
		for _, g := range regs {
			counts, err := f.counters(ctx, g.name)
			if err != nil {
				return Status{}, err
			}
			st.Observers = append(st.Observers, ObserverStatus{Name: g.name, Column: col, Weak: g.weak, Counts: counts})
		}
	}
	sort.Slice(st.Observers, func(i, j int) bool { return st.Observers[i].Name < st.Observers[j].Name })
	if st.Scanners, err = f.counters(ctx, scannersRow); err != nil {
		return Status{}, err
	}
	q, err := f.Quarantine(ctx)
	st.Quarantined = len(q)
	return st, err
}

// backlog scans the notify keyspace: per notified column, the cells
// pending and the age of the oldest notification; per partition, the
// notified rows in its range (parts[i].Backlog), and the rows in none.
func (f *Framework) backlog(ctx context.Context, parts []PartitionStatus) (map[string]*ColumnStatus, int, error) {
	now := uint64(f.opts.Now().UnixMilli())
	backlog := map[string]*ColumnStatus{}
	unowned := 0
	_, err := f.notify.Scan(ctx, nil, nil, 0, func(row []byte, ns []txn.Notification) bool {
		if len(parts) > 0 && !countInRanges(parts, row) {
			unowned++
		}
		seen := map[string]bool{}
		for _, n := range ns {
			cs := backlog[n.Column]
			if cs == nil {
				cs = &ColumnStatus{Column: n.Column}
				backlog[n.Column] = cs
			}
			if !seen[n.Column] {
				seen[n.Column] = true
				cs.Pending++
			}
			if w := n.WallMS; w > 0 && w < now {
				cs.Oldest = max(cs.Oldest, time.Duration(now-w)*time.Millisecond)
			}
		}
		return true
	})
	return backlog, unowned, err
}

// countInRanges adds key to the backlog of every partition whose range
// holds it, and reports whether any did.
func countInRanges(parts []PartitionStatus, key []byte) bool {
	in := false
	for i := range parts {
		if inRange(key, parts[i].Start, parts[i].End) {
			parts[i].Backlog++
			in = true
		}
	}
	return in
}

// partitions reads the ranges the partitioned workers published: those of
// the members listed by the newest entry, of the entries that have not
// expired (a worker that died without withdrawing its entry drops out
// when the entry expires, publishedPartition).
func (f *Framework) partitions(ctx context.Context) ([]PartitionStatus, error) {
	r, err := f.store.ReadRow(ctx, []byte(partitionsRow), partitionsFilter)
	if err != nil {
		return nil, err
	}
	now := f.opts.Now().UnixMilli()
	entries := map[string]publishedPartition{}
	var newest publishedPartition
	for _, c := range r.Cells {
		if e, ok := decodePartition(c.Value); ok && e.live(now) {
			entries[c.Qualifier] = e
			if e.Updated >= newest.Updated {
				newest = e
			}
		}
	}
	var parts []PartitionStatus
	for _, owner := range newest.Members {
		if e, ok := entries[owner]; ok {
			parts = append(parts, PartitionStatus{Owner: owner, Worker: e.Worker, Index: e.Index, Of: len(e.Members),
				Start: e.Start, End: e.End, Version: e.Version, Updated: time.UnixMilli(e.Updated)})
		}
	}
	sort.SliceStable(parts, func(i, j int) bool { return parts[i].Index < parts[j].Index })
	return parts, nil
}

// counters reads the stored counters of one stats row.
func (f *Framework) counters(ctx context.Context, row string) (map[string]int64, error) {
	r, err := f.store.ReadRow(ctx, []byte(row), storage.Filter{{Family: FamilyStats, AllQualifiers: true, Limit: 1}})
	if err != nil {
		return nil, err
	}
	counts := map[string]int64{}
	for _, c := range r.Cells {
		if len(c.Value) == 8 {
			counts[c.Qualifier] = int64(binary.BigEndian.Uint64(c.Value))
		}
	}
	return counts, nil
}

// Pending is one notified cell not yet processed.
type Pending struct {
	Row, Column string
	Versions    int           // notification versions (changes collapsed into one run)
	Age         time.Duration // of the oldest version
}

// PendingNotifications lists up to limit (0: all) notified cells, in row
// order, reading only the notify keyspace.
func (f *Framework) PendingNotifications(ctx context.Context, limit int) ([]Pending, error) {
	now := uint64(f.opts.Now().UnixMilli())
	var out []Pending
	_, err := f.notify.Scan(ctx, nil, nil, 0, func(row []byte, ns []txn.Notification) bool {
		for _, c := range ns {
			if n := len(out); n > 0 && out[n-1].Row == string(row) && out[n-1].Column == c.Column {
				out[n-1].Versions++
			} else {
				if limit > 0 && len(out) == limit {
					return false
				}
				out = append(out, Pending{Row: string(row), Column: c.Column, Versions: 1})
			}
			if w := c.WallMS; w > 0 && w < now {
				p := &out[len(out)-1]
				p.Age = max(p.Age, time.Duration(now-w)*time.Millisecond)
			}
		}
		return true
	})
	return out, err
}

// decodeCounter decodes an 8-byte big-endian counter (0 if malformed).
func decodeCounter(v []byte) uint64 {
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// joinErrs is the first non-nil error of a batch's per-row errors.
func joinErrs(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
