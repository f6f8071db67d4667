package oracle

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientConcurrentIncreasing: 64 callers over a persisted allocator
// with a small window; each caller's timestamps increase, no timestamp is
// handed out twice.
func TestClientConcurrentIncreasing(t *testing.T) {
	defer checkNoLeak(t)()
	a, _ := openTemp(t, AllocatorOptions{Window: 256})
	c := NewClient(a)
	const callers, calls = 64, 300
	perG := make([][]tsRange, callers)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for range calls {
				ts, err := c.Timestamp(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				perG[g] = append(perG[g], tsRange{ts, 1})
			}
		})
	}
	wg.Wait()
	checkDisjointIncreasing(t, perG)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// gateBackend records each request and blocks it until released.
type gateBackend struct {
	log     *eventLog
	entered chan int      // receives the request number once it is sent
	release chan struct{} // one receive per request
	mu      sync.Mutex
	next    uint64
	reqs    []tsRange
}

func newGateBackend(log *eventLog) *gateBackend {
	return &gateBackend{log: log, entered: make(chan int, 16), release: make(chan struct{}), next: 1}
}

func (g *gateBackend) Allocate(_ context.Context, n int) (uint64, error) {
	g.mu.Lock()
	r := tsRange{g.next, uint64(n)}
	g.next += uint64(n)
	g.reqs = append(g.reqs, r)
	num := len(g.reqs)
	g.mu.Unlock()
	g.log.add(fmt.Sprintf("send %d n=%d", num, n))
	g.entered <- num
	<-g.release
	return r.first, nil
}

func (g *gateBackend) requests() []tsRange {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.reqs)
}

type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

type result struct {
	ts  uint64
	err error
}

func timestampAsync(ctx context.Context, c *Client) <-chan result {
	ch := make(chan result, 1)
	go func() {
		ts, err := c.Timestamp(ctx)
		ch <- result{ts, err}
	}()
	return ch
}

// newGatedClient returns a Client over a gateBackend whose joins are
// logged and announced on the returned channel.
func newGatedClient() (*Client, *gateBackend, *eventLog, chan struct{}) {
	log := &eventLog{}
	g := newGateBackend(log)
	c := NewClient(g)
	joined := make(chan struct{}, 16)
	c.onJoin = func() {
		log.add("join")
		joined <- struct{}{}
	}
	return c, g, log, joined
}

// TestClientBatchingRule is DESIGN.md invariant 1, step by step: A's
// request goes out; B arrives while it is in flight; B is served by a
// second request sent after B arrived, and the first request was for A
// alone.
func TestClientBatchingRule(t *testing.T) {
	defer checkNoLeak(t)()
	c, g, log, joined := newGatedClient()
	ctx := context.Background()

	resA := timestampAsync(ctx, c)
	<-joined
	if num := <-g.entered; num != 1 {
		t.Fatalf("first request is number %d", num)
	}
	resB := timestampAsync(ctx, c)
	<-joined
	// B has arrived and request 1 is still in flight.
	if n := len(g.requests()); n != 1 {
		t.Fatalf("%d requests sent while request 1 is in flight, want 1", n)
	}
	g.release <- struct{}{}
	a := <-resA
	if num := <-g.entered; num != 2 {
		t.Fatalf("second request is number %d", num)
	}
	g.release <- struct{}{}
	b := <-resB

	reqs := g.requests()
	want := []string{"join", "send 1 n=1", "join", "send 2 n=1"}
	if got := log.get(); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if a.err != nil || a.ts != reqs[0].first {
		t.Fatalf("A got %d, %v; want %d from request 1", a.ts, a.err, reqs[0].first)
	}
	if b.err != nil || b.ts != reqs[1].first {
		t.Fatalf("B got %d, %v; want %d from request 2", b.ts, b.err, reqs[1].first)
	}
}

