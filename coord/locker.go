package coord

import (
	"context"
	"sync"
)

// Locker hands out advisory locks: a scanner takes one on a row before
// running its observers, so that two scanners rarely work on one row
// (the paper's lightweight lock service). Advisory only: correctness never
// rests on it (the observer's ack conflict does), so a lock lost to a
// crash or a partition costs at most a duplicate, aborted run.
type Locker interface {
	// TryLock takes key for owner without waiting. held reports that
	// another owner has it; unlock releases it (idempotent).
	TryLock(ctx context.Context, key, owner string) (unlock func(), held bool, err error)
}

// LocalLocker is the in-process Locker for the embedded store, where
// every scanner lives in this process.
type LocalLocker struct {
	mu    sync.Mutex
	owner map[string]string
}

// NewLocalLocker returns an empty LocalLocker.
func NewLocalLocker() *LocalLocker { return &LocalLocker{owner: make(map[string]string)} }

// TryLock implements Locker. An owner may not take a key twice.
func (l *LocalLocker) TryLock(_ context.Context, key, owner string) (func(), bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.owner[key]; ok {
		return nil, true, nil
	}
	l.owner[key] = owner
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.owner[key] == owner {
				delete(l.owner, key)
			}
		})
	}, false, nil
}

// Held returns the number of keys locked (tests and status).
func (l *LocalLocker) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.owner)
}

// Snapshots is what a liveness session does for the garbage collector
// (txn/doc.go, "Garbage collection"): it carries its process's oldest
// start_ts, published with its renewals, so that the collector holds the
// safe point at or below it while the session lives, and it reads the
// oldest that any live session published. Publication is for progress
// only: a read below the safe point fails whatever was published.
type Snapshots interface {
	// PublishOldest gives the session what to publish: the oldest
	// start_ts its process reads at, and whether there is one.
	PublishOldest(oldest func() (uint64, bool))
	// OldestNeeded is the oldest start_ts any live session published
	// and the owner that published it; TS 0 when none did.
	OldestNeeded(ctx context.Context) (Oldest, error)
}

// Oldest is an oldest start_ts published, and its publisher.
type Oldest struct {
	TS    uint64
	Owner string
}
