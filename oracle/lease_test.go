package oracle

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

var bg = context.Background()

// storeOpts are the options of a store allocator owned by owner, with a
// small window so tests cross many mark writes.
func storeOpts(owner string, exclusive bool) StoreOptions {
	return StoreOptions{AllocatorOptions: AllocatorOptions{Window: 64}, Owner: owner, Exclusive: exclusive, TTL: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func mustAllocate(t *testing.T, a *Allocator, n int) uint64 {
	t.Helper()
	ts, err := a.Allocate(bg, n)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestStoreAllocatorRestarts: timestamps keep increasing across closes,
// crashes (an allocator dropped without Close) and reopens on a store the
// caller owns; a new store starts at 1.
func TestStoreAllocatorRestarts(t *testing.T) {
	st := memory.New()
	defer st.Close()
	var last uint64
	for i := range 20 {
		owner := coord.NewOwnerID()
		a, err := OpenStoreAllocator(bg, st, storeOpts(owner, true))
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		for range 1 + i*7%50 {
			ts := mustAllocate(t, a, 1+i%5)
			if ts <= last || (i == 0 && last == 0 && ts != 1) {
				t.Fatalf("open %d: %d after %d", i, ts, last)
			}
			last = ts + uint64(i%5)
		}
		if i%2 == 0 {
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			close(a.mark.(*storeMark).stop) // a crash: no release
		}
	}
}

// TestStoreAllocatorSecondRefused: while one allocator holds the store's
// lease, a second (with no way to know it dead) is refused with ErrInUse
// and changes nothing; after the first closes, the second resumes above
// everything the first handed out.
func TestStoreAllocatorSecondRefused(t *testing.T) {
	st := memory.New()
	defer st.Close()
	a, err := OpenStoreAllocator(bg, st, storeOpts("A", false))
	if err != nil {
		t.Fatal(err)
	}
	high := mustAllocate(t, a, 1000) + 999
	if _, err := OpenStoreAllocator(bg, st, storeOpts("B", false)); !errors.Is(err, storage.ErrInUse) {
		t.Fatalf("second allocator: %v, want ErrInUse", err)
	} else {
		t.Logf("%v", err)
	}
	if ts := mustAllocate(t, a, 1); ts <= high {
		t.Fatalf("first allocator after the refusal: %d <= %d", ts, high)
	}
	high++
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := OpenStoreAllocator(bg, st, storeOpts("B", false))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if ts := mustAllocate(t, b, 1); ts <= high {
		t.Fatalf("second allocator resumed at %d, at or below %d", ts, high)
	}
}

// partitioned fails every write while cut is set: an allocator whose
// store calls fail cannot renew its lease.
type partitioned struct {
	storage.Store
	cut atomic.Bool
}

func (p *partitioned) CheckAndMutate(ctx context.Context, row []byte, pred storage.Filter, t, f []storage.Mutation) (bool, error) {
	if p.cut.Load() {
		return false, errors.New("partitioned")
	}
	return p.Store.CheckAndMutate(ctx, row, pred, t, f)
}

// TestStoreAllocatorLeaseExpiry: an allocator that cannot renew stops
// handing out timestamps before its lease can be taken over; the taker
// (whose clock says the lease ran out) resumes above everything handed
// out.
func TestStoreAllocatorLeaseExpiry(t *testing.T) {
	mem := memory.New()
	defer mem.Close()
	p := &partitioned{Store: mem}
	opts := storeOpts("A", false)
	opts.TTL = 300 * time.Millisecond
	opts.Window = 1 << 30 // no extension: only the lease's deadline stops it
	a, err := OpenStoreAllocator(bg, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	p.cut.Store(true)
	var high uint64
	var stopped time.Time
	for {
		ts, err := a.Allocate(bg, 1)
		if errors.Is(err, ErrLeaseLost) {
			stopped = time.Now()
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		high = ts
		time.Sleep(time.Millisecond)
	}
	opts = storeOpts("B", false)
	opts.TTL = time.Minute
	if _, err := OpenStoreAllocator(bg, mem, opts); !errors.Is(err, storage.ErrInUse) && time.Since(stopped) < 20*time.Millisecond {
		t.Fatalf("taker before the lease ran out: %v, want ErrInUse", err)
	}
	opts.Now = func() time.Time { return time.Now().Add(time.Second) } // the lease ran out
	b, err := OpenStoreAllocator(bg, mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if ts := mustAllocate(t, b, 1); ts <= high {
		t.Fatalf("taker handed out %d, at or below %d of the old holder", ts, high)
	}
	p.cut.Store(false)
	if _, err := a.Allocate(bg, 1); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("old holder after the takeover: %v, want ErrLeaseLost", err)
	}
}

// TestStoreAllocatorRecover: a store with data but no mark resumes above
// the newest timestamp the data holds.
func TestStoreAllocatorRecover(t *testing.T) {
	st := memory.New()
	defer st.Close()
	opts := storeOpts("A", false)
	opts.Recover = func(context.Context) (uint64, error) { return 5_000_000, nil }
	a, err := OpenStoreAllocator(bg, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if ts := mustAllocate(t, a, 1); ts <= 5_000_000 {
		t.Fatalf("resumed at %d, at or below the data's 5000000", ts)
	}
}

// TestStoreAllocatorCorrupt: a lease cell that does not decode is
// ErrCorruptMark, never read as zero.
func TestStoreAllocatorCorrupt(t *testing.T) {
	st := memory.New()
	defer st.Close()
	if err := st.Mutate(bg, markRow, storage.SetCell(FamilyOracle, leaseQual, 3, []byte("garbage"))); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStoreAllocator(bg, st, storeOpts("A", false)); !errors.Is(err, ErrCorruptMark) {
		t.Fatalf("open on a corrupt lease: %v, want ErrCorruptMark", err)
	}
}

// unsure applies some writes and then reports a timeout, as a call whose
// reply was lost.
type unsure struct {
	storage.Store
	mu  sync.Mutex
	rng *rand.Rand
	n   int
}

func (u *unsure) CheckAndMutate(ctx context.Context, row []byte, pred storage.Filter, t, f []storage.Mutation) (bool, error) {
	m, err := u.Store.CheckAndMutate(ctx, row, pred, t, f)
	u.mu.Lock()
	defer u.mu.Unlock()
	if err == nil && u.rng.IntN(3) == 0 {
		u.n++
		return false, errors.New("timeout")
	}
	return m, err
}

// TestStoreAllocatorUnknownOutcomes: mark writes whose replies are lost
// are recognized by their nonce; timestamps stay increasing through many
// windows and reopens.
func TestStoreAllocatorUnknownOutcomes(t *testing.T) {
	mem := memory.New()
	defer mem.Close()
	u := &unsure{Store: mem, rng: rand.New(rand.NewPCG(1, 2))}
	var last uint64
	for i := range 10 {
		a, err := OpenStoreAllocator(bg, u, storeOpts("A", false))
		if err != nil {
			t.Fatal(err)
		}
		for range 100 {
			ts := mustAllocate(t, a, 7)
			if ts <= last {
				t.Fatalf("reopen %d: %d after %d", i, ts, last)
			}
			last = ts + 6
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if u.n == 0 {
		t.Fatal("no lost reply injected")
	}
}

// TestStoreAllocatorNoEarlyTakeover: on a store that is not the caller's
// alone, a live lease is never taken over before it expires, whatever the
// holder's process looks like from outside (its liveness session may have
// expired while it runs on and hands out timestamps).
func TestStoreAllocatorNoEarlyTakeover(t *testing.T) {
	st := memory.New()
	defer st.Close()
	a, err := OpenStoreAllocator(bg, st, storeOpts("A", false))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	mustAllocate(t, a, 1)
	if _, err := OpenStoreAllocator(bg, st, storeOpts("B", false)); !errors.Is(err, storage.ErrInUse) {
		t.Fatalf("B while A's lease is live: %v, want ErrInUse", err)
	}
	var held *HeldError
	_, err = OpenStoreAllocator(bg, st, storeOpts("B", false))
	if !errors.As(err, &held) || held.Owner != "A" || time.Until(held.Until) < 50*time.Second {
		t.Fatalf("refusal %v: want a HeldError naming A's lease", err)
	}
}

// lateWrites holds every lease write while hold is set (reporting a
// timeout), and applies the held ones when released: a write given up on
// that reaches the store later.
type lateWrites struct {
	storage.Store
	mu   sync.Mutex
	hold bool
	held []func()
}

func (l *lateWrites) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, t, f []storage.Mutation) (bool, error) {
	l.mu.Lock()
	if l.hold {
		l.held = append(l.held, func() { _, _ = l.Store.CheckAndMutate(context.Background(), row, p, t, f) })
		l.mu.Unlock()
		return false, errors.New("timeout")
	}
	l.mu.Unlock()
	return l.Store.CheckAndMutate(ctx, row, p, t, f)
}

func (l *lateWrites) release() {
	l.mu.Lock()
	held := l.held
	l.held, l.hold = nil, false
	l.mu.Unlock()
	for _, h := range held[:1] { // the first copy applies; the others find its epoch gone
		h()
	}
	for _, h := range held[1:] {
		h()
	}
}

// TestStoreAllocatorAdoptsLateWrite: a mark write given up on after
// timeouts that reaches the store later is this allocator's own, not
// another's: the next write adopts it instead of declaring the lease lost.
func TestStoreAllocatorAdoptsLateWrite(t *testing.T) {
	mem := memory.New()
	defer mem.Close()
	l := &lateWrites{Store: mem}
	a, err := OpenStoreAllocator(bg, l, storeOpts("A", false))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	m := a.mark.(*storeMark)
	l.mu.Lock()
	l.hold = true
	l.mu.Unlock()
	if err := m.write(m.mark + 100); err == nil {
		t.Fatal("a write whose every send timed out returned nil")
	}
	l.release() // it applies now, late
	if err := m.write(m.mark + 200); err != nil {
		t.Fatalf("the next write after a late one: %v, want it adopted", err)
	}
	if err := m.usable(); err != nil {
		t.Fatalf("lease after adopting a late write: %v", err)
	}
}
