package server

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble"
)

// Unit tests of the nonce table over a real store on an in-memory FS. A
// call's "effect" is a counter in the store, incremented with the call's
// record in one batch, as the storage service does.

// clock is the table's injected clock. Each reading is announced on read
// (if set), which tells a test that a call has passed begin.
type clock struct {
	mu   sync.Mutex
	t    time.Time
	read chan struct{}
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read != nil {
		select {
		case c.read <- struct{}{}:
		default:
		}
	}
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// watch makes the next readings announce themselves on the returned
// channel.
func (c *clock) watch() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read = make(chan struct{}, 1)
	return c.read
}

type nonceEnv struct {
	fs    vfs.FS
	st    *pebble.Store
	clock *clock
	tab   *nonceTable
	// runs counts the applies that ran (committed or failed).
	mu   sync.Mutex
	runs int
}

const grace = time.Minute

func newNonceEnv(t *testing.T) *nonceEnv {
	t.Helper()
	e := &nonceEnv{fs: vfs.NewMem(), clock: &clock{t: time.Unix(1e9, 0)}}
	e.reopen(t)
	return e
}

// reopen opens the store and a new table on it, as a restarted server
// does.
func (e *nonceEnv) reopen(t *testing.T) {
	t.Helper()
	if e.st != nil {
		if err := e.st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	st, err := pebble.Open("/db", pebble.Options{FS: e.fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e.st = st
	e.tab = newNonceTable(st, grace, e.clock.now)
	if err := e.tab.load(context.Background()); err != nil {
		t.Fatal(err)
	}
}

var (
	ctx    = context.Background()
	groupA = [GroupLen]byte{'A'}
	hashX  = [hashLen]byte{'X'}
	hashY  = [hashLen]byte{'Y'}
)

// incr returns an apply that adds delta to the counter; it waits for
// release (if not nil) first, and fails with fail (if not nil).
func (e *nonceEnv) incr(delta int64, release <-chan struct{}, fail error) func(rec recorder) ([]byte, error) {
	return func(rec recorder) ([]byte, error) {
		e.mu.Lock()
		e.runs++
		e.mu.Unlock()
		if release != nil {
			<-release
		}
		if fail != nil {
			return nil, fail
		}
		sum, err := e.st.IncrementRecorded(ctx, []byte("r"), "c", "n", delta, func(sum int64) []pebble.Record {
			return rec(binary.BigEndian.AppendUint64(nil, uint64(sum)))
		})
		return binary.BigEndian.AppendUint64(nil, uint64(sum)), err
	}
}

func (e *nonceEnv) applied() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs
}

func (e *nonceEnv) counter(t *testing.T) int64 {
	t.Helper()
	r, err := e.st.ReadRow(ctx, []byte("r"), storage.Filter{{Family: "c", Qualifier: "n"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Cells) == 0 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(r.Cells[0].Value))
}

func (e *nonceEnv) open(t *testing.T, g [GroupLen]byte) {
	t.Helper()
	if err := e.tab.open(ctx, g); err != nil {
		t.Fatal(err)
	}
}

// call is one do; the result is decoded as a sum.
type result struct {
	sum      int64
	replayed bool
	err      error
}

func (e *nonceEnv) do(g [GroupLen]byte, seq, low uint64, h [hashLen]byte, apply func(recorder) ([]byte, error)) result {
	res, replayed, err := e.tab.do(ctx, g, seq, low, h, apply)
	r := result{replayed: replayed, err: err}
	if err == nil {
		r.sum = int64(binary.BigEndian.Uint64(res))
	}
	return r
}

// doAsync runs do in a goroutine, returning once it has passed begin (or
// has returned).
func (e *nonceEnv) doAsync(g [GroupLen]byte, seq, low uint64, h [hashLen]byte, apply func(recorder) ([]byte, error)) <-chan result {
	began := e.clock.watch()
	out := make(chan result, 1)
	go func() { out <- e.do(g, seq, low, h, apply) }()
	select {
	case <-began:
		return out
	case r := <-out:
		done := make(chan result, 1)
		done <- r
		return done
	}
}

func (e *nonceEnv) records(t *testing.T) int {
	t.Helper()
	n := 0
	if err := e.st.ScanRecords(ctx, []byte{'n'}, func(_, _ []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestNonceDuplicateReplays(t *testing.T) {
	e := newNonceEnv(t)
	e.open(t, groupA)
	if r := e.do(groupA, 1, 1, hashX, e.incr(5, nil, nil)); r != (result{sum: 5}) {
		t.Fatalf("first run: %+v", r)
	}
	if r := e.do(groupA, 1, 1, hashX, e.incr(5, nil, nil)); r != (result{sum: 5, replayed: true}) {
		t.Fatalf("duplicate: %+v, want the first run's sum, replayed", r)
	}
	if n, c := e.applied(), e.counter(t); n != 1 || c != 5 {
		t.Fatalf("%d runs, counter %d; want 1 run, 5", n, c)
	}
}

// A duplicate of a call still running waits for it and gets its result.
func TestNonceDuplicateOfRunningCallWaits(t *testing.T) {
	e := newNonceEnv(t)
	e.open(t, groupA)
	release := make(chan struct{})
	first := e.doAsync(groupA, 1, 1, hashX, e.incr(5, release, nil))
	dup := e.doAsync(groupA, 1, 1, hashX, e.incr(5, nil, nil))
	select {
	case r := <-dup:
		t.Fatalf("the duplicate returned %+v while the call ran", r)
	default:
	}
	close(release)
	if r := <-first; r != (result{sum: 5}) {
		t.Fatalf("first run: %+v", r)
	}
	if r := <-dup; r != (result{sum: 5, replayed: true}) {
		t.Fatalf("duplicate: %+v, want the first run's sum, replayed", r)
	}
	if n, c := e.applied(), e.counter(t); n != 1 || c != 5 {
		t.Fatalf("%d runs, counter %d; want 1 run, 5", n, c)
	}
}

// A duplicate of a call that failed runs it again: the failure applied
// nothing. A duplicate waiting on it runs it once it has failed.
func TestNonceDuplicateOfFailedCallRunsAgain(t *testing.T) {
	e := newNonceEnv(t)
	e.open(t, groupA)
	boom := errors.New("boom")
	if r := e.do(groupA, 1, 1, hashX, e.incr(5, nil, boom)); !errors.Is(r.err, boom) {
		t.Fatalf("failing run: %+v", r)
	}
	if r := e.do(groupA, 1, 1, hashX, e.incr(5, nil, nil)); r != (result{sum: 5}) {
		t.Fatalf("run after a failure: %+v, want a new run", r)
	}

	release := make(chan struct{})
	first := e.doAsync(groupA, 2, 1, hashX, e.incr(1, release, boom))
	dup := e.doAsync(groupA, 2, 1, hashX, e.incr(1, nil, nil))
	close(release)
	if r := <-first; !errors.Is(r.err, boom) {
		t.Fatalf("failing run: %+v", r)
	}
	if r := <-dup; r != (result{sum: 6}) {
		t.Fatalf("duplicate of a failed run: %+v, want a new run", r)
	}
	if n, c := e.applied(), e.counter(t); n != 4 || c != 6 {
		t.Fatalf("%d runs, counter %d; want 4 runs, 6", n, c)
	}
}

func TestNonceRefusals(t *testing.T) {
	e := newNonceEnv(t)
	e.open(t, groupA)
	if r := e.do(groupA, 5, 5, hashX, e.incr(1, nil, nil)); r.err != nil {
		t.Fatal(r.err)
	}
	for _, c := range []struct {
		name     string
		g        [GroupLen]byte
		seq, low uint64
		h        [hashLen]byte
		want     error
	}{
		{"another body", groupA, 5, 5, hashY, errNonceReused},
		{"unknown group", [GroupLen]byte{'B'}, 1, 1, hashX, errUnknownGroup},
		{"below the mark", groupA, 4, 4, hashX, errBelowMark},
		{"mark above the call", groupA, 6, 7, hashX, errInvalidNonce},
	} {
		if r := e.do(c.g, c.seq, c.low, c.h, e.incr(100, nil, nil)); !errors.Is(r.err, c.want) {
			t.Errorf("%s: %+v, want %v", c.name, r, c.want)
		}
	}
	if n, c := e.applied(), e.counter(t); n != 1 || c != 1 {
		t.Fatalf("%d runs, counter %d after the refusals; want 1 run, 1", n, c)
	}
}

// Calls below a raised mark are dropped from memory, and from the store
// by the next flush.
func TestNonceMarkCollectsRecords(t *testing.T) {
	e := newNonceEnv(t)
	e.open(t, groupA)
	for seq := uint64(1); seq <= 10; seq++ {
		if r := e.do(groupA, seq, 1, hashX, e.incr(1, nil, nil)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if calls, _ := e.tab.size(); calls != 10 || e.records(t) != 10 {
		t.Fatalf("%d calls held, %d records; want 10", calls, e.records(t))
	}
	if r := e.do(groupA, 11, 8, hashX, e.incr(1, nil, nil)); r.err != nil {
		t.Fatal(r.err)
	}
	if calls, _ := e.tab.size(); calls != 4 { // 8, 9, 10, 11
		t.Fatalf("%d calls held after the mark rose to 8, want 4", calls)
	}
	if err := e.tab.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.records(t); n != 4 {
		t.Fatalf("%d records after the flush, want 4", n)
	}
	e.reopen(t)
	if r := e.do(groupA, 7, 7, hashX, e.incr(1, nil, nil)); !errors.Is(r.err, errBelowMark) {
		t.Fatalf("after a restart, a call below the flushed mark: %+v, want %v", r, errBelowMark)
	}
}

// A group idle past the grace period is forgotten, its records deleted,
// and its calls refused.
func TestNonceGroupExpires(t *testing.T) {
	e := newNonceEnv(t)
	e.open(t, groupA)
	e.open(t, [GroupLen]byte{'B'})
	if r := e.do(groupA, 1, 1, hashX, e.incr(1, nil, nil)); r.err != nil {
		t.Fatal(r.err)
	}
	e.clock.advance(grace / 2)
	e.open(t, [GroupLen]byte{'B'}) // reopening keeps B alive
	e.clock.advance(grace/2 + time.Millisecond)
	if err := e.tab.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if calls, groups := e.tab.size(); calls != 0 || groups != 1 {
		t.Fatalf("%d calls, %d groups after A expired; want 0, 1", calls, groups)
	}
	if n := e.records(t); n != 0 {
		t.Fatalf("%d records of the expired group left", n)
	}
	if r := e.do(groupA, 1, 1, hashX, e.incr(1, nil, nil)); !errors.Is(r.err, errUnknownGroup) {
		t.Fatalf("a call of the expired group: %+v, want %v", r, errUnknownGroup)
	}
	e.reopen(t)
	if _, groups := e.tab.size(); groups != 1 {
		t.Fatalf("after a restart %d groups, want 1 (the expired one stays gone)", groups)
	}
}

// A group is idle from the end of its last call, not from its start:
// expiring it while a call runs, or as soon as a long call ends, would
// answer the call's duplicate (its reply lost) "unknown group" though the
// call applied, and leave its record behind.
func TestNonceGroupWithRunningCallDoesNotExpire(t *testing.T) {
	e := newNonceEnv(t)
	e.open(t, groupA)
	release := make(chan struct{})
	first := e.doAsync(groupA, 1, 1, hashX, e.incr(5, release, nil))
	e.clock.advance(2 * grace)
	if err := e.tab.flush(ctx); err != nil {
		t.Fatal(err)
	}
	close(release)
	if r := <-first; r != (result{sum: 5}) {
		t.Fatalf("first run: %+v", r)
	}
	if err := e.tab.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if r := e.do(groupA, 1, 1, hashX, e.incr(5, nil, nil)); r != (result{sum: 5, replayed: true}) {
		t.Fatalf("duplicate after the long call ended: %+v, want its sum, replayed", r)
	}
	if n := e.applied(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

// The table survives a restart: a duplicate of a call that ran before it
// gets the call's result and applies nothing.
func TestNonceRecordsSurviveRestart(t *testing.T) {
	e := newNonceEnv(t)
	e.open(t, groupA)
	for seq := uint64(1); seq <= 3; seq++ {
		if r := e.do(groupA, seq, 1, hashX, e.incr(int64(seq), nil, nil)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	e.reopen(t)
	if calls, groups := e.tab.size(); calls != 3 || groups != 1 {
		t.Fatalf("loaded %d calls, %d groups; want 3, 1", calls, groups)
	}
	if r := e.do(groupA, 2, 1, hashX, e.incr(2, nil, nil)); r != (result{sum: 3, replayed: true}) {
		t.Fatalf("duplicate after a restart: %+v, want sum 3, replayed", r)
	}
	if r := e.do(groupA, 2, 1, hashY, e.incr(2, nil, nil)); !errors.Is(r.err, errNonceReused) {
		t.Fatalf("another body after a restart: %+v, want %v", r, errNonceReused)
	}
	if n, c := e.applied(), e.counter(t); n != 3 || c != 6 {
		t.Fatalf("%d runs, counter %d; want 3 runs, 6", n, c)
	}
}
