// Package remote is the coordination service of a percolator server, as
// a client sees it: a liveness session with a lease (Session), which is
// also the process's coord.Liveness and coord.Locker.
//
// Invariants:
//
//  1. The process's owner ID is alive (to every client asking the server)
//     while its session is: opened, and renewed before its lease ran out.
//     A process that dies stops renewing; its session expires after the
//     lease, and its locks become resolvable by everyone at once.
//  2. Check() is nil only while this process can prove its session is
//     live by its own monotonic clock: until the send time of the last
//     renewal the server acknowledged, plus the lease, less a tenth for
//     clock drift. A commit checks it before its commit point (txn
//     Options.Session); a paused process fails the check when it resumes.
//  3. A session found expired (the server forgot it: a restart, or a
//     pause longer than the lease) is replaced by a new one for the same
//     owner at once; until then Check fails.
//  4. Advisory locks are held by the session and released when it ends;
//     in this process a local lock table keeps two scanners of one
//     process from sharing a server lock.
//  5. Nothing waits long on a server that does not answer: a renewal ends
//     with the session's Close, and Close's last call (and an Unlock's)
//     is one try bounded by the connection's cleanup budget
//     (rpc.DialOptions.CleanupBudget; Close half of it). A session not
//     closed expires with its lease, a lock not released with the
//     session.
package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
)

// ErrSessionLost: the process cannot prove its session is live.
var ErrSessionLost = errors.New("coord: liveness session lost")

// DefaultTTL is a session's default lease.
const DefaultTTL = 10 * time.Second

// Session is a process's liveness session with the server. Safe for
// concurrent use.
type Session struct {
	conn  *rpc.Conn
	owner string
	ttl   time.Duration
	log   *slog.Logger
	local *coord.LocalLocker

	// ctx ends at Close: it stops the renewal loop, and a renewal in
	// flight with it (Close must not wait for one to a server that does
	// not answer).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// oldest is what the session publishes (coord.Snapshots); nil: none.
	oldest atomic.Pointer[func() (uint64, bool)]

	mu struct {
		sync.Mutex
		id string
		// validUntil: the session is provably live before it (monotonic).
		validUntil time.Time
		closed     bool
	}
}

var (
	_ coord.Liveness  = (*Session)(nil)
	_ coord.Locker    = (*Session)(nil)
	_ coord.Snapshots = (*Session)(nil)
)

// PublishOldest implements coord.Snapshots: oldest is sent with every
// renewal (and a new session's opening).
func (s *Session) PublishOldest(oldest func() (uint64, bool)) { s.oldest.Store(&oldest) }

// published is the oldest start_ts to send, 0 for none.
func (s *Session) published() uint64 {
	if f := s.oldest.Load(); f != nil {
		if ts, ok := (*f)(); ok {
			return ts
		}
	}
	return 0
}

// OldestNeeded implements coord.Snapshots: the server's answer.
func (s *Session) OldestNeeded(ctx context.Context) (coord.Oldest, error) {
	var resp *rpcpb.OldestResponse
	err := s.conn.Do(ctx, func(ctx context.Context, _ int) (err error) {
		resp, err = s.conn.Coord.Oldest(ctx, &rpcpb.OldestRequest{})
		return err
	})
	if err != nil {
		return coord.Oldest{}, fmt.Errorf("coord: reading the oldest open transaction: %w", err)
	}
	return coord.Oldest{TS: resp.OldestStartTs, Owner: resp.Owner}, nil
}

// Open opens a session for owner with lease ttl (0: DefaultTTL) and renews
// it in the background every ttl/3 until Close.
func Open(ctx context.Context, conn *rpc.Conn, owner string, ttl time.Duration, log *slog.Logger) (*Session, error) {
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Session{conn: conn, owner: owner, ttl: ttl, log: log, local: coord.NewLocalLocker()}
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.renewLoop()
	return s, nil
}

// Owner returns the session's owner ID.
func (s *Session) Owner() string { return s.owner }

func (s *Session) open(ctx context.Context) error {
	sent := time.Now()
	var resp *rpcpb.OpenSessionResponse
	err := s.conn.Do(ctx, func(ctx context.Context, _ int) (err error) {
		sent = time.Now()
		resp, err = s.conn.Coord.OpenSession(ctx, &rpcpb.OpenSessionRequest{Owner: s.owner, TtlMs: s.ttl.Milliseconds(), OldestStartTs: s.published()})
		return err
	})
	if err != nil {
		return fmt.Errorf("coord: opening a session: %w", err)
	}
	s.mu.Lock()
	s.mu.id = resp.Session
	s.mu.validUntil = sent.Add(s.margin(time.Duration(resp.TtlMs) * time.Millisecond))
	s.mu.Unlock()
	return nil
}

