package coord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"sync"
)

// Liveness reports whether lock owners are alive. Implementations are safe
// for concurrent use.
type Liveness interface {
	// Alive reports whether owner is alive. An error means the answer is
	// unknown; the caller must then treat the owner as alive.
	Alive(ctx context.Context, owner string) (bool, error)
}

// NewOwnerID returns a fresh owner identity: host, pid and random bytes,
// never reused.
func NewOwnerID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b[:])
}

// Local is the in-process Liveness of the embedded store: owners registered
// here are alive, every other owner is dead. Safe for concurrent use.
type Local struct {
	mu struct {
		sync.RWMutex
		alive map[string]struct{}
	}
}

// NewLocal returns a Local with no owner registered.
func NewLocal() *Local {
	l := &Local{}
	l.mu.alive = make(map[string]struct{})
	return l
}

// Register marks owner alive.
func (l *Local) Register(owner string) {
	l.mu.Lock()
	l.mu.alive[owner] = struct{}{}
	l.mu.Unlock()
}

// Unregister marks owner dead (its process exited or crashed).
func (l *Local) Unregister(owner string) {
	l.mu.Lock()
	delete(l.mu.alive, owner)
	l.mu.Unlock()
}

// Alive implements Liveness.
func (l *Local) Alive(_ context.Context, owner string) (bool, error) {
	l.mu.RLock()
	_, ok := l.mu.alive[owner]
	l.mu.RUnlock()
	return ok, nil
}

// TTLOnly is the Liveness of a process that cannot learn who else is alive
// (a store shared with other processes and no coordination service): every
// owner is alive, so another process's lock is judged by its TTL alone,
// never rolled back while its owner's heartbeat keeps it fresh.
type TTLOnly struct{}

// Alive implements Liveness: always true.
func (TTLOnly) Alive(context.Context, string) (bool, error) { return true, nil }
