package oracle

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// memMark is a Mark in memory. Writes may be slowed (a random delay) or
// failed; usable errors can be injected.
type memMark struct {
	rng *rand.Rand // guarded by mu

	mu       sync.Mutex
	durable  uint64
	writes   []uint64
	fail     error
	unusable error
	closed   int
	slow     bool
}

func (m *memMark) Write(mark uint64) error {
	m.mu.Lock()
	fail, slow := m.fail, m.slow
	var d time.Duration
	if slow {
		d = time.Duration(m.rng.IntN(200)) * time.Microsecond
	}
	m.mu.Unlock()
	if fail != nil {
		return fail
	}
	time.Sleep(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.durable = max(m.durable, mark)
	m.writes = append(m.writes, mark)
	return nil
}

func (m *memMark) Usable() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unusable
}

func (m *memMark) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed++
	return nil
}

func (m *memMark) get() (durable uint64, writes []uint64, closed int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.durable, append([]uint64(nil), m.writes...), m.closed
}

// TestMarkAllocatorResumes: an allocator over an external mark starts at
// the resume point, after writing a window above it, and its successor
// resumes above everything it handed out.
func TestMarkAllocatorResumes(t *testing.T) {
	defer checkNoLeak(t)()
	m := &memMark{}
	a, err := OpenMarkAllocator(1000, m, AllocatorOptions{Window: 16})
	if err != nil {
		t.Fatal(err)
	}
	if _, writes, _ := m.get(); len(writes) != 1 || writes[0] != 1016 {
		t.Fatalf("open wrote %v, want [1016]", writes)
	}
	if first := mustAllocate(t, a, 1); first != 1000 {
		t.Fatalf("first timestamp %d, want the resume point 1000", first)
	}
	last := mustAllocate(t, a, 40) + 39
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	durable, _, closed := m.get()
	if closed != 1 || durable <= last {
		t.Fatalf("after close: mark closed %d times, durable %d, last handed out %d", closed, durable, last)
	}
	// The successor resumes at the mark it reads.
	b, err := OpenMarkAllocator(durable, &memMark{}, AllocatorOptions{Window: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if first := mustAllocate(t, b, 1); first <= last {
		t.Fatalf("successor handed out %d, not above %d", first, last)
	}
	// Resume 0 (no mark yet) starts at 1.
	c, err := OpenMarkAllocator(0, &memMark{}, AllocatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if first := mustAllocate(t, c, 1); first != 1 {
		t.Fatalf("resume 0: first %d, want 1", first)
	}
}

// TestMarkAllocatorBelowDurable: concurrent callers, slow mark writes and
// a small window: no timestamp is ever at or above the mark durable when
// it is handed out.
func TestMarkAllocatorBelowDurable(t *testing.T) {
	defer checkNoLeak(t)()
	m := &memMark{rng: testRand(t), slow: true}
	a, err := OpenMarkAllocator(7, m, AllocatorOptions{Window: 32})
	if err != nil {
		t.Fatal(err)
	}
	perG := make([][]tsRange, 8)
	var wg sync.WaitGroup
	for g := range perG {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				n := 1 + i%7
				first, err := a.Allocate(context.Background(), n)
				if err != nil {
					t.Error(err)
					return
				}
				if durable, _, _ := m.get(); first+uint64(n) > durable {
					t.Errorf("handed out [%d, %d] with durable mark %d", first, first+uint64(n)-1, durable)
					return
				}
				perG[g] = append(perG[g], tsRange{first, uint64(n)})
			}
		}()
	}
	wg.Wait()
	a.Close()
	checkDisjointIncreasing(t, perG)
	_, writes, _ := m.get()
	for i := 1; i < len(writes); i++ {
		if writes[i] <= writes[i-1] {
			t.Fatalf("mark writes not increasing: %v", writes)
		}
	}
}

// TestMarkAllocatorUsable: while the mark is not usable, nothing is handed
// out, though the window has room; the error is the mark's.
func TestMarkAllocatorUsable(t *testing.T) {
	defer checkNoLeak(t)()
	m := &memMark{}
	a, err := OpenMarkAllocator(1, m, AllocatorOptions{Window: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	mustAllocate(t, a, 1)
	errTerm := errors.New("term over")
	m.mu.Lock()
	m.unusable = errTerm
	m.mu.Unlock()
	for range 3 {
		if first, err := a.Allocate(context.Background(), 1); !errors.Is(err, errTerm) {
			t.Fatalf("allocate while unusable: %d, %v; want %v", first, err, errTerm)
		}
	}
	m.mu.Lock()
	m.unusable = nil
	m.mu.Unlock()
	if first := mustAllocate(t, a, 1); first != 2 {
		t.Fatalf("after the mark is usable again: %d, want 2 (nothing handed out meanwhile)", first)
	}
}

// TestMarkAllocatorOpenErrors: a first write that fails, and a resume
// point beyond the last mark, are refused; the caller keeps the mark.
func TestMarkAllocatorOpenErrors(t *testing.T) {
	errDown := errors.New("etcd down")
	m := &memMark{fail: errDown}
	if _, err := OpenMarkAllocator(5, m, AllocatorOptions{}); !errors.Is(err, errDown) {
		t.Fatalf("open with a failing mark: %v", err)
	}
	if _, _, closed := m.get(); closed != 0 {
		t.Fatalf("a failed open closed the caller's mark")
	}
	if _, err := OpenMarkAllocator(MaxTimestamp+2, &memMark{}, AllocatorOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("resume above MaxTimestamp+1: %v", err)
	}
	if _, err := OpenMarkAllocator(1, &memMark{}, AllocatorOptions{Window: 1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("window 1: %v", err)
	}
	a, err := OpenMarkAllocator(MaxTimestamp, &memMark{}, AllocatorOptions{Window: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if first := mustAllocate(t, a, 1); first != MaxTimestamp {
		t.Fatalf("got %d, want MaxTimestamp", first)
	}
	if _, err := a.Allocate(context.Background(), 1); !errors.Is(err, ErrExhausted) {
		t.Fatalf("past MaxTimestamp: %v", err)
	}
}
