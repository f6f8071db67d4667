package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage/pebble"
)

// Session lease bounds a client may ask for.
const (
	MinSessionTTL = 100 * time.Millisecond
	MaxSessionTTL = 5 * time.Minute
	maxKeyLen     = 4096
)

// coordService is the lock service: liveness sessions and advisory locks.
// Sessions live in memory: after a restart a client opens a new one at its
// next renewal, and until the restart grace has passed an owner with no
// session is reported alive (it may not have renewed yet). See doc.go,
// "Liveness".
//
// The grace is RestartGrace, or the longest lease any server of this store
// granted if that is longer: a lease granted before the restart may run
// that long, and its holder, its Check passing, must not be reported dead
// meanwhile. The longest lease is recorded durably before a session
// holding it is opened.
//
// Concurrency: mu guards every field of mu; leaseMu serializes raising
// the recorded lease; expiry is judged on the server's monotonic clock.
type coordService struct {
	rpcpb.UnimplementedCoordServer
	srv   *Server
	start time.Time
	// grace: how long after start owners without a session are alive.
	grace time.Duration

	leaseMu sync.Mutex
	// longest is the longest lease recorded in the store. Guarded by
	// leaseMu; only grows.
	longest time.Duration

	mu struct {
		sync.Mutex
		sessions map[string]*session
		owners   map[string]int    // owner → sessions (live, or expired and not yet ended)
		locks    map[string]string // key → session id
		// opening counts the sessions being opened (their lease being
		// recorded), per owner and in all: they count against the limits.
		opening      map[string]int
		openingTotal int
		// ended holds, during the grace only, the owners a session of
		// this server ended for (expired or closed): the grace covers
		// sessions lost with an earlier server's memory, not these.
		// Cleared once the grace is over.
		ended map[string]struct{}
	}
}

type session struct {
	id, owner string
	ttl       time.Duration
	expires   time.Time
	locks     map[string]struct{}
	// oldest is the oldest start_ts the session's process reads at, as
	// of its last renewal; 0 for none.
	oldest uint64
}

// longestLeaseKey is the record (pebble.Record, beside the nonce table's)
// of the longest lease granted, in milliseconds (8 bytes).
var longestLeaseKey = []byte("Llongest")

