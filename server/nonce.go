package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/seed-992972ee/percolator/storage"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/storage/pebble"
)

// GroupLen is the length of a nonce group: 128 random bits.
const GroupLen = 16

// Nonce errors, mapped to gRPC codes by the services.
var (
	// errUnknownGroup: the call's group was never registered, or expired
	// after its grace period. The call is refused, never applied.
	errUnknownGroup = errors.New("unknown nonce group (never opened, or expired after its grace period): open a new one")
	// errBelowMark: the call's number is below the group's low-water mark,
	// so its record may be gone; it is refused, never applied.
	errBelowMark = errors.New("nonce below the group's low-water mark: the call's outcome is no longer kept")
	// errNonceReused: the number was used by a call with another body.
	errNonceReused = errors.New("nonce reused with a different request")
)

// Record keys of the nonce table (pebble.Record, in the same batch as the
// call's effect):
//
//	"g" group          → the group's low-water mark (8 bytes)
//	"n" group seq(8)   → the request's hash (hashLen bytes), then the result
const hashLen = 16

func groupKey(g [GroupLen]byte) []byte { return append([]byte{'g'}, g[:]...) }

func callKey(g [GroupLen]byte, seq uint64) []byte {
	k := append([]byte{'n'}, g[:]...)
	return binary.BigEndian.AppendUint64(k, seq)
}

// recordStore is what the nonce table needs of the server's store.
type recordStore interface {
	WriteRecords(ctx context.Context, recs []pebble.Record, durable bool) error
	ScanRecords(ctx context.Context, prefix []byte, fn func(key, value []byte) bool) error
}

// nonceTable is the server's nonce manager (HBase's, HBASE-3787): it runs each call
// of a (group, seq) once. See doc.go, "Nonces".
//
// Concurrency: mu guards groups and every group's and call's fields
// except a call's done channel, which is closed once under mu.
type nonceTable struct {
	st    recordStore
	grace time.Duration
	now   func() time.Time
	// limits are set before the table is used.
	limits nonceLimits

	// flushMu serializes flushes, so that marks reach the store in the
	// order they rose.
	flushMu sync.Mutex

	mu struct {
		sync.Mutex
		groups map[[GroupLen]byte]*nonceGroup
		// opening counts the groups being registered (their record being
		// written): they count against limits.groups.
		opening int
		size    int // calls held, across groups
		// gc collects the record deletions and marks to persist.
		gc []pebble.Record
	}
}

// nonceLimits bound the table (Options.MaxNonceGroups, MaxNonceCalls,
// MaxNonceCallsPerGroup; 0 or negative: no limit). A group is a client's
// identity here: a client opens one per store it opens (remote.New), and
// the request names nothing else that could tell clients apart (the token
// is shared, a peer's address changes with every reconnection). So the
// calls are bounded per group and in all, the groups in all only.
type nonceLimits struct{ groups, calls, perGroup int }

type nonceGroup struct {
	// mark: calls below it are refused. Only grows.
	mark uint64
	// last is when the group's last call began or ended (or the load).
	last time.Time
	// running counts the group's calls whose apply has not returned.
	// Invariant: a group with running > 0 does not expire.
	running int
	calls   map[uint64]*nonceCall
}

// nonceCall is one numbered call: running until done is closed; then ok
// tells whether it succeeded, and result holds its result (a failed call
// is removed before done closes). ok and result are written before done
// is closed and never after.
type nonceCall struct {
	hash   [hashLen]byte
	done   chan struct{}
	ok     bool
	result []byte
}

func newNonceTable(st recordStore, grace time.Duration, now func() time.Time) *nonceTable {
	t := &nonceTable{st: st, grace: grace, now: now}
	t.mu.groups = make(map[[GroupLen]byte]*nonceGroup)
	return t
}

