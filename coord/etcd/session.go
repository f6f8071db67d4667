package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seed-992972ee/percolator/coord"
)

var (
	// ErrSessionLost: the process cannot prove its session is live
	// (Check), or a call found its lease gone.
	ErrSessionLost = errors.New("etcd: liveness session lost")
	// ErrInvalidArgument: bad options or input; nothing was written.
	ErrInvalidArgument = errors.New("etcd: invalid argument")
	// ErrClosed: the session was closed.
	ErrClosed = errors.New("etcd: session closed")
)

const (
	// DefaultTTL is a session's default lease.
	DefaultTTL = 10 * time.Second
	// MinTTL is the shortest lease accepted: etcd grants no less than
	// about 1.5 election timeouts, 2 s with its default timings.
	MinTTL = 2 * time.Second
	// DefaultPrefix is the default root of every key a Session writes.
	DefaultPrefix = "percolator/"
	// maxOpsPerTxn keeps the re-put of a session's own keys under etcd's
	// default limit of 128 operations per transaction.
	maxOpsPerTxn = 100
)

// SessionOptions configures Open.
type SessionOptions struct {
	// Owner is the process's identity (coord.NewOwnerID()). Required.
	Owner string
	// TTL is the lease: a process that stops renewing is seen dead about
	// TTL later. A whole number of seconds (etcd grants leases in
	// seconds), at least MinTTL. Default DefaultTTL.
	TTL time.Duration
	// Prefix is the root of every key the session writes, so that
	// several databases can share one etcd. It must end in "/". Default
	// DefaultPrefix.
	Prefix string
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields with defaults.
func (o *SessionOptions) EnsureDefaults() {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports options Open refuses, wrapping ErrInvalidArgument.
// It judges the options as given: call EnsureDefaults first.
func (o *SessionOptions) Validate() error {
	switch {
	case o.Owner == "":
		return fmt.Errorf("%w: empty owner", ErrInvalidArgument)
	case o.TTL < MinTTL:
		return fmt.Errorf("%w: lease TTL %v below etcd's practical minimum %v", ErrInvalidArgument, o.TTL, MinTTL)
	case o.TTL%time.Second != 0:
		return fmt.Errorf("%w: lease TTL %v is not a whole number of seconds", ErrInvalidArgument, o.TTL)
	case !strings.HasSuffix(o.Prefix, "/"):
		return fmt.Errorf("%w: key prefix %q does not end in /", ErrInvalidArgument, o.Prefix)
	}
	return nil
}

// Session is a process's liveness session on etcd: a lease it renews, the
// liveness key under it, advisory locks and group memberships. It is the
// process's coord.Liveness and coord.Locker. Safe for concurrent use.
type Session struct {
	cli    *clientv3.Client
	owner  string
	ttl    time.Duration // as asked; the lease's granted TTL is mu.granted
	prefix string
	log    *slog.Logger
	local  *coord.LocalLocker

	// ctx ends at Close: it stops the renew loop and the watchers.
	ctx    context.Context
	cancel context.CancelFunc
	// kick asks the renew loop to renew now: a call found the lease gone.
	kick chan struct{}
	// wg counts the renew loop and the watchers; Add only under mu while
	// not closed, so that no Add races Close's Wait.
	wg sync.WaitGroup

	// paused is a test hook: the renew loop sends nothing while set, as
	// if the process were stopped.
	paused atomic.Bool

	// own serializes the writes of the session's own keys (liveness,
	// memberships) with the replacement of its lease, so that each lands
	// under the lease that is current.
	own sync.Mutex
	// members: group → value of every Register that succeeded, put again
	// under each new lease. Guarded by own.
	members map[string]string
	// oldest is what the liveness key's value publishes (coord.Snapshots);
	// put holds the value last put. Guarded by own.
	oldest func() (uint64, bool)
	put    string
	// memberGen: group → the number of the last Register in it, so that
	// the end of an earlier registration (Membership) never withdraws a
	// later one. Guarded by own.
	memberGen map[string]uint64

	mu struct {
		sync.Mutex
		// lease is the current lease. Invariant: the liveness key and
		// every membership in members were put under it before it became
		// current (invariant 4 of the package).
		lease   clientv3.LeaseID
		granted time.Duration
		// validUntil: the lease is provably live before it (monotonic
		// clock); zero once the lease was found gone.
		validUntil time.Time
		closed     bool
	}
}

var (
	_ coord.Liveness  = (*Session)(nil)
	_ coord.Locker    = (*Session)(nil)
	_ coord.Snapshots = (*Session)(nil)
)

// PublishOldest implements coord.Snapshots: the liveness key's value is
// the oldest start_ts (decimal; empty for none), put again at each
// renewal where it changed.
func (s *Session) PublishOldest(oldest func() (uint64, bool)) {
	s.own.Lock()
	defer s.own.Unlock()
	s.oldest = oldest
}

// liveValueLocked is the liveness key's value now. s.own is held.
func (s *Session) liveValueLocked() string {
	if s.oldest != nil {
		if ts, ok := s.oldest(); ok {
			return strconv.FormatUint(ts, 10)
		}
	}
	return ""
}

// publish puts the liveness key again under lease if its value changed.
func (s *Session) publish(ctx context.Context, lease clientv3.LeaseID) error {
	s.own.Lock()
	defer s.own.Unlock()
	v := s.liveValueLocked()
	if v == s.put {
		return nil
	}
	if _, err := s.cli.Put(ctx, s.liveKey(s.owner), v, clientv3.WithLease(lease)); err != nil {
		return err
	}
	s.put = v
	return nil
}

// OldestNeeded implements coord.Snapshots: the oldest start_ts the live
// sessions' liveness keys publish.
func (s *Session) OldestNeeded(ctx context.Context) (coord.Oldest, error) {
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	resp, err := s.cli.Get(ctx, s.prefix+"live/", clientv3.WithPrefix())
	if err != nil {
		return coord.Oldest{}, fmt.Errorf("etcd: reading the oldest open transaction: %w", err)
	}
	var o coord.Oldest
	for _, kv := range resp.Kvs {
		if ts, err := strconv.ParseUint(string(kv.Value), 10, 64); err == nil && ts != 0 && (o.TS == 0 || ts < o.TS) {
			o = coord.Oldest{TS: ts, Owner: strings.TrimPrefix(string(kv.Key), s.prefix+"live/")}
		}
	}
	return o, nil
}

// Open grants a lease, puts the owner's liveness key under it and renews
// it in the background every TTL/3 until Close. Bad options wrap
// ErrInvalidArgument and write nothing. cli stays the caller's: Close does
// not close it.
func Open(ctx context.Context, cli *clientv3.Client, opts SessionOptions) (*Session, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if cli == nil {
		return nil, fmt.Errorf("%w: nil etcd client", ErrInvalidArgument)
	}
	s := &Session{
		cli: cli, owner: opts.Owner, ttl: opts.TTL, prefix: opts.Prefix, log: opts.Logger,
		local: coord.NewLocalLocker(), kick: make(chan struct{}, 1), members: make(map[string]string), memberGen: make(map[string]uint64),
	}
	if err := s.grant(ctx); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.renewLoop()
	return s, nil
}

// Owner returns the session's owner ID.
func (s *Session) Owner() string { return s.owner }

func (s *Session) liveKey(owner string) string { return s.prefix + "live/" + owner }
func (s *Session) lockKey(key string) string   { return s.prefix + "lock/" + key }

// callTimeout bounds one call to etcd: its client waits for a connection
// as long as the context allows, so a call on an etcd that is down would
// wait for it to come back.
func (s *Session) callTimeout() time.Duration { return s.ttl / 3 }

// margin is the part of a lease this process counts on: a tenth less, for
// the drift between its clock and etcd's.
func margin(ttl time.Duration) time.Duration { return ttl - ttl/10 }

// grant replaces the lease by a new one and puts the session's own keys
// under it; the new lease becomes current, and Check passes, only once
// they are written.
func (s *Session) grant(ctx context.Context) error {
	s.own.Lock()
	defer s.own.Unlock()
	sent := time.Now()
	g, err := s.cli.Grant(ctx, int64(s.ttl/time.Second))
	if err != nil {
		return fmt.Errorf("etcd: granting a lease for %s: %w", s.owner, err)
	}
	if err := s.putOwnLocked(ctx, g.ID); err != nil {
		s.revoke(g.ID)
		return fmt.Errorf("etcd: writing the liveness key of %s: %w", s.owner, err)
	}
	granted := time.Duration(g.TTL) * time.Second
	s.mu.Lock()
	s.mu.lease, s.mu.granted, s.mu.validUntil = g.ID, granted, sent.Add(margin(granted))
	s.mu.Unlock()
	return nil
}

// putOwnLocked puts the liveness key and every membership under lease.
// s.own is held.
func (s *Session) putOwnLocked(ctx context.Context, lease clientv3.LeaseID) error {
	s.put = s.liveValueLocked()
	ops := []clientv3.Op{clientv3.OpPut(s.liveKey(s.owner), s.put, clientv3.WithLease(lease))}
	for group, value := range s.members {
		ops = append(ops, clientv3.OpPut(s.memberKey(group, s.owner), value, clientv3.WithLease(lease)))
	}
	for len(ops) > 0 {
		n := min(len(ops), maxOpsPerTxn)
		if _, err := s.cli.Txn(ctx).Then(ops[:n]...).Commit(); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// revoke ends lease, best effort: a lease left behind expires by itself.
func (s *Session) revoke(lease clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.ttl/3)
	defer cancel()
	_, err := s.cli.Revoke(ctx, lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return err
}

// renewLoop renews the lease until Close (coord.Renewal): every TTL/3 of
// the granted lease, every TTL/10 of the asked one while renewals fail,
// and at once when a call found the lease gone (kick).
func (s *Session) renewLoop() {
	defer s.wg.Done()
	r := coord.Renewal{
		Renew: s.renewUnlessPaused, Every: s.every, Retry: s.ttl / 10, Now: s.kick,
		Logger: s.log, Service: "etcd", Owner: s.owner,
	}
	r.Run(s.ctx)
}

// renewUnlessPaused is renew, unless the test hook paused renewals: then
// it sends nothing, as a stopped process sends nothing.
func (s *Session) renewUnlessPaused(ctx context.Context) error {
	if s.paused.Load() {
		return nil
	}
	return s.renew(ctx)
}

// every is the renewal period: a third of the granted lease.
func (s *Session) every() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.granted / 3
}

// renew extends the lease once, recording the send time first; a lease
// etcd no longer has is replaced.
func (s *Session) renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.ttl/3)
	defer cancel()
	lease, err := s.lease()
	if err != nil {
		return err
	}
	sent := time.Now()
	resp, err := s.cli.KeepAliveOnce(ctx, lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.lost(lease)
		s.log.Warn("etcd: session lease expired; granting a new one", "owner", s.owner)
		return s.grant(ctx)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.mu.lease == lease {
		s.mu.validUntil = sent.Add(margin(time.Duration(resp.TTL) * time.Second))
	}
	s.mu.Unlock()
	return s.publish(ctx, lease)
}

// lease returns the current lease, or ErrClosed.
func (s *Session) lease() (clientv3.LeaseID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, ErrClosed
	}
	return s.mu.lease, nil
}

// lost records that lease is gone: Check fails from now, and the renew
// loop replaces the lease at once.
func (s *Session) lost(lease clientv3.LeaseID) {
	s.mu.Lock()
	if s.mu.lease == lease {
		s.mu.validUntil = time.Time{}
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// callErr wraps the error of a call made under lease: a lease etcd no
// longer has means the session is lost.
func (s *Session) callErr(lease clientv3.LeaseID, what string, err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.lost(lease)
		return fmt.Errorf("etcd: %s: %w: %w", what, ErrSessionLost, err)
	}
	return fmt.Errorf("etcd: %s: %w", what, err)
}

// Check reports whether the session is provably live now (invariant 3):
// nil, or an error wrapping ErrSessionLost.
func (s *Session) Check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.closed:
		return fmt.Errorf("%w: %w", ErrSessionLost, ErrClosed)
	case s.mu.validUntil.IsZero():
		return fmt.Errorf("%w: lease gone; granting a new one", ErrSessionLost)
	}
	if late := time.Since(s.mu.validUntil); late >= 0 {
		return fmt.Errorf("%w: not renewed for %v past its lease", ErrSessionLost, late.Round(time.Millisecond))
	}
	return nil
}

