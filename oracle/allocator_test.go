package oracle

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

func openTemp(t *testing.T, opts AllocatorOptions) (*Allocator, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "oracle.mark")
	a, err := OpenAllocator(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a, path
}

type tsRange struct{ first, n uint64 }

// checkDisjointIncreasing fails unless each goroutine's ranges increase
// and no two ranges overlap.
func checkDisjointIncreasing(t *testing.T, perG [][]tsRange) {
	t.Helper()
	var all []tsRange
	for g, rs := range perG {
		for i, r := range rs {
			if r.first == 0 || r.first+r.n-1 > MaxTimestamp {
				t.Fatalf("goroutine %d: range %v out of bounds", g, r)
			}
			if i > 0 && r.first <= rs[i-1].first+rs[i-1].n-1 {
				t.Fatalf("goroutine %d: %v after %v, not increasing", g, r, rs[i-1])
			}
		}
		all = append(all, rs...)
	}
	slices.SortFunc(all, func(x, y tsRange) int { return compare(x.first, y.first) })
	for i := 1; i < len(all); i++ {
		if all[i].first < all[i-1].first+all[i-1].n {
			t.Fatalf("ranges %v and %v overlap", all[i-1], all[i])
		}
	}
}

func compare(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func TestAllocatorConcurrentIncreasing(t *testing.T) {
	for _, persisted := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "persisted"}[persisted], func(t *testing.T) {
			defer checkNoLeak(t)()
			var a *Allocator
			if persisted {
				a, _ = openTemp(t, AllocatorOptions{Window: 64})
			} else {
				a, _ = OpenAllocator("", AllocatorOptions{})
			}
			const goroutines, calls = 16, 500
			perG := make([][]tsRange, goroutines)
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range calls {
						n := uint64(1 + (g+i)%7)
						first, err := a.Allocate(context.Background(), int(n))
						if err != nil {
							t.Error(err)
							return
						}
						perG[g] = append(perG[g], tsRange{first, n})
					}
				})
			}
			wg.Wait()
			checkDisjointIncreasing(t, perG)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestAllocatorStartsAtOne(t *testing.T) {
	for _, path := range []string{"", filepath.Join(t.TempDir(), "m")} {
		a, err := OpenAllocator(path, AllocatorOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if first, err := a.Allocate(context.Background(), 3); first != 1 || err != nil {
			t.Fatalf("path %q: first allocation = %d, %v; want 1", path, first, err)
		}
		if first, _ := a.Allocate(context.Background(), 1); first != 4 {
			t.Fatalf("path %q: second allocation = %d; want 4", path, first)
		}
		a.Close()
	}
}

// TestAllocatorMarkAhead reads the mark file after every allocation: the
// durable mark must already exceed every timestamp handed out.
func TestAllocatorMarkAhead(t *testing.T) {
	a, path := openTemp(t, AllocatorOptions{Window: 8})
	defer a.Close()
	for range 200 {
		first, err := a.Allocate(context.Background(), 3)
		if err != nil {
			t.Fatal(err)
		}
		if mark := readMarkFile(t, path); mark <= first+2 {
			t.Fatalf("handed out %d..%d with durable mark %d", first, first+2, mark)
		}
	}
}

func readMarkFile(t *testing.T, path string) uint64 {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mark, err := decodeMark(buf)
	if err != nil {
		t.Fatal(err)
	}
	return mark
}

// TestAllocatorReopen closes and reopens a persisted allocator hundreds of
// times: every timestamp after a reopen exceeds every one before.
func TestAllocatorReopen(t *testing.T) {
	rng := testRand(t)
	path := filepath.Join(t.TempDir(), "oracle.mark")
	var maxSeen uint64
	for cycle := range 300 {
		a, err := OpenAllocator(path, AllocatorOptions{Window: 2 + rng.Uint64N(1024)})
		if err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		for i := range rng.IntN(40) + 1 {
			n := 1 + rng.IntN(32)
			first, err := a.Allocate(context.Background(), n)
			if err != nil {
				t.Fatalf("cycle %d: %v", cycle, err)
			}
			if first <= maxSeen {
				t.Fatalf("cycle %d call %d: got %d after %d", cycle, i, first, maxSeen)
			}
			maxSeen = first + uint64(n) - 1
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAllocatorCorruptMark(t *testing.T) {
	valid := encodeMark(12345)
	outOfRange := encodeMark(MaxTimestamp + 2)
	flipped := slices.Clone(valid)
	flipped[10] ^= 1
	badMagic := slices.Clone(valid)
	badMagic[0] = 'X'
	for name, content := range map[string][]byte{
		"empty":        {},
		"truncated":    valid[:markSize-1],
		"too long":     append(slices.Clone(valid), 0),
		"flipped bit":  flipped,
		"bad magic":    badMagic,
		"out of range": outOfRange,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "oracle.mark")
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
			a, err := OpenAllocator(path, AllocatorOptions{})
			if !errors.Is(err, ErrCorruptMark) {
				t.Fatalf("open: %v, want ErrCorruptMark", err)
			}
			if a != nil {
				t.Fatal("non-nil allocator with error")
			}
			if got, _ := os.ReadFile(path); !slices.Equal(got, content) {
				t.Fatal("corrupt mark file was rewritten")
			}
			// The lock was released: a repaired file opens.
			if err := os.WriteFile(path, valid, 0o644); err != nil {
				t.Fatal(err)
			}
			a, err = OpenAllocator(path, AllocatorOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if first, _ := a.Allocate(context.Background(), 1); first != 12345 {
				t.Fatalf("resumed at %d, want 12345", first)
			}
		})
	}
}

func TestAllocatorSecondOpenFails(t *testing.T) {
	a, path := openTemp(t, AllocatorOptions{})
	if _, err := OpenAllocator(path, AllocatorOptions{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := OpenAllocator(path, AllocatorOptions{})
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	b.Close()
}

func TestAllocatorExhausted(t *testing.T) {
	ctx := context.Background()
	t.Run("memory", func(t *testing.T) {
		a, err := OpenAllocator("", AllocatorOptions{start: MaxTimestamp - 4})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Allocate(ctx, 6); !errors.Is(err, ErrExhausted) {
			t.Fatalf("allocate past max: %v, want ErrExhausted", err)
		}
		if first, err := a.Allocate(ctx, 5); first != MaxTimestamp-4 || err != nil {
			t.Fatalf("allocate up to max: %d, %v", first, err)
		}
		if _, err := a.Allocate(ctx, 1); !errors.Is(err, ErrExhausted) {
			t.Fatalf("allocate after max: %v, want ErrExhausted", err)
		}
	})
	t.Run("persisted", func(t *testing.T) {
		a, path := openTemp(t, AllocatorOptions{Window: 4, start: MaxTimestamp - 9})
		for i := range 10 {
			if first, err := a.Allocate(ctx, 1); first != MaxTimestamp-9+uint64(i) || err != nil {
				t.Fatalf("allocation %d: %d, %v", i, first, err)
			}
		}
		if _, err := a.Allocate(ctx, 1); !errors.Is(err, ErrExhausted) {
			t.Fatalf("allocate after max: %v, want ErrExhausted", err)
		}
		a.Close()
		if mark := readMarkFile(t, path); mark != MaxTimestamp+1 {
			t.Fatalf("mark %d, want MaxTimestamp+1", mark)
		}
		a, err := OpenAllocator(path, AllocatorOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if _, err := a.Allocate(ctx, 1); !errors.Is(err, ErrExhausted) {
			t.Fatalf("allocate after reopen: %v, want ErrExhausted", err)
		}
	})
}

func TestAllocatorInvalidArguments(t *testing.T) {
	a, _ := OpenAllocator("", AllocatorOptions{})
	for _, n := range []int{0, -1} {
		if _, err := a.Allocate(context.Background(), n); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Allocate(%d): %v, want ErrInvalidArgument", n, err)
		}
	}
	for _, w := range []uint64{1, MaxTimestamp + 1} {
		if _, err := OpenAllocator("", AllocatorOptions{Window: w}); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Window %d: %v, want ErrInvalidArgument", w, err)
		}
	}
}

func TestAllocatorClose(t *testing.T) {
	defer checkNoLeak(t)()
	a, path := openTemp(t, AllocatorOptions{Window: 4})
	for range 100 {
		if _, err := a.Allocate(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
	}
	// The first Close may finish an extension in flight; the second must
	// not touch the file.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	before := readMarkFile(t, path)
	if before <= 100 {
		t.Fatalf("mark %d after handing out 100", before)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Allocate after Close: %v, want ErrClosed", err)
	}
	if after := readMarkFile(t, path); after != before {
		t.Fatalf("second Close moved the mark from %d to %d", before, after)
	}
}

// TestAllocatorCloseWritesNothing: with no extension in flight, Close
// leaves the mark written at open.
func TestAllocatorCloseWritesNothing(t *testing.T) {
	a, path := openTemp(t, AllocatorOptions{Window: 1000})
	if _, err := a.Allocate(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if mark := readMarkFile(t, path); mark != 1001 {
		t.Fatalf("mark %d after Close, want 1001 written at open", mark)
	}
}

// TestAllocatorExtendsInBackground blocks the disk: allocations inside the
// persisted window go on without waiting; the first one beyond it waits,
// honours its context, and completes once the disk does.
func TestAllocatorExtendsInBackground(t *testing.T) {
	defer checkNoLeak(t)()
	started, release := make(chan struct{}, 1), make(chan struct{})
	opts := AllocatorOptions{Window: 10, beforeExtend: func() error {
		started <- struct{}{}
		<-release
		return nil
	}}
	a, _ := openTemp(t, opts)
	ctx := context.Background()
	// The window is [1, 11): the 6th allocation leaves 5 = Window/2, the
	// 7th leaves 4 and starts the extension.
	for want := uint64(1); want <= 10; want++ {
		if first, err := a.Allocate(ctx, 1); first != want || err != nil {
			t.Fatalf("got %d, %v; want %d", first, err, want)
		}
		if want == 7 {
			<-started
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := a.Allocate(cctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("allocate beyond window with cancelled ctx: %v", err)
	}
	done := make(chan uint64)
	go func() {
		first, err := a.Allocate(ctx, 1)
		if err != nil {
			t.Error(err)
		}
		done <- first
	}()
	close(release)
	if first := <-done; first != 11 {
		t.Fatalf("after extension got %d, want 11", first)
	}
	a.Close()
}

// TestAllocatorExtendFailure fails the disk: the caller that needs the new
// window gets the error, and a later call retries.
func TestAllocatorExtendFailure(t *testing.T) {
	defer checkNoLeak(t)()
	errDisk := errors.New("disk on fire")
	var mu sync.Mutex
	fail := true
	opts := AllocatorOptions{Window: 4, beforeExtend: func() error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return errDisk
		}
		return nil
	}}
	a, _ := openTemp(t, opts)
	defer a.Close()
	var err error
	for range 5 {
		if _, err = a.Allocate(context.Background(), 1); err != nil {
			break
		}
	}
	if !errors.Is(err, errDisk) {
		t.Fatalf("allocation past a failed extension: %v, want %v", err, errDisk)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	if first, err := a.Allocate(context.Background(), 1); first != 5 || err != nil {
		t.Fatalf("after recovery: %d, %v; want 5", first, err)
	}
}