// load reads the stored groups and calls (at server start).
func (t *nonceTable) load(ctx context.Context) error {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.st.ScanRecords(ctx, []byte{'g'}, func(k, v []byte) bool {
		var g [GroupLen]byte
		if len(k) != 1+GroupLen || len(v) != 8 {
			return true
		}
		copy(g[:], k[1:])
		t.mu.groups[g] = &nonceGroup{mark: binary.BigEndian.Uint64(v), last: now, calls: map[uint64]*nonceCall{}}
		return true
	})
	if err != nil {
		return err
	}
	return t.st.ScanRecords(ctx, []byte{'n'}, func(k, v []byte) bool {
		var g [GroupLen]byte
		if len(k) != 1+GroupLen+8 || len(v) < hashLen {
			return true
		}
		copy(g[:], k[1:])
		seq := binary.BigEndian.Uint64(k[1+GroupLen:])
		grp := t.mu.groups[g]
		if grp == nil || seq < grp.mark {
			t.mu.gc = append(t.mu.gc, pebble.Record{Key: bytes.Clone(k), Delete: true})
			return true
		}
		c := &nonceCall{done: make(chan struct{}), ok: true, result: bytes.Clone(v[hashLen:])}
		copy(c.hash[:], v)
		close(c.done)
		grp.calls[seq] = c
		t.mu.size++
		return true
	})
}

// open registers group durably; registering it again is harmless. A new
// group past limits.groups is refused (*limitError), writing nothing.
func (t *nonceTable) open(ctx context.Context, g [GroupLen]byte) error {
	t.mu.Lock()
	grp, ok := t.mu.groups[g]
	if ok {
		grp.last = t.now()
		t.mu.Unlock()
		return nil
	}
	if n := len(t.mu.groups) + t.mu.opening; over(n, t.limits.groups) {
		t.mu.Unlock()
		return &limitError{what: fmt.Sprintf("%d nonce groups open (each kept %v after its last call)", n, t.grace),
			limit: t.limits.groups, option: "MaxNonceGroups", flag: "--max-nonce-groups",
			frees: "a group is forgotten once it has had no call for its grace period"}
	}
	t.mu.opening++
	t.mu.Unlock()
	err := t.st.WriteRecords(ctx, []pebble.Record{{Key: groupKey(g), Value: make([]byte, 8)}}, true)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.opening--
	if err != nil {
		return err
	}
	if _, ok := t.mu.groups[g]; !ok {
		t.mu.groups[g] = &nonceGroup{last: t.now(), calls: map[uint64]*nonceCall{}}
	}
	return nil
}

// recorder returns the records a call writes with its effect.
type recorder func(result []byte) []pebble.Record

