package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/bigtable/bttesting"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/storage/remote"
)

// flaky fails conditional writes after applying them one time in ten (an
// unknown outcome), and forwards the clock.
type flaky struct {
	storage.Store
	n atomic.Int64
}

func (f *flaky) Now(ctx context.Context) (time.Time, error) { return f.Store.(storage.Clock).Now(ctx) }

func (f *flaky) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, a, b []storage.Mutation) (bool, error) {
	m, err := f.Store.CheckAndMutate(ctx, row, p, a, b)
	if err == nil && f.n.Add(1)%10 == 0 {
		return false, errors.New("injected: applied, reply lost")
	}
	return m, err
}

// TestBackends: contenders on every backend with a clock (memory, Pebble,
// the single server over gRPC, the Bigtable emulator), and on one whose
// conditional writes lose their replies: tokens strictly increase and no
// two holders act at once.
func TestBackends(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(t *testing.T) storage.Store
	}{
		{"memory", func(t *testing.T) storage.Store { return memory.New() }},
		{"pebble", func(t *testing.T) storage.Store {
			st, err := pebble.Open(t.TempDir(), pebble.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"server", func(t *testing.T) storage.Store {
			srv := servertest.Start(t, server.Options{}, "")
			return servertest.Store(t, servertest.Dial(t, srv.Addr, rpc.DialOptions{}), remote.Options{})
		}},
		{"bigtable", func(t *testing.T) storage.Store { return bttesting.Open(t, bttesting.Start(t), "locks") }},
		{"lost replies", func(t *testing.T) storage.Store { return &flaky{Store: memory.New()} }},
	} {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			defer st.Close()
			contend(t, st, 8, 800*time.Millisecond)
		})
	}
}

func contend(t *testing.T, st storage.Store, n int, d time.Duration) {
	type act struct {
		token      uint64
		start, end time.Time
	}
	var (
		mu   sync.Mutex
		acts []act
		wg   sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lk, err := New(st, Options{Holder: fmt.Sprint("c", i), MaxBackOff: 5 * time.Millisecond})
			if err != nil {
				t.Error(err)
				return
			}
			rng := rand.New(rand.NewPCG(uint64(i), 2))
			for time.Now().Before(deadline) {
				l, err := lk.Acquire(context.Background(), "res", 200*time.Millisecond)
				if err != nil {
					t.Error(err)
					return
				}
				start := time.Now()
				for l.Valid() && time.Since(start) < time.Duration(rng.IntN(2000))*time.Microsecond {
					time.Sleep(100 * time.Microsecond)
				}
				end := time.Now()
				if !l.Valid() {
					end = l.until
				}
				mu.Lock()
				acts = append(acts, act{l.Token, start, end})
				mu.Unlock()
				if err := lk.Release(context.Background(), l); err != nil {
					t.Errorf("release (re-sent after a lost reply if need be): %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	sort.Slice(acts, func(i, j int) bool { return acts[i].token < acts[j].token })
	for i := 1; i < len(acts); i++ {
		a, b := acts[i-1], acts[i]
		if b.token <= a.token {
			t.Fatalf("token %d granted twice", b.token)
		}
		if b.start.Before(a.end) {
			t.Fatalf("holder of token %d acted before the holder of token %d stopped", b.token, a.token)
		}
	}
	if len(acts) < 10 {
		t.Fatalf("only %d grants", len(acts))
	}
	t.Logf("%d grants", len(acts))
}
