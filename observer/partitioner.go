package observer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/internal/ctxwait"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// FamilyPartitions holds the partitioned workers' views, for Status: row
// partitionsRow, qualifier = the worker's member Owner, value = its
// publishedPartition as JSON.
const FamilyPartitions = "observer_partitions"

// partitionsRow is the row of FamilyPartitions.
const partitionsRow = txn.ReservedPrefix + "partitions"

// DefaultGroup is the membership group of the workers that split one
// notify keyspace (WorkerOptions.Group).
const DefaultGroup = "observer-workers"

// staleAfter is how many Resample periods without a refresh make the
// published entry of a worker that is not a member a dead one's, and how
// many an entry states it is good for (publishedPartition.Expires).
const staleAfter = 3

// rewatchWait is how long a worker whose membership watch ended waits
// before watching again (it scans the whole keyspace meanwhile).
const rewatchWait = time.Second

// maxRegisterWait bounds the back-off of a worker whose registration in
// its group failed.
const maxRegisterWait = 10 * time.Second

// partitioner keeps this worker's Partition while Run runs with a
// Membership: it registers the worker, watches the group, re-samples the
// notify keyspace on every member-list change and every
// WorkerOptions.Resample, and publishes the worker's range in the store.
// cur is read by the scanners at any time; the other fields belong to the
// loop goroutine (and, once done is closed, to the caller of stop).
type partitioner struct {
	f     *Framework
	opts  WorkerOptions
	value string // this run's registered value: finds Self in the list
	cur   atomic.Pointer[Partition]
	done  chan struct{}

	members []coord.Member // nil while no list is known
	epoch   uint64         // Partition.epoch of the next view
	version uint64         // Partition.Version of the next view
	owner   string         // this worker's Owner while it has a published entry
	listed  bool           // it was listed once (warn when it no longer is)
	took    time.Duration  // how long the last re-sample took
}

// startPartitioner registers this worker in its group (until ctx ends)
// and keeps its partition in a goroutine that ends with ctx. A
// registration that fails (the coordination service unreachable: a
// restart, a cut connection) does not end the run: the loop registers
// again with back-off, and the scanners scan the whole keyspace
// meanwhile, as when no member list is known.
func (f *Framework) startPartitioner(ctx context.Context, opts WorkerOptions) (*partitioner, error) {
	p := &partitioner{
		f: f, opts: opts, done: make(chan struct{}),
		value: fmt.Sprintf("%s/run-%08x", f.client.Owner(), rand.Uint32()),
	}
	err := opts.Membership.Register(ctx, opts.Group, p.value)
	if err != nil && (ctx.Err() != nil || errors.Is(err, coord.ErrNotAlive)) {
		return nil, fmt.Errorf("observer: joining the workers' group %q: %w", opts.Group, err)
	}
	if err != nil {
		f.opts.Logger.Warn("observer: joining the workers' group failed; scanning the whole keyspace and trying again",
			"group", opts.Group, "err", err)
	}
	f.part.Store(p)
	go p.loop(ctx, err == nil)
	return p, nil
}

