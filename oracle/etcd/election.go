package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage"
)

// DefaultOraclePrefix is the default key prefix of the oracle's election
// and mark (CandidateOptions.Prefix, OracleBackendOptions.Prefix).
const DefaultOraclePrefix = "percolator/"

// DefaultOracleLease is the default CandidateOptions.TTL. etcd's practical
// minimum is about 2s (the server raises a shorter lease to its minimum,
// 1.5 election timeouts, and the granted TTL is what counts).
const DefaultOracleLease = 2 * time.Second

// CandidateOptions configures StartCandidate.
type CandidateOptions struct {
	// Addr is what clients dial to reach this candidate's oracle service
	// (its gRPC address), published as its election value. Required.
	Addr string
	// Prefix is prepended to the keys: <Prefix>oracle/leader/ (the
	// election) and <Prefix>oracle/mark. Default DefaultOraclePrefix.
	Prefix string
	// TTL is the lease requested, in whole seconds (etcd's unit).
	// Default DefaultOracleLease.
	TTL time.Duration
	// Margin is taken off the granted TTL for clock drift between this
	// process and etcd (invariant 1). Default: a tenth of the granted TTL.
	Margin time.Duration
	// Window is the allocator's window (oracle.AllocatorOptions.Window):
	// how far ahead of use the mark is written, and the most a failover
	// skips. Default oracle.DefaultWindow.
	Window uint64
	// Store is the deployment's store, the one the oracle's clients
	// write: the mark is written to it (a reserved row) as well as to
	// etcd before use, and a new term resumes at the larger of the two,
	// so etcd restored from an older backup cannot move timestamps back.
	// Required.
	Store storage.Store
	// Logger receives leadership changes and renewal trouble. Default
	// slog.Default().
	Logger *slog.Logger

	// now is the monotonic clock: time since an arbitrary origin. Test
	// knob; default time.Since(start).
	now func() time.Duration
	// beforeRenew, if set, runs before each renewal with the lease's
	// context; blocking in it models a paused process. Test knob.
	beforeRenew func(ctx context.Context)
}