// openCoord starts the lock service, its grace covering every lease the
// store's earlier servers granted.
func openCoord(ctx context.Context, s *Server) (*coordService, error) {
	c := &coordService{srv: s, start: time.Now()}
	err := s.store.ScanRecords(ctx, longestLeaseKey, func(k, v []byte) bool {
		if bytes.Equal(k, longestLeaseKey) && len(v) == 8 {
			c.longest = time.Duration(binary.BigEndian.Uint64(v)) * time.Millisecond
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	c.grace = max(s.opts.RestartGrace, c.longest)
	c.mu.sessions = map[string]*session{}
	c.mu.owners = map[string]int{}
	c.mu.locks = map[string]string{}
	c.mu.opening = map[string]int{}
	c.mu.ended = map[string]struct{}{}
	return c, nil
}

// recordLease records ttl durably if it is the longest lease yet.
func (c *coordService) recordLease(ctx context.Context, ttl time.Duration) error {
	c.leaseMu.Lock()
	defer c.leaseMu.Unlock()
	if ttl <= c.longest {
		return nil
	}
	v := binary.BigEndian.AppendUint64(nil, uint64(ttl.Milliseconds()))
	if err := c.srv.store.WriteRecords(ctx, []pebble.Record{{Key: longestLeaseKey, Value: v}}, true); err != nil {
		return err
	}
	c.longest = ttl
	return nil
}

func (c *coordService) size() (sessions, locks int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.sessions), len(c.mu.locks)
}

// liveLocked returns the session id if it exists and has not expired,
// ending it if it expired.
func (c *coordService) liveLocked(id string, now time.Time) *session {
	s := c.mu.sessions[id]
	if s != nil && !now.Before(s.expires) {
		c.endLocked(s)
		return nil
	}
	return s
}

func (c *coordService) endLocked(s *session) {
	delete(c.mu.sessions, s.id)
	if c.mu.owners[s.owner]--; c.mu.owners[s.owner] <= 0 {
		delete(c.mu.owners, s.owner)
	}
	if c.mu.ended != nil {
		c.mu.ended[s.owner] = struct{}{}
	}
	for k := range s.locks {
		if c.mu.locks[k] == s.id {
			delete(c.mu.locks, k)
		}
	}
	c.srv.log.Debug("session ended", "owner", s.owner, "session", s.id)
}

// sweep ends expired sessions (releasing their locks).
func (c *coordService) sweep() {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweepLocked(now)
}

func (c *coordService) sweepLocked(now time.Time) {
	if now.Sub(c.start) >= c.grace {
		c.mu.ended = nil
	}
	for _, s := range c.mu.sessions {
		if !now.Before(s.expires) {
			c.srv.log.Info("session expired", "owner", s.owner)
			c.endLocked(s)
		}
	}
}

// Limits (Options.MaxSessions, MaxSessionsPerOwner, MaxLocks,
// MaxLocksPerSession; doc.go, "Limits"). A client here is a session's
// owner (each process opens one session under its own owner ID, and a new
// one only when the server forgot the old) for sessions, and a session
// for its locks: the token is shared by every client and a peer's address
// changes with every reconnection, so neither tells clients apart. The
// global limits bound what many owners together hold. Sessions that
// expired but were not swept yet are ended before a limit refuses.

// What makes room, as the refusals say.
const (
	freeSessions = "closing a session, or its lease running out, makes room"
	freeLocks    = "unlocking, or the end of the holding session, makes room"
)

// reserveSessionLocked counts a session of owner about to be opened, or
// refuses it (*limitError).
func (c *coordService) reserveSessionLocked(owner string, now time.Time) error {
	o := c.srv.opts
	if over(c.mu.owners[owner]+c.mu.opening[owner], o.MaxSessionsPerOwner) || over(len(c.mu.sessions)+c.mu.openingTotal, o.MaxSessions) {
		c.sweepLocked(now)
	}
	if n := c.mu.owners[owner] + c.mu.opening[owner]; over(n, o.MaxSessionsPerOwner) {
		return &limitError{what: fmt.Sprintf("owner %.64q has %d live sessions", owner, n),
			limit: o.MaxSessionsPerOwner, option: "MaxSessionsPerOwner", flag: "--max-sessions-per-owner", frees: freeSessions}
	}
	if n := len(c.mu.sessions) + c.mu.openingTotal; over(n, o.MaxSessions) {
		return &limitError{what: fmt.Sprintf("%d live sessions", n),
			limit: o.MaxSessions, option: "MaxSessions", flag: "--max-sessions", frees: freeSessions}
	}
	c.mu.opening[owner]++
	c.mu.openingTotal++
	return nil
}

func (c *coordService) unreserveSessionLocked(owner string) {
	if c.mu.opening[owner]--; c.mu.opening[owner] <= 0 {
		delete(c.mu.opening, owner)
	}
	c.mu.openingTotal--
}

// roomForLockLocked refuses (*limitError) a new lock of s.
func (c *coordService) roomForLockLocked(s *session, now time.Time) error {
	o := c.srv.opts
	if n := len(s.locks); over(n, o.MaxLocksPerSession) {
		return &limitError{what: fmt.Sprintf("the session of owner %.64q holds %d advisory locks", s.owner, n),
			limit: o.MaxLocksPerSession, option: "MaxLocksPerSession", flag: "--max-locks-per-session", frees: freeLocks}
	}
	if over(len(c.mu.locks), o.MaxLocks) {
		c.sweepLocked(now)
	}
	if n := len(c.mu.locks); over(n, o.MaxLocks) {
		return &limitError{what: fmt.Sprintf("%d advisory locks held", n),
			limit: o.MaxLocks, option: "MaxLocks", flag: "--max-locks", frees: freeLocks}
	}
	return nil
}

// checkTTL bounds the lease asked for, in milliseconds before converting:
// a huge value would overflow the Duration and could wrap into range.
func checkTTL(ms int64) (time.Duration, error) {
	if ms < MinSessionTTL.Milliseconds() || ms > MaxSessionTTL.Milliseconds() {
		return 0, status.Errorf(codes.InvalidArgument, "session ttl %dms outside [%v, %v]", ms, MinSessionTTL, MaxSessionTTL)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// OpenSession implements rpcpb.CoordServer.
func (c *coordService) OpenSession(ctx context.Context, req *rpcpb.OpenSessionRequest) (*rpcpb.OpenSessionResponse, error) {
	if req.Owner == "" || len(req.Owner) > maxKeyLen {
		return nil, status.Error(codes.InvalidArgument, "session owner must be 1 to 4096 bytes")
	}
	ttl, err := checkTTL(req.TtlMs)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	err = c.reserveSessionLocked(req.Owner, time.Now())
	c.mu.Unlock()
	if err != nil {
		return nil, c.srv.status(err) // before the lease is recorded: nothing changed
	}
	err = c.recordLease(ctx, ttl)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unreserveSessionLocked(req.Owner)
	if err != nil {
		return nil, c.srv.status(err)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	s := &session{id: hex.EncodeToString(b[:]), owner: req.Owner, ttl: ttl, expires: time.Now().Add(ttl), locks: map[string]struct{}{},
		oldest: req.OldestStartTs}
	c.mu.sessions[s.id] = s
	c.mu.owners[s.owner]++
	return &rpcpb.OpenSessionResponse{Session: s.id, TtlMs: ttl.Milliseconds()}, nil
}

// KeepAlive implements rpcpb.CoordServer: NotFound once the session has
// expired (the client must open a new one).
func (c *coordService) KeepAlive(_ context.Context, req *rpcpb.KeepAliveRequest) (*rpcpb.KeepAliveResponse, error) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.liveLocked(req.Session, now)
	if s == nil {
		return nil, status.Error(codes.NotFound, "no such session (expired, or the server restarted)")
	}
	s.expires = now.Add(s.ttl)
	s.oldest = req.OldestStartTs
	return &rpcpb.KeepAliveResponse{TtlMs: s.ttl.Milliseconds()}, nil
}

// oldest is the oldest start_ts a live session published (0 for none)
// and the session's owner.
func (c *coordService) oldest() (uint64, string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var o uint64
	var owner string
	for id, s := range c.mu.sessions {
		if c.liveLocked(id, now) == nil || s.oldest == 0 {
			continue
		}
		if o == 0 || s.oldest < o {
			o, owner = s.oldest, s.owner
		}
	}
	return o, owner
}

// Oldest implements rpcpb.CoordServer.
func (c *coordService) Oldest(context.Context, *rpcpb.OldestRequest) (*rpcpb.OldestResponse, error) {
	ts, owner := c.oldest()
	return &rpcpb.OldestResponse{OldestStartTs: ts, Owner: owner}, nil
}

// CloseSession implements rpcpb.CoordServer; closing an unknown session
// is not an error.
func (c *coordService) CloseSession(_ context.Context, req *rpcpb.CloseSessionRequest) (*rpcpb.CloseSessionResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.mu.sessions[req.Session]; s != nil {
		c.endLocked(s)
	}
	return &rpcpb.CloseSessionResponse{}, nil
}

// Alive implements rpcpb.CoordServer: an owner is alive while it has a
// live session, and, during the restart grace (see coordService), when it
// has none (its session may have been lost with the server's memory)
// unless a session of this server ended for it: that owner's session was
// not lost, it expired (or was closed) here.
func (c *coordService) Alive(_ context.Context, req *rpcpb.AliveRequest) (*rpcpb.AliveResponse, error) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.owners[req.Owner] > 0 {
		for _, s := range c.mu.sessions {
			if s.owner == req.Owner && c.liveLocked(s.id, now) != nil {
				return &rpcpb.AliveResponse{Alive: true}, nil
			}
		}
	}
	if _, ended := c.mu.ended[req.Owner]; ended {
		return &rpcpb.AliveResponse{Alive: false}, nil
	}
	return &rpcpb.AliveResponse{Alive: now.Sub(c.start) < c.grace}, nil
}

// TryLock implements rpcpb.CoordServer: an advisory lock held by the
// session until Unlock or the session's end.
func (c *coordService) TryLock(_ context.Context, req *rpcpb.TryLockRequest) (*rpcpb.TryLockResponse, error) {
	if req.Key == "" || len(req.Key) > maxKeyLen {
		return nil, status.Error(codes.InvalidArgument, "lock key must be 1 to 4096 bytes")
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.liveLocked(req.Session, now)
	if s == nil {
		return nil, status.Error(codes.NotFound, "no such session (expired, or the server restarted)")
	}
	if holder, ok := c.mu.locks[req.Key]; ok && c.liveLocked(holder, now) != nil {
		return &rpcpb.TryLockResponse{Held: holder != s.id}, nil
	}
	// A new lock of s (its holder, if any, ended): nothing is taken if it
	// would pass a limit.
	if err := c.roomForLockLocked(s, now); err != nil {
		return nil, c.srv.status(err)
	}
	c.mu.locks[req.Key] = s.id
	s.locks[req.Key] = struct{}{}
	return &rpcpb.TryLockResponse{}, nil
}

// Unlock implements rpcpb.CoordServer; releasing a lock not held is not an
// error.
func (c *coordService) Unlock(_ context.Context, req *rpcpb.UnlockRequest) (*rpcpb.UnlockResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.locks[req.Key] == req.Session {
		delete(c.mu.locks, req.Key)
		if s := c.mu.sessions[req.Session]; s != nil {
			delete(s.locks, req.Key)
		}
	}
	return &rpcpb.UnlockResponse{}, nil
}