// register registers this worker in its group until it succeeds or ctx
// ends, backing off between attempts; it reports whether it registered.
// A worker whose liveness ended stops trying (its scanners' transactions
// fail alike: the DB must be opened again).
func (p *partitioner) register(ctx context.Context) bool {
	for wait := rewatchWait; ; wait = min(2*wait, maxRegisterWait) {
		if ctxwait.Sleep(ctx, wait) != nil {
			return false
		}
		err := p.opts.Membership.Register(ctx, p.opts.Group, p.value)
		if err == nil {
			p.f.opts.Logger.Info("observer: joined the workers' group", "group", p.opts.Group)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if errors.Is(err, coord.ErrNotAlive) {
			p.f.opts.Logger.Warn("observer: this worker's liveness ended; it no longer tries to join its group", "group", p.opts.Group, "err", err)
			return false
		}
		p.f.opts.Logger.Debug("observer: joining the workers' group; trying again", "group", p.opts.Group, "err", err)
	}
}

// current is the view the scanners follow; nil (scan the whole keyspace)
// without a Membership or while no member list is known.
func (p *partitioner) current() *Partition {
	if p == nil {
		return nil
	}
	return p.cur.Load()
}

// stop waits for the loop (its ctx ended) and withdraws the published
// range: a worker that stops leaves no entry behind.
func (p *partitioner) stop(ctx context.Context) {
	<-p.done
	p.f.part.CompareAndSwap(p, nil)
	p.withdraw(ctx)
}

// withdraw deletes this worker's published entry, if it has one. A
// failure is logged: the entry expires on its own (publishedPartition).
func (p *partitioner) withdraw(ctx context.Context) {
	if p.owner == "" {
		return
	}
	// A nonce over a server. On Bigtable a late copy of a publish or
	// withdrawal only misstates the ranges Status shows, until the next
	// re-sample or the stale-entry sweep: correctness does not depend on
	// them.
	if err := p.f.store.Mutate(ctx, []byte(partitionsRow), storage.DeleteCell(FamilyPartitions, p.owner, 0)); err != nil {
		p.f.opts.Logger.Warn("observer: withdrawing the published partition", "err", err)
		return
	}
	p.owner = ""
}

func (p *partitioner) loop(ctx context.Context, registered bool) {
	defer close(p.done)
	if !registered && !p.register(ctx) {
		return
	}
	watch := p.opts.Membership.WatchMembers(ctx, p.opts.Group)
	tick := time.NewTimer(untilNext(p.f.opts.Now(), p.opts.Resample))
	defer tick.Stop()
	for {
		select {
		case list, ok := <-watch:
			if ok {
				p.members = list
				p.update(ctx)
				continue
			}
			if ctx.Err() != nil {
				return
			}
			p.f.opts.Logger.Warn("observer: the workers' membership watch ended; scanning the whole keyspace until it is back", "group", p.opts.Group)
			p.members = nil
			p.cur.Store(nil)
			if ctxwait.Sleep(ctx, rewatchWait) != nil {
				return
			}
			watch = p.opts.Membership.WatchMembers(ctx, p.opts.Group)
		case <-tick.C:
			if p.members != nil {
				p.update(ctx)
			}
			tick.Reset(untilNext(p.f.opts.Now(), p.opts.Resample))
		case <-ctx.Done():
			return
		}
	}
}

// untilNext is the time from now to the next multiple of period (since
// the Unix epoch): workers whose clocks agree re-sample together, and so
// sample nearly the same keys.
func untilNext(now time.Time, period time.Duration) time.Duration {
	return max(period-time.Duration(now.UnixNano()%int64(period)), time.Millisecond)
}

// update re-samples the notify keyspace, makes the next view and
// publishes it.
func (p *partitioner) update(ctx context.Context) {
	began := p.f.opts.Now()
	sample, err := p.f.sampleNotify(ctx)
	p.took = p.f.opts.Now().Sub(began)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		p.f.opts.Logger.Warn("observer: sampling the notify keyspace", "err", err)
		sample = nil // keep the bounds, as for an empty sample
	}
	next := p.next(p.cur.Load(), sample)
	p.cur.Store(next)
	switch {
	case next.Self >= 0:
		p.listed = true
		p.publish(ctx, next)
	case p.listed:
		p.listed = false
		p.f.opts.Logger.Warn("observer: this worker is no longer a member of its group (its liveness lapsed?); scanning the whole keyspace",
			"group", p.opts.Group, "worker", p.value)
		// Its range is no longer its own: Status must not list it.
		p.withdraw(ctx)
	}
}

// next is the view after prev for p.members and a fresh sample: the
// sample's quantiles; for an empty sample, prev's bounds if the members
// are the same, else an even split of the key space (every member that
// sees this member list with nothing to sample computes the same).
func (p *partitioner) next(prev *Partition, sample [][]byte) *Partition {
	n := len(p.members)
	sameMembers := prev != nil && slices.Equal(prev.Members, p.members)
	splits := splitPoints(sample, n)
	switch {
	case splits != nil || n <= 1:
	case sameMembers:
		splits, sample = prev.Splits, prev.sample
	default:
		splits = uniformSplits(n)
	}
	if p.f.splitHook != nil {
		splits = p.f.splitHook(splits)
	}
	if !sameMembers {
		p.epoch++
	}
	if !sameMembers || !slices.EqualFunc(prev.Splits, splits, bytes.Equal) {
		p.version++
	}
	self := slices.IndexFunc(p.members, func(m coord.Member) bool { return m.Value == p.value })
	return &Partition{Version: p.version, Members: p.members, Splits: splits, Self: self, epoch: p.epoch, sample: sample}
}

// sampleNotify samples the row keys of the notify keyspace: one scan of
// it, whose cost counts with the scanners' (scan_keys, and sample_keys).
func (f *Framework) sampleNotify(ctx context.Context) ([][]byte, error) {
	var s keySampler
	add := func(row []byte, _ []txn.Notification) bool {
		s.add(row)
		return true
	}
	visited, err := f.notify.Scan(ctx, nil, nil, 0, add)
	f.stats.add("", statScanKeys, int64(visited))
	f.stats.add("", statSampleKeys, int64(visited))
	if err != nil {
		return nil, err
	}
	return s.sorted(), nil
}