// EnsureDefaults fills in zero fields with their defaults.
func (o *CandidateOptions) EnsureDefaults() {
	if o.Prefix == "" {
		o.Prefix = DefaultOraclePrefix
	}
	if o.TTL == 0 {
		o.TTL = DefaultOracleLease
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports whether the options are usable, after EnsureDefaults.
func (o *CandidateOptions) Validate() error {
	switch {
	case o.Addr == "":
		return fmt.Errorf("%w: a candidate needs the address clients dial (Addr)", oracle.ErrInvalidArgument)
	case o.Store == nil:
		return fmt.Errorf("%w: a candidate needs the deployment's store (Store), which keeps a copy of the mark", oracle.ErrInvalidArgument)
	case o.TTL < time.Second || o.TTL > time.Hour || o.TTL%time.Second != 0:
		return fmt.Errorf("%w: lease %v: etcd leases are whole seconds, from 1s to 1h", oracle.ErrInvalidArgument, o.TTL)
	case o.Margin < 0 || o.Margin >= o.TTL/2:
		return fmt.Errorf("%w: margin %v not in [0, TTL/2)", oracle.ErrInvalidArgument, o.Margin)
	}
	ao := oracle.AllocatorOptions{Window: o.Window}
	ao.EnsureDefaults()
	return ao.Validate()
}

func electionPrefix(prefix string) string { return prefix + "oracle/leader" }
func markKey(prefix string) string        { return prefix + "oracle/mark" }
func termKey(prefix string) string        { return prefix + "oracle/term" }

// Candidate campaigns for the oracle's leadership until Close, and while
// it leads hands out timestamps (it implements oracle.Backend).
//
// Concurrency: all methods are safe for concurrent use. One goroutine
// (run) campaigns, leads and campaigns again; each lease has a renewal
// goroutine. mu guards the current term.
type Candidate struct {
	cli   *clientv3.Client
	opts  CandidateOptions
	log   *slog.Logger
	start time.Time // the monotonic clock's origin

	ctx    context.Context // cancelled by Close
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when run returned
	// crashed: stop without resigning or revoking (a test's SIGKILL).
	crashed atomic.Bool

	mu struct {
		sync.Mutex
		// Invariant: term is the term this candidate leads, nil if none;
		// its allocator is open while it is set.
		term *term
	}
}

// term is one leadership: a won election on one lease, and the allocator
// over the mark it fences.
type term struct {
	lease *lease
	mark  *etcdMark
	alloc *oracle.Allocator
}

var _ oracle.Backend = (*Candidate)(nil)

// errClosed is the cause of a candidate's end.
var errClosed = errors.New("etcd: oracle candidate closed")

// StartCandidate starts campaigning on cli, which the caller owns and
// closes after Close. It returns at once; the candidate leads when it has
// won (Leading).
func StartCandidate(cli *clientv3.Client, opts CandidateOptions) (*Candidate, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c := &Candidate{cli: cli, opts: opts, log: opts.Logger, start: time.Now(), done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	go c.run()
	return c, nil
}

// now reads the monotonic clock.
func (c *Candidate) now() time.Duration {
	if c.opts.now != nil {
		return c.opts.now()
	}
	return time.Since(c.start)
}

// Allocate implements oracle.Backend: n timestamps from the current term,
// or oracle.ErrNotLeader when this candidate does not lead or cannot prove
// it still does.
func (c *Candidate) Allocate(ctx context.Context, n int) (uint64, error) {
	t := c.term()
	if t == nil {
		return 0, fmt.Errorf("%w: %s is standing by", oracle.ErrNotLeader, c.opts.Addr)
	}
	first, err := t.alloc.Allocate(ctx, n)
	if errors.Is(err, oracle.ErrClosed) {
		return 0, fmt.Errorf("%w: %s: its term just ended", oracle.ErrNotLeader, c.opts.Addr)
	}
	return first, err
}

// Leading reports whether the candidate leads now and its lease is
// provably live.
func (c *Candidate) Leading() bool {
	t := c.term()
	return t != nil && t.lease.usable(c.now()) == nil
}

func (c *Candidate) term() *term {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.term
}

func (c *Candidate) setTerm(t *term) {
	c.mu.Lock()
	c.mu.term = t
	c.mu.Unlock()
}

// Close resigns: it stops allocating, then revokes its lease (deleting its
// key, so a standby takes over at once), and stops campaigning. It returns
// when the candidate has stopped; later Allocate calls fail with
// oracle.ErrNotLeader.
func (c *Candidate) Close() error {
	c.cancel(errClosed)
	<-c.done
	return nil
}

// crash stops the candidate as a process kill would: no resignation, no
// revocation; its lease runs out in etcd. Test hook.
func (c *Candidate) crash() {
	c.crashed.Store(true)
	c.cancel(errors.New("etcd: oracle candidate crashed (test)"))
	<-c.done
}

// run campaigns until Close, a short jittered pause between leases,
// backing off after failures.
func (c *Candidate) run() {
	defer close(c.done)
	const minWait = 50 * time.Millisecond
	wait := minWait
	for c.ctx.Err() == nil {
		err := c.campaign()
		if err == nil || c.ctx.Err() != nil {
			wait = minWait
		} else {
			c.log.Warn("oracle: campaign failed; campaigning again", "addr", c.opts.Addr, "err", err, "in", wait)
		}
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
		}
		if err != nil {
			wait = min(2*wait, c.opts.TTL)
		}
	}
}

// campaign runs one lease: it campaigns on it and, if it wins, leads
// until the lease is lost. A nil error means the lease ended (lost, or
// Close) and a new one may be tried at once.
func (c *Candidate) campaign() error {
	l, err := c.grant()
	if err != nil {
		return fmt.Errorf("granting a lease: %w", err)
	}
	defer c.release(l)
	s, err := newSession(c.cli, l.id)
	if err != nil {
		return fmt.Errorf("election session: %w", err)
	}
	e := concurrency.NewElection(s, electionPrefix(c.opts.Prefix))
	if addr, err := LeaderAddr(l.ctx, c.cli, c.opts.Prefix); err == nil {
		c.log.Info("oracle: standing by", "addr", c.opts.Addr, "leader", addr)
	}
	if err := e.Campaign(l.ctx, c.opts.Addr); err != nil {
		if l.ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("campaign: %w", err)
	}
	return c.lead(l, e)
}

// newSession wraps the lease id in a concurrency.Session for
// concurrency.Election, which uses only its client and lease. The
// session's own keep-alive is started on a context already cancelled, so
// it stops at once: this package renews the lease itself, to know when
// each renewal was sent (invariant 1). (A renewal it might send before it
// stops only lengthens the lease, which errs on the safe side.)
func newSession(cli *clientv3.Client, id clientv3.LeaseID) (*concurrency.Session, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return concurrency.NewSession(cli, concurrency.WithLease(id), concurrency.WithContext(ctx))
}

// lead runs a won election's term until its lease is lost or Close.
func (c *Candidate) lead(l *lease, e *concurrency.Election) error {
	if err := c.awaitPredecessor(l, e.Rev()); err != nil {
		return err
	}
	if err := c.recordTerm(l, e.Key(), e.Rev()); err != nil {
		return err
	}
	// From here every renewal also proves the key stands (invariant 9),
	// and its deletion ends the term at once.
	l.leading(e.Key(), e.Rev())
	l.renewer.Add(1)
	go c.watchKey(l, e.Key(), e.Rev())
	m := &etcdMark{cli: c.cli, st: c.opts.Store, key: markKey(c.opts.Prefix), leaderKey: e.Key(), rev: e.Rev(), lease: l, now: c.now}
	resume, err := m.read(l.ctx)
	if err != nil {
		return err
	}
	a, err := oracle.OpenMarkAllocator(resume, m, oracle.AllocatorOptions{Window: c.opts.Window})
	if err != nil {
		return fmt.Errorf("opening the allocator: %w", err)
	}
	c.setTerm(&term{lease: l, mark: m, alloc: a})
	c.log.Info("oracle: leading", "addr", c.opts.Addr, "lease", fmt.Sprintf("%x", int64(l.id)), "ttl", l.ttl, "rev", e.Rev(), "resume", resume)
	<-l.ctx.Done()
	// Invariant 5: no allocation after this, before the key goes.
	c.setTerm(nil)
	err = a.Close()
	if !c.crashed.Load() {
		c.log.Warn("oracle: leadership ended", "addr", c.opts.Addr, "cause", context.Cause(l.ctx).Error())
	}
	return err
}

// termRecord is the value of <prefix>oracle/term: the election key's
// create revision, the lease and the TTL of the last term that may have
// handed out timestamps, written before its first one.
type termRecord struct {
	Rev   int64 `json:"rev"`
	Lease int64 `json:"lease"`
	TTLS  int64 `json:"ttl_s"`
}

// awaitPredecessor waits, before a new term hands out anything, until the
// previous term cannot hand out any more (invariant 9). A previous leader
// whose lease ended (it resigned, or etcd expired the lease) has stopped
// already (invariants 2 and 5). One whose election key was deleted while
// its lease lives (an operator, etcd restored from a backup) stops at its
// next renewal, which finds the key gone, and its deadline, measured from
// a renewal sent before the deletion, ends within its TTL of it: so the
// new term waits that TTL.
func (c *Candidate) awaitPredecessor(l *lease, rev int64) error {
	ctx, cancel := context.WithTimeout(l.ctx, markTimeout)
	resp, err := c.cli.Get(ctx, termKey(c.opts.Prefix))
	if err != nil || len(resp.Kvs) == 0 {
		cancel()
		return err
	}
	var prev termRecord
	if err := json.Unmarshal(resp.Kvs[0].Value, &prev); err != nil || prev.Rev == rev {
		cancel()
		return nil // not a record this package wrote, or this term's own
	}
	ttl, err := c.cli.TimeToLive(ctx, clientv3.LeaseID(prev.Lease))
	cancel()
	if err != nil {
		return fmt.Errorf("asking after the previous leader's lease: %w", err)
	}
	if ttl.TTL <= 0 {
		return nil // ended
	}
	wait := time.Duration(max(ttl.GrantedTTL, prev.TTLS)) * time.Second
	c.log.Warn("oracle: the previous leader's election key is gone while its lease lives; waiting out its lease before leading",
		"addr", c.opts.Addr, "previous_lease", fmt.Sprintf("%x", prev.Lease), "wait", wait)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-l.ctx.Done():
		return nil // the term ended before it began
	}
}

// recordTerm writes this term's record, if its election key stands.
func (c *Candidate) recordTerm(l *lease, key string, rev int64) error {
	ctx, cancel := context.WithTimeout(l.ctx, markTimeout)
	defer cancel()
	val, _ := json.Marshal(termRecord{Rev: rev, Lease: int64(l.id), TTLS: int64(l.ttl / time.Second)})
	resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpPut(termKey(c.opts.Prefix), string(val))).Commit()
	switch {
	case err != nil:
		return fmt.Errorf("recording the term: %w", err)
	case !resp.Succeeded:
		err := fmt.Errorf("%w: the election key of revision %d is gone", oracle.ErrNotLeader, rev)
		l.lose(err)
		return err
	}
	return nil
}