// Alive implements coord.Liveness: whether owner's liveness key exists,
// read linearizably (invariant 2). An error means the answer is unknown.
func (s *Session) Alive(ctx context.Context, owner string) (bool, error) {
	if owner == "" {
		return false, fmt.Errorf("%w: empty owner", ErrInvalidArgument)
	}
	if _, err := s.lease(); err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout()) // etcd's client waits for a connection
	defer cancel()
	resp, err := s.cli.Get(ctx, s.liveKey(owner), clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("etcd: asking whether %s is alive: %w", owner, err)
	}
	return resp.Count > 0, nil
}

// TryLock implements coord.Locker: the local table first, then the key
// in etcd, created under the session's lease only if absent (invariant
// 5). An error leaves the key unlocked. owner is stored as the lock's
// value, for display.
func (s *Session) TryLock(ctx context.Context, key, owner string) (func(), bool, error) {
	unlockLocal, held, err := s.local.TryLock(ctx, key, owner)
	if err != nil || held {
		return nil, held, err
	}
	lease, err := s.lease()
	if err != nil {
		unlockLocal()
		return nil, false, err
	}
	k := s.lockKey(key)
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout())
	defer cancel()
	resp, err := s.takeLock(ctx, k, owner, lease)
	if err == nil && !resp.Succeeded {
		if kv := lockHolder(resp); kv != nil && clientv3.LeaseID(kv.Lease) == lease {
			// The key is under this session's lease, and no one in this
			// process holds the lock (the local lock is ours): an
			// attempt whose reply was lost left it (or an unlock being
			// retried in the background). Remove that key, if it is
			// still the one seen, and take the lock anew: a new key, so
			// that a background unlock, conditioned on its key's
			// creation, cannot remove it.
			var del *clientv3.TxnResponse
			del, err = s.cli.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(k), "=", kv.ModRevision)).
				Then(clientv3.OpDelete(k)).
				Commit()
			if err == nil && del.Succeeded {
				s.log.Info("etcd: advisory lock left by this process (a lost reply) taken over", "key", k)
				resp, err = s.takeLock(ctx, k, owner, lease)
			}
		}
	}
	if err != nil || !resp.Succeeded {
		unlockLocal()
		if err != nil {
			return nil, false, s.callErr(lease, "taking an advisory lock", err)
		}
		return nil, true, nil
	}
	created := resp.Header.Revision
	var once sync.Once
	return func() {
		once.Do(func() {
			s.unlock(k, created)
			unlockLocal()
		})
	}, false, nil
}