// TestClientBatchesWaitingCallers: callers that arrive during one request
// share the next one.
func TestClientBatchesWaitingCallers(t *testing.T) {
	defer checkNoLeak(t)()
	c, g, log, joined := newGatedClient()
	ctx := context.Background()
	first := timestampAsync(ctx, c)
	<-joined
	<-g.entered
	var rest []<-chan result
	for range 5 {
		rest = append(rest, timestampAsync(ctx, c))
		<-joined
	}
	g.release <- struct{}{}
	<-g.entered
	g.release <- struct{}{}
	if r := <-first; r.ts != 1 || r.err != nil {
		t.Fatalf("first caller: %d, %v", r.ts, r.err)
	}
	var got []uint64
	for _, ch := range rest {
		r := <-ch
		if r.err != nil {
			t.Fatal(r.err)
		}
		got = append(got, r.ts)
	}
	slices.Sort(got)
	if !slices.Equal(got, []uint64{2, 3, 4, 5, 6}) {
		t.Fatalf("batched callers got %v, want 2..6", got)
	}
	if events := log.get(); events[len(events)-1] != "send 2 n=5" {
		t.Fatalf("events %q: want one request for the 5 waiting callers", events)
	}
}

// TestClientCancel: a cancelled caller, waiting or leading, returns
// ctx.Err() at once; the others of its batch are served.
func TestClientCancel(t *testing.T) {
	defer checkNoLeak(t)()
	c, g, _, joined := newGatedClient()
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxC, cancelC := context.WithCancel(context.Background())
	resA := timestampAsync(ctxA, c)
	<-joined
	<-g.entered
	resB := timestampAsync(context.Background(), c)
	<-joined
	resC := timestampAsync(ctxC, c)
	<-joined
	cancelA() // A's request is in flight
	cancelC() // C waits for the next request
	if r := <-resA; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("A: %v, want context.Canceled", r.err)
	}
	if r := <-resC; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("C: %v, want context.Canceled", r.err)
	}
	g.release <- struct{}{}
	<-g.entered
	g.release <- struct{}{}
	if r := <-resB; r.err != nil || r.ts < 2 {
		t.Fatalf("B: %d, %v", r.ts, r.err)
	}
	if _, err := c.Timestamp(ctxA); !errors.Is(err, context.Canceled) {
		t.Fatalf("Timestamp with a cancelled ctx: %v", err)
	}
}

// scriptedBackend returns scripted replies in order.
type scriptedBackend struct {
	mu      sync.Mutex
	replies []result
}

func (s *scriptedBackend) Allocate(context.Context, int) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.replies[0]
	s.replies = s.replies[1:]
	return r.ts, r.err
}

func TestClientBackendErrors(t *testing.T) {
	errDown := errors.New("backend down")
	s := &scriptedBackend{replies: []result{
		{ts: 10}, {err: errDown}, {ts: 11}, {ts: 5}, {ts: 0}, {ts: MaxTimestamp}, {ts: MaxTimestamp + 1},
	}}
	c := NewClient(s)
	ctx := context.Background()
	for i, want := range []error{nil, errDown, nil, ErrBadReply, ErrBadReply, nil, ErrBadReply} {
		if _, err := c.Timestamp(ctx); !errors.Is(err, want) {
			t.Fatalf("call %d: %v, want %v", i, err, want)
		}
	}
}

// versionedReply is one scripted reply of a versionedScript.
type versionedReply struct {
	first, version uint64
	ok             bool
}

// versionedScript is a VersionedBackend that returns scripted replies in
// order.
type versionedScript struct{ replies []versionedReply }

func (s *versionedScript) Allocate(ctx context.Context, n int) (uint64, error) {
	first, _, _, err := s.AllocateVersioned(ctx, n)
	return first, err
}

func (s *versionedScript) AllocateVersioned(context.Context, int) (uint64, uint64, bool, error) {
	r := s.replies[0]
	s.replies = s.replies[1:]
	return r.first, r.version, r.ok, nil
}

// TestClientVersionPerReply: a VersionedBackend's version reaches the
// callers only with the reply that carried it; a reply without one (a
// remote oracle without a store, say after a failover) is reported as no
// version, even right after one with a version, and version 0 with ok is
// a version.
func TestClientVersionPerReply(t *testing.T) {
	replies := []versionedReply{{1, 7, true}, {2, 0, false}, {3, 0, true}, {4, 9, true}, {5, 9, false}}
	c := NewClient(&versionedScript{replies: slices.Clone(replies)})
	for _, want := range replies {
		ts, v, ok, err := c.TimestampVersion(context.Background())
		if err != nil || ts != want.first || ok != want.ok || (ok && v != want.version) {
			t.Fatalf("TimestampVersion: %d, version %d ok %v, %v; want %+v", ts, v, ok, err, want)
		}
	}
}