// margin is the part of a lease this process counts on: a tenth less, for
// the drift between its clock and the server's.
func (s *Session) margin(ttl time.Duration) time.Duration { return ttl - ttl/10 }

// renewLoop renews the session until Close (coord.Renewal): every ttl/3,
// and every ttl/10 while renewals fail.
func (s *Session) renewLoop() {
	defer s.wg.Done()
	every := func() time.Duration { return s.ttl / 3 }
	r := coord.Renewal{Renew: s.renew, Every: every, Retry: s.ttl / 10, Logger: s.log, Service: "coord", Owner: s.owner}
	r.Run(s.ctx)
}

// renew extends the lease once; a session the server no longer knows is
// replaced.
func (s *Session) renew(ctx context.Context) error {
	s.mu.Lock()
	id := s.mu.id
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.ttl/3)
	defer cancel()
	sent := time.Now()
	resp, err := s.conn.Coord.KeepAlive(ctx, &rpcpb.KeepAliveRequest{Session: id, OldestStartTs: s.published()})
	if status.Code(err) == codes.NotFound {
		s.log.Warn("coord: session expired on the server; opening a new one", "owner", s.owner)
		return s.open(ctx)
	}
	if err != nil {
		return s.conn.Error(err)
	}
	s.mu.Lock()
	if s.mu.id == id {
		s.mu.validUntil = sent.Add(s.margin(time.Duration(resp.TtlMs) * time.Millisecond))
	}
	s.mu.Unlock()
	return nil
}

// Check reports whether the session is provably live now (invariant 2).
func (s *Session) Check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return fmt.Errorf("%w: closed", ErrSessionLost)
	}
	if late := time.Since(s.mu.validUntil); late >= 0 {
		return fmt.Errorf("%w: not renewed for %v past its lease", ErrSessionLost, late.Round(time.Millisecond))
	}
	return nil
}

// Alive implements coord.Liveness: the server's answer (this process's own
// owner is alive).
func (s *Session) Alive(ctx context.Context, owner string) (bool, error) {
	if owner == s.owner {
		return true, nil
	}
	var alive bool
	err := s.conn.Do(ctx, func(ctx context.Context, _ int) error {
		resp, err := s.conn.Coord.Alive(ctx, &rpcpb.AliveRequest{Owner: owner})
		if err == nil {
			alive = resp.Alive
		}
		return err
	})
	return alive, err
}

// TryLock implements coord.Locker through the server, after the local
// table (invariant 4). An error (the server unreachable) leaves the key
// unlocked.
func (s *Session) TryLock(ctx context.Context, key, owner string) (func(), bool, error) {
	unlockLocal, held, err := s.local.TryLock(ctx, key, owner)
	if err != nil || held {
		return nil, held, err
	}
	s.mu.Lock()
	id := s.mu.id
	s.mu.Unlock()
	var resp *rpcpb.TryLockResponse
	err = s.conn.Do(ctx, func(ctx context.Context, _ int) (err error) {
		resp, err = s.conn.Coord.TryLock(ctx, &rpcpb.TryLockRequest{Session: id, Key: key})
		return err
	})
	if err != nil || resp.Held {
		unlockLocal()
		return nil, err == nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			// One try, briefly: a lock not released here is with the
			// session's end.
			ctx, cancel := context.WithTimeout(context.Background(), s.conn.CleanupBudget())
			defer cancel()
			_, _ = s.conn.Coord.Unlock(ctx, &rpcpb.UnlockRequest{Session: id, Key: key})
			unlockLocal()
		})
	}, false, nil
}

// Close ends the session at once (its locks resolvable by others) and
// stops renewing it. It tries once, for half the connection's cleanup
// budget (rpc.DialOptions.CleanupBudget): a session whose server does not
// answer then expires with its lease, and a process that stops on a
// signal, its cleanup done within that budget, does not wait longer for
// a server that is down.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	id := s.mu.id
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), s.conn.CleanupBudget()/2)
	defer cancel()
	_, err := s.conn.Coord.CloseSession(ctx, &rpcpb.CloseSessionRequest{Session: id})
	return s.conn.Error(err)
}