// watchKey ends the term as soon as etcd reports its election key
// deleted, sooner than the next renewal would find it gone.
func (c *Candidate) watchKey(l *lease, key string, rev int64) {
	defer l.renewer.Done()
	for ev := range c.cli.Watch(l.ctx, key, clientv3.WithRev(rev+1)) {
		for _, e := range ev.Events {
			if e.Type == clientv3.EventTypeDelete {
				l.lose(fmt.Errorf("%w: the election key of revision %d was deleted", oracle.ErrNotLeader, rev))
				return
			}
		}
	}
}

// lease is one etcd lease of a candidate, and what this process can prove
// of it by its own clock.
type lease struct {
	id     clientv3.LeaseID
	ttl    time.Duration // granted
	margin time.Duration
	// key is the election key this lease leads with, set once it has
	// won (nil while it campaigns): each renewal then also proves the key
	// still stands at its revision before it moves the deadline.
	key atomic.Pointer[leaderKey]
	// Invariant: the lease is provably live while the monotonic clock
	// reads less than deadline (ns): the send time of the last
	// acknowledged renewal (or the grant), plus ttl, less margin. It only
	// grows.
	deadline atomic.Int64
	// ctx is done once the lease is lost or the candidate stops; its
	// cause says why.
	ctx     context.Context
	cancel  context.CancelCauseFunc
	renewer sync.WaitGroup
}

