package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator/internal/proccpu"
)

// timed shows a measurement that runs for d as a phase of Progress
// counting its seconds, which a goroutine moves every second; the
// function it returns ends the phase with the measurement's error (the
// context's if it ended).
func (b *runner) timed(ctx context.Context, label string, d time.Duration) (end func(error)) {
	total := int64((d + time.Second - 1) / time.Second)
	b.opts.Progress.Start(label, total)
	start := time.Now()
	secs := func() int64 { return min(int64(time.Since(start)/time.Second), total) }
	t := time.NewTicker(time.Second)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				b.opts.Progress.Set(secs())
			}
		}
	}()
	return func(err error) {
		t.Stop()
		close(stop)
		<-stopped
		if err == nil {
			err = ctx.Err()
		}
		if err == nil {
			b.opts.Progress.Set(total) // it ran its time, whole seconds or not
		} else {
			b.opts.Progress.Set(secs())
		}
		b.opts.Progress.End(err)
	}
}

// rate runs op from n goroutines for d and returns completed ops per second.
func rate(ctx context.Context, n int, d time.Duration, op func(*rand.Rand) error) float64 {
	done, elapsed := count(ctx, n, d, op)
	return float64(done) / elapsed.Seconds()
}

// count runs op from n goroutines for d and returns how many completed
// and in how long.
func count(ctx context.Context, n int, d time.Duration, op func(*rand.Rand) error) (int64, time.Duration) {
	var done atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for g := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), uint64(start.UnixNano())))
			for !stop.Load() && ctx.Err() == nil {
				if op(rng) == nil {
					done.Add(1)
				}
			}
		})
	}
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done(): // an interrupt ends the measurement now
		t.Stop()
	}
	stop.Store(true)
	wg.Wait()
	return done.Load(), time.Since(start)
}

// alternate measures raw and txn ops in alternating rounds (two each, so
// drift on a noisy machine hits both sides alike) and returns their mean
// rates.
func alternate(ctx context.Context, n int, d time.Duration, rawOp, txnOp func(*rand.Rand) error) (raw, txn float64) {
	r := alternateAll(ctx, n, d, rawOp, txnOp)
	return r[0], r[1]
}

// alternateAll is alternate over any number of sides, each measured for
// d in two turns, in order, twice: rates[i] is ops[i]'s.
func alternateAll(ctx context.Context, n int, d time.Duration, ops ...func(*rand.Rand) error) (rates []float64) {
	rates, _ = alternateAllCPU(ctx, n, d, ops...)
	return rates
}

// alternateAllCPU is alternateAll that also returns the process's CPU
// time (user and system, every goroutine's: the store's background work
// too) per completed op of each side, over that side's turns; 0 where the
// platform does not say.
func alternateAllCPU(ctx context.Context, n int, d time.Duration, ops ...func(*rand.Rand) error) (rates []float64, cpuPerOp []time.Duration) {
	done := make([]int64, len(ops))
	elapsed := make([]time.Duration, len(ops))
	cpu := make([]time.Duration, len(ops))
	half := d / 2
	for range 2 {
		for i, op := range ops {
			before := proccpu.Used()
			k, e := count(ctx, n, half, op)
			cpu[i] += proccpu.Used() - before
			done[i] += k
			elapsed[i] += e
		}
	}
	rates = make([]float64, len(ops))
	cpuPerOp = make([]time.Duration, len(ops))
	for i := range ops {
		rates[i] = float64(done[i]) / elapsed[i].Seconds()
		if done[i] > 0 {
			cpuPerOp[i] = cpu[i] / time.Duration(done[i])
		}
	}
	return rates, cpuPerOp
}

func benchKey(i int) []byte {
	k := make([]byte, 0, 16)
	k = append(k, "key/"...)
	return binary.BigEndian.AppendUint64(k, uint64(i))
}

func serverKey(i int) string { return fmt.Sprintf("bench/%08d", i) }

// quietLogger drops the raw baseline's informational lines.
type quietLogger struct{ log io.Writer }

func (quietLogger) Infof(string, ...any)        {}
func (q quietLogger) Errorf(f string, a ...any) { fmt.Fprintf(q.log, "pebble: "+f+"\n", a...) }
func (q quietLogger) Fatalf(f string, a ...any) {
	q.Errorf(f, a...)
	panic(fmt.Sprintf("pebble: "+f, a...))
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// group formats n with thousands separators.
func group(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