// do runs apply once for (g, seq): a duplicate of a call that succeeded
// gets its result without running apply (replayed); a duplicate of a call
// still running waits for it; a duplicate of a failed call runs apply
// again. apply must write rec(result) in the same atomic write as its
// effect, and return the same result.
func (t *nonceTable) do(ctx context.Context, g [GroupLen]byte, seq, low uint64, hash [hashLen]byte, apply func(rec recorder) ([]byte, error)) (result []byte, replayed bool, err error) {
	if low > seq {
		return nil, false, fmt.Errorf("%w: low-water mark %d above the call's number %d", errInvalidNonce, low, seq)
	}
	for {
		c, wait, err := t.begin(g, seq, low, hash)
		if err != nil {
			return nil, false, err
		}
		if wait == nil {
			result, err := apply(func(res []byte) []pebble.Record {
				v := make([]byte, 0, hashLen+len(res))
				v = append(append(v, hash[:]...), res...)
				return []pebble.Record{{Key: callKey(g, seq), Value: v}}
			})
			t.finish(g, seq, c, result, err)
			return result, false, err
		}
		select {
		case <-wait.done:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		// The outcome is the call's own, not the table's: a mark raised
		// since may already have dropped the call from the table.
		if wait.ok {
			return wait.result, true, nil
		}
		// The call failed and was removed: run it again.
	}
}

var errInvalidNonce = errors.New("invalid nonce")

// begin claims (g, seq) for a new run (c), or returns the call to wait for
// or replay (wait, possibly already done).
func (t *nonceTable) begin(g [GroupLen]byte, seq, low uint64, hash [hashLen]byte) (c, wait *nonceCall, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	grp := t.mu.groups[g]
	if grp == nil {
		return nil, nil, errUnknownGroup
	}
	grp.last = t.now()
	// low <= seq: the call is below the raised mark iff below the old.
	if seq < grp.mark {
		return nil, nil, errBelowMark
	}
	old := grp.calls[seq]
	if old == nil {
		if err := t.roomLocked(g, grp, low); err != nil {
			return nil, nil, err // refused before the mark moves: nothing changed
		}
	}
	if low > grp.mark {
		t.raiseMarkLocked(g, grp, low)
	}
	if old != nil {
		if old.hash != hash {
			return nil, nil, errNonceReused
		}
		return nil, old, nil
	}
	c = &nonceCall{hash: hash, done: make(chan struct{})}
	grp.calls[seq] = c
	grp.running++
	t.mu.size++
	return c, nil, nil
}

// freeCalls is what makes room for calls, as the refusals say.
const freeCalls = "a client frees its calls by raising its low-water mark as their replies arrive"

// roomLocked refuses (*limitError) a new call of grp that would pass the
// limits, counting the calls it holds once a mark raised to low has
// dropped the finished ones below it.
func (t *nonceTable) roomLocked(g [GroupLen]byte, grp *nonceGroup, low uint64) error {
	if !over(len(grp.calls), t.limits.perGroup) && !over(t.mu.size, t.limits.calls) {
		return nil // room even if the mark drops nothing
	}
	dropped := 0
	if low > grp.mark {
		for seq, c := range grp.calls {
			select {
			case <-c.done:
				if seq < low {
					dropped++
				}
			default:
			}
		}
	}
	if n := len(grp.calls) - dropped; over(n, t.limits.perGroup) {
		return &limitError{what: fmt.Sprintf("nonce group %x… holds %d calls (at or above its client's low-water mark %d)", g[:4], n, max(low, grp.mark)),
			limit: t.limits.perGroup, option: "MaxNonceCallsPerGroup", flag: "--max-nonce-calls-per-group", frees: freeCalls}
	}
	if n := t.mu.size - dropped; over(n, t.limits.calls) {
		return &limitError{what: fmt.Sprintf("the nonce table holds %d calls", n),
			limit: t.limits.calls, option: "MaxNonceCalls", flag: "--max-nonce-calls", frees: freeCalls}
	}
	return nil
}

// finish ends a run: a success keeps its result, a failure frees the
// number for a retry.
func (t *nonceTable) finish(g [GroupLen]byte, seq uint64, c *nonceCall, result []byte, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if grp := t.mu.groups[g]; grp != nil { // a group with a call running stays
		grp.running--
		grp.last = t.now()
		if err != nil && grp.calls[seq] == c {
			delete(grp.calls, seq)
			t.mu.size--
		}
	}
	if err == nil {
		c.ok, c.result = true, result
	}
	close(c.done)
}

// raiseMarkLocked moves grp's mark to low, dropping the finished calls
// below it (their records are deleted, with the new mark, by the next
// flush). A call still running below the mark is kept until a later raise.
func (t *nonceTable) raiseMarkLocked(g [GroupLen]byte, grp *nonceGroup, low uint64) {
	grp.mark = low
	for seq, c := range grp.calls {
		if seq >= low {
			continue
		}
		select {
		case <-c.done:
		default:
			continue
		}
		delete(grp.calls, seq)
		t.mu.size--
		t.mu.gc = append(t.mu.gc, pebble.Record{Key: callKey(g, seq), Delete: true})
	}
	t.mu.gc = append(t.mu.gc, pebble.Record{Key: groupKey(g), Value: binary.BigEndian.AppendUint64(nil, low)})
}

// flush persists the collected deletions and marks in one batch, without
// waiting for the sync: losing it in a crash loses nothing but space (a
// mark and the deletions it allows go together), and expires groups idle
// past the grace period.
func (t *nonceTable) flush(ctx context.Context) error {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	now := t.now()
	t.mu.Lock()
	for g, grp := range t.mu.groups {
		if grp.running > 0 || now.Sub(grp.last) <= t.grace {
			continue
		}
		for seq := range grp.calls {
			t.mu.gc = append(t.mu.gc, pebble.Record{Key: callKey(g, seq), Delete: true})
		}
		t.mu.size -= len(grp.calls)
		t.mu.gc = append(t.mu.gc, pebble.Record{Key: groupKey(g), Delete: true})
		delete(t.mu.groups, g)
	}
	recs := t.mu.gc
	t.mu.gc = nil
	t.mu.Unlock()
	// Later records win within a batch, so a group's newest mark is the one
	// kept. Forgetting frees space: it may use the disk reserve.
	return t.st.WriteRecords(storage.WithReserve(ctx), recs, false)
}

// size returns the number of calls held and groups known.
func (t *nonceTable) size() (calls, groups int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.size, len(t.mu.groups)
}