// grant takes a new lease and starts renewing it.
func (c *Candidate) grant() (*lease, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.TTL)
	defer cancel()
	sent := c.now()
	resp, err := c.cli.Grant(ctx, int64(c.opts.TTL/time.Second))
	if err != nil {
		return nil, err
	}
	l := &lease{id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second, margin: c.opts.Margin}
	if l.margin == 0 {
		l.margin = l.ttl / 10
	}
	l.ctx, l.cancel = context.WithCancelCause(c.ctx)
	l.confirm(sent, l.ttl)
	l.renewer.Add(1)
	go c.renew(l)
	return l, nil
}

// release stops renewing l and revokes it, deleting this candidate's key
// (a resignation), unless the candidate crashed.
func (c *Candidate) release(l *lease) {
	l.cancel(errors.New("lease released"))
	l.renewer.Wait()
	if c.crashed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.ttl)
	defer cancel()
	if _, err := c.cli.Revoke(ctx, l.id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		c.log.Warn("oracle: revoking the election lease (it runs out by itself)", "lease", fmt.Sprintf("%x", int64(l.id)), "err", err)
	}
}

// leaderKey is an election key and its create revision.
type leaderKey struct {
	key string
	rev int64
}

// leading makes the renewals check the election key.
func (l *lease) leading(key string, rev int64) { l.key.Store(&leaderKey{key, rev}) }