// takeLock creates the lock key k for owner under lease if it does not
// exist; otherwise it reads k.
func (s *Session) takeLock(ctx context.Context, k, owner string, lease clientv3.LeaseID) (*clientv3.TxnResponse, error) {
	return s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, owner, clientv3.WithLease(lease))).
		Else(clientv3.OpGet(k)).
		Commit()
}

// lockHolder is the lock key a failed takeLock read; nil if it was gone.
func lockHolder(resp *clientv3.TxnResponse) *mvccpb.KeyValue {
	if len(resp.Responses) == 0 {
		return nil
	}
	r := resp.Responses[0].GetResponseRange()
	if r == nil || len(r.Kvs) == 0 {
		return nil
	}
	return r.Kvs[0]
}

// unlock deletes the lock key k if it is still the one this session
// created at revision created; after Close its lease took it already. A
// delete that fails (etcd unreachable, restarting) is sent again in the
// background until it succeeds or the session closes: the lease lives on
// while the session renews it, so a lock left behind would keep the row
// from every scanner for the life of the process. The delete is
// conditioned on the creation revision, so a late one never removes a
// lock taken since.
func (s *Session) unlock(k string, created int64) {
	if s.unlockOnce(k, created) == nil {
		return
	}
	s.mu.Lock() // Close sets closed under mu before it waits for wg
	if s.mu.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		wait := s.ttl / 10
		for tries := 1; ; tries++ {
			t := time.NewTimer(wait)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			err := s.unlockOnce(k, created)
			if err == nil {
				s.log.Info("etcd: advisory lock released after failed attempts", "key", k, "attempts", tries+1)
				return
			}
			if tries == 1 {
				s.log.Warn("etcd: advisory lock not released yet; retrying", "key", k, "err", err)
			}
			wait = min(2*wait, s.ttl)
		}
	}()
}

// unlockOnce sends one conditional delete of k; nil also when the session
// is closed (its lease took the key).
func (s *Session) unlockOnce(k string, created int64) error {
	if _, err := s.lease(); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.callTimeout())
	defer cancel()
	_, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", created)).
		Then(clientv3.OpDelete(k)).
		Commit()
	if s.ctx.Err() != nil {
		return nil
	}
	return err
}

// Close revokes the lease, so that the owner is seen dead at once and its
// locks and memberships go, and stops renewing. Idempotent; other calls
// fail with ErrClosed afterwards.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	lease := s.mu.lease
	s.mu.Unlock()
	if err := s.revoke(lease); err != nil {
		return fmt.Errorf("etcd: revoking the lease of %s (it expires by itself): %w", s.owner, err)
	}
	return nil
}

// LiveOwners lists the owners whose sessions are alive under prefix
// (DefaultPrefix if ""): every process registered on the deployment.
func LiveOwners(ctx context.Context, cli *clientv3.Client, prefix string) ([]string, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	live := prefix + "live/"
	resp, err := cli.Get(ctx, live, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("etcd: listing live sessions: %w", err)
	}
	owners := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		owners = append(owners, strings.TrimPrefix(string(kv.Key), live))
	}
	return owners, nil
}