// recordingBackend wraps an Allocator and stamps each request with a tick
// of a logical clock shared with the callers.
type recordingBackend struct {
	a     *Allocator
	clock *atomic.Uint64
	mu    sync.Mutex
	reqs  []sentRange
}

type sentRange struct {
	tsRange
	sent uint64
}

func (r *recordingBackend) Allocate(ctx context.Context, n int) (uint64, error) {
	sent := r.clock.Add(1)
	for range sent % 3 {
		runtime.Gosched() // vary the interleavings
	}
	first, err := r.a.Allocate(ctx, n)
	r.mu.Lock()
	r.reqs = append(r.reqs, sentRange{tsRange{first, uint64(n)}, sent})
	r.mu.Unlock()
	return first, err
}

type call struct {
	ts, start, end uint64
}

// TestClientFreshness checks invariant 1 as a history: every timestamp
// comes from a request sent after its caller started, and a call that
// ended before another started got a smaller timestamp.
func TestClientFreshness(t *testing.T) {
	rng := testRand(t)
	a, _ := OpenAllocator("", AllocatorOptions{})
	var clock atomic.Uint64
	rb := &recordingBackend{a: a, clock: &clock}
	c := NewClient(rb)
	const callers, calls = 32, 200
	hist := make([][]call, callers)
	var wg sync.WaitGroup
	for g := range callers {
		pause := rng.IntN(3)
		wg.Go(func() {
			for range calls {
				start := clock.Add(1)
				ts, err := c.Timestamp(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				hist[g] = append(hist[g], call{ts, start, clock.Add(1)})
				for range pause {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	all := slices.Concat(hist...)
	checkSentAfterStart(t, all, rb.reqs)
	checkRealTimeOrder(t, all)
}

func checkSentAfterStart(t *testing.T, calls []call, reqs []sentRange) {
	t.Helper()
	slices.SortFunc(reqs, func(x, y sentRange) int { return compare(x.first, y.first) })
	for _, cl := range calls {
		i, found := slices.BinarySearchFunc(reqs, cl.ts, func(r sentRange, ts uint64) int {
			return compare(r.first, ts)
		})
		if !found {
			i-- // the request with the greatest first below ts
		}
		if i < 0 || cl.ts >= reqs[i].first+reqs[i].n || reqs[i].sent < cl.start {
			t.Fatalf("call started at tick %d got %d, not from a request sent after it", cl.start, cl.ts)
		}
	}
}

func checkRealTimeOrder(t *testing.T, calls []call) {
	t.Helper()
	byEnd := slices.Clone(calls)
	slices.SortFunc(byEnd, func(x, y call) int { return compare(x.end, y.end) })
	slices.SortFunc(calls, func(x, y call) int { return compare(x.start, y.start) })
	var maxEnded uint64
	j := 0
	for _, cl := range calls {
		for ; j < len(byEnd) && byEnd[j].end < cl.start; j++ {
			maxEnded = max(maxEnded, byEnd[j].ts)
		}
		if cl.ts <= maxEnded {
			t.Fatalf("call started at tick %d got %d, not above %d returned before it started", cl.start, cl.ts, maxEnded)
		}
	}
}

// TestClientNoLeak: the pump exits once callers are served, and closing
// the allocator stops its extension goroutine.
func TestClientNoLeak(t *testing.T) {
	defer checkNoLeak(t)()
	a, err := OpenAllocator(filepath.Join(t.TempDir(), "m"), AllocatorOptions{Window: 16})
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(a)
	if _, err := Throughput(context.Background(), c, 8, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Timestamp(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Timestamp after Close: %v, want ErrClosed", err)
	}
}

func TestThroughput(t *testing.T) {
	a, _ := OpenAllocator("", AllocatorOptions{})
	c := NewClient(a)
	ctx := context.Background()
	if perSec, err := Throughput(ctx, c, 4, 10*time.Millisecond); err != nil || perSec <= 0 {
		t.Fatalf("Throughput: %v, %v", perSec, err)
	}
	if _, err := Throughput(ctx, c, 0, time.Millisecond); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("0 callers: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Throughput(cctx, c, 2, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	a.Close()
	if _, err := Throughput(ctx, c, 2, time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed backend: %v", err)
	}
}