// confirm extends the deadline to sent + ttl − margin.
func (l *lease) confirm(sent, ttl time.Duration) {
	d := int64(sent + ttl - l.margin)
	for {
		cur := l.deadline.Load()
		if d <= cur || l.deadline.CompareAndSwap(cur, d) {
			return
		}
	}
}

// lose ends the lease's term with cause err.
func (l *lease) lose(err error) { l.cancel(err) }

// usable is nil while the lease is provably live at now (invariant 1).
func (l *lease) usable(now time.Duration) error {
	if l.ctx.Err() != nil {
		return fmt.Errorf("%w: the term ended: %v", oracle.ErrNotLeader, context.Cause(l.ctx))
	}
	if over := now - time.Duration(l.deadline.Load()); over >= 0 {
		return fmt.Errorf("%w: lease %x not renewed in time (deadline passed %v ago)", oracle.ErrNotLeader, int64(l.id), over)
	}
	return nil
}

// renew renews l every ttl/3 (ttl/10 after a failure), and ends it when
// etcd no longer has it or its deadline passes first.
func (c *Candidate) renew(l *lease) {
	defer l.renewer.Done()
	every := l.ttl / 3
	next := every
	failing := 0
	for {
		t := time.NewTimer(min(next, max(0, time.Duration(l.deadline.Load())-c.now())))
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if hook := c.opts.beforeRenew; hook != nil {
			hook(l.ctx)
			if l.ctx.Err() != nil {
				return
			}
		}
		if err := l.usable(c.now()); err != nil {
			l.lose(err)
			return
		}
		err := c.renewOnce(l, every)
		switch {
		case err == nil:
			if failing > 0 {
				c.log.Info("oracle: lease renewed again", "lease", fmt.Sprintf("%x", int64(l.id)), "failed_attempts", failing)
			}
			failing, next = 0, every
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			l.lose(fmt.Errorf("%w: etcd no longer has lease %x", oracle.ErrNotLeader, int64(l.id)))
			return
		case errors.Is(err, oracle.ErrNotLeader):
			l.lose(err)
			return
		default:
			if failing == 0 && l.ctx.Err() == nil {
				c.log.Warn("oracle: lease renewal failing; retrying", "lease", fmt.Sprintf("%x", int64(l.id)), "err", err)
			}
			failing, next = failing+1, l.ttl/10
		}
	}
}

// renewOnce sends one KeepAlive and, when etcd acknowledges it, moves the
// deadline to its send time + the TTL etcd granted again − margin.
func (c *Candidate) renewOnce(l *lease, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(l.ctx, timeout)
	defer cancel()
	sent := c.now()
	resp, err := c.cli.KeepAliveOnce(ctx, l.id)
	if err != nil {
		return err
	}
	if k := l.key.Load(); k != nil {
		// Leading: the key must still stand, read after the renewal
		// was sent (a linearizable read).
		got, err := c.cli.Get(ctx, k.key)
		if err != nil {
			return err
		}
		if len(got.Kvs) == 0 || got.Kvs[0].CreateRevision != k.rev {
			return fmt.Errorf("%w: the election key of revision %d is gone", oracle.ErrNotLeader, k.rev)
		}
	}
	l.confirm(sent, time.Duration(resp.TTL)*time.Second)
	return nil
}