// publishedPartition is a worker's published view of its own range.
//
// Invariant: an entry is a lease. It states when it expires, staleAfter
// re-sample periods (and twice the last re-sample's time) after it was
// written; its worker writes it again at every re-sample while it is a
// member, and withdraws it when it stops or is no longer listed. A worker
// that dies without withdrawing it (killed; its store connection gone)
// leaves an entry that expires: Status ignores expired entries, so the
// dead worker drops out of the listing even when no live worker is left
// to delete it. Expiry is judged by the reader's wall clock against the
// writer's, which must agree to well within the lease.
type publishedPartition struct {
	Worker  string   `json:"worker"`  // the worker's registered value
	Index   int      `json:"index"`   // its place among Members
	Members []string `json:"members"` // owners, sorted
	Start   []byte   `json:"start,omitempty"`
	End     []byte   `json:"end,omitempty"`
	Version uint64   `json:"version"`
	Updated int64    `json:"updated_ms"` // wall time
	// Expires is when the entry lapses unless written again (wall time,
	// ms). An entry without one (an older worker's) counts as expired.
	Expires int64 `json:"expires_ms"`
}

// live reports whether the entry has not expired at now (Unix ms).
func (e *publishedPartition) live(now int64) bool { return now < e.Expires }

var partitionsFilter = storage.Filter{{Family: FamilyPartitions, AllQualifiers: true, Limit: 1}}

// publish stores this worker's range for Status, and drops the entries of
// workers that died without withdrawing theirs: expired, or not in the
// member list and not refreshed for staleAfter Resample periods (a live
// worker publishes at every re-sample; one that joined since this list
// arrived is not in it, but its entry is fresh). A failure is logged:
// Status only.
func (p *partitioner) publish(ctx context.Context, part *Partition) {
	me := part.Members[part.Self].Owner
	start, end := part.Range(part.Self)
	now := p.f.opts.Now()
	lease := staleAfter*p.opts.Resample + 2*p.took
	e := publishedPartition{Worker: p.value, Index: part.Self, Start: start, End: end, Version: part.Version,
		Updated: now.UnixMilli(), Expires: now.Add(lease).UnixMilli()}
	for _, m := range part.Members {
		e.Members = append(e.Members, m.Owner)
	}
	v, err := json.Marshal(e)
	if err != nil {
		panic(err) // plain fields: cannot fail
	}
	muts := []storage.Mutation{storage.SetCell(FamilyPartitions, me, 0, v)}
	row, err := p.f.store.ReadRow(ctx, []byte(partitionsRow), partitionsFilter)
	stale := e.Updated - (staleAfter * p.opts.Resample).Milliseconds()
	for _, c := range row.Cells {
		if c.Qualifier == me {
			continue
		}
		old, ok := decodePartition(c.Value)
		if !ok || !old.live(e.Updated) || !slices.Contains(e.Members, c.Qualifier) && old.Updated < stale {
			muts = append(muts, storage.DeleteCell(FamilyPartitions, c.Qualifier, 0))
		}
	}
	if err == nil {
		// A nonce over a server; on Bigtable a late copy misstates the
		// ranges Status shows for a while (see stop).
		err = p.f.store.Mutate(ctx, []byte(partitionsRow), muts...)
	}
	if err != nil && ctx.Err() == nil {
		p.f.opts.Logger.Warn("observer: publishing the partition", "err", err)
	}
	if err == nil && p.owner != me {
		if p.owner != "" { // registered anew under another owner
			_ = p.f.store.Mutate(ctx, []byte(partitionsRow), storage.DeleteCell(FamilyPartitions, p.owner, 0))
		}
		p.owner = me
	}
}

func decodePartition(v []byte) (publishedPartition, bool) {
	var e publishedPartition
	return e, json.Unmarshal(v, &e) == nil && e.Worker != ""
}

// Partition returns this worker's current view of how the workers split
// the notify keyspace, while Run runs with a Membership and knows the
// member list; ok is false otherwise (the scanners then scan the whole
// keyspace). The view is shared: do not modify it.
func (f *Framework) Partition() (part Partition, ok bool) {
	if cur := f.part.Load().current(); cur != nil {
		return *cur, true
	}
	return Partition{}, false
}
