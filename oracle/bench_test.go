package oracle

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkClient64 measures a Client over an in-memory Allocator with 64
// concurrent callers. b.N is the total number of timestamps.
func BenchmarkClient64(b *testing.B) {
	benchmarkClient(b, "")
}

// BenchmarkClient64Persisted is BenchmarkClient64 over an allocator
// persisted with the default window: extensions run in the background.
func BenchmarkClient64Persisted(b *testing.B) {
	benchmarkClient(b, filepath.Join(b.TempDir(), "oracle.mark"))
}

func benchmarkClient(b *testing.B, path string) {
	const callers = 64
	a, err := OpenAllocator(path, AllocatorOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	cb := &countingBackend{Backend: a}
	c := NewClient(cb)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range callers {
		n := b.N / callers
		if g < b.N%callers {
			n++
		}
		wg.Go(func() {
			for range n {
				if _, err := c.Timestamp(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ts/s")
	b.ReportMetric(float64(b.N)/float64(cb.requests.Load()), "ts/request")
}

// countingBackend counts the requests that reach a Backend.
type countingBackend struct {
	Backend
	requests atomic.Int64
}

func (c *countingBackend) Allocate(ctx context.Context, n int) (uint64, error) {
	c.requests.Add(1)
	return c.Backend.Allocate(ctx, n)
}

// BenchmarkThroughput64 runs Throughput, the `percolator bench` path, for
// one second per iteration.
func BenchmarkThroughput64(b *testing.B) {
	a, err := OpenAllocator("", AllocatorOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	c := NewClient(a)
	var sum float64
	for b.Loop() {
		ts, err := Throughput(context.Background(), c, 64, time.Second)
		if err != nil {
			b.Fatal(err)
		}
		sum += ts
	}
	b.ReportMetric(sum/float64(b.N), "ts/s")
}
