package txn

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/internal/ctxwait"
	"github.com/seed-992972ee/percolator/internal/manualclock"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/bigtable/bttesting"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

// counterOracle hands out 1, 2, 3, ... : deterministic timestamps for
// scenarios. Safe for concurrent use. It is also a storage.Stamper, the
// oracle of an owned env's store.
type counterOracle struct{ n atomic.Uint64 }

func (o *counterOracle) Timestamp(context.Context) (uint64, error) { return o.n.Add(1), nil }

// Allocate implements storage.Stamper: n timestamps, the first returned.
func (o *counterOracle) Allocate(_ context.Context, n int) (uint64, error) {
	return o.n.Add(uint64(n)) - uint64(n) + 1, nil
}

// env is one shared store, oracle, liveness and clock, with any number of
// clients ("processes") on it.
type env struct {
	t       testing.TB
	store   storage.Store
	oracle  *counterOracle
	live    *coord.Local
	clock   *manualclock.Clock
	indexed bool
	// owned: the store takes one-phase commits and async prewrites,
	// stamped by oracle (newOwnedEnv).
	owned   bool
	base    *Client
	clients map[string]*Client
}

func newEnv(t testing.TB, indexed bool) *env {
	mem := memory.New()
	var st storage.Store = mem
	if !indexed {
		st = storagetest.SharedStore{Store: mem} // no index, no deferred writes: as on Bigtable
	}
	t.Cleanup(func() { _ = mem.Close() })
	return newEnvOn(t, st, indexed)
}

// newOwnedEnv is an env on an embedded Pebble store whose owner runs the
// oracle: the env's counter stamps its one-phase commits and async
// prewrites.
func newOwnedEnv(t testing.TB) *env {
	st, err := pebble.Open(t.TempDir(), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e := newEnvOn(t, st, true)
	st.SetStamper(e.oracle)
	e.owned = true
	return e
}

// newEnvOn is newEnv on st (closed by its opener).
func newEnvOn(t testing.TB, st storage.Store, indexed bool) *env {
	return &env{t: t, store: st, oracle: &counterOracle{}, live: coord.NewLocal(),
		clock: manualclock.New(time.Unix(1_000_000, 0)), indexed: indexed, clients: map[string]*Client{}}
}

// backends are the stores the protocol tests run on: memory with the
// owner's index, memory shared (no index, no deferred writes), the same
// reading several rows in one call as a server's store does (the
// client's batched reads), and Bigtable (its emulator).
var backends = []string{"indexed", "shared", "multi", "bigtable"}

var btTables atomic.Int64

// newEnvBackend is newEnv on the named backend.
func newEnvBackend(t testing.TB, backend string) *env {
	if backend == "multi" {
		mem := memory.New()
		t.Cleanup(func() { _ = mem.Close() })
		return newEnvOn(t, storagetest.MultiReadStore{SharedStore: storagetest.SharedStore{Store: mem}}, false)
	}
	if backend != "bigtable" {
		return newEnv(t, backend == "indexed")
	}
	emu := bttesting.Start(t)
	return newEnvOn(t, bttesting.Open(t, emu, fmt.Sprintf("txn%d", btTables.Add(1))), false)
}

// client returns the client of process name, creating it (alive) on first
// use. All clients share the store's one index, as threads of one owner.
func (e *env) client(name string) *Client { return e.clientWith(name, clientFlags{}) }

// clientFlags are the options of a scenario's client that differ from
// one to another.
type clientFlags struct {
	// twoPhase: Options.TwoPhaseOnly; otherwise, on an owned env,
	// Options.AsyncCommit.
	twoPhase bool
	// push: Options.ReadThroughLocks.
	push bool
	// stable: read-only transactions start above the newest commit the
	// client acknowledged or returned (stable.go); otherwise fresh, so
	// that a scenario's timestamps are the same on every backend.
	stable bool
}

// clientWith is client, the client created with flags; a client's first
// use decides.
func (e *env) clientWith(name string, flags clientFlags) *Client {
	if c, ok := e.clients[name]; ok {
		return c
	}
	opts := Options{Owner: name, Now: e.clock.Now, LockTTL: 10 * time.Second, InlineSize: -1,
		TwoPhaseOnly: flags.twoPhase, AsyncCommit: e.owned && !flags.twoPhase, ReadThroughLocks: flags.push,
		freshReadOnly: !flags.stable}
	var c *Client
	if e.base == nil {
		var err error
		if c, err = NewClient(context.Background(), e.store, e.oracle, e.live, opts); err != nil {
			e.t.Fatal(err)
		}
		e.base = c
	} else {
		opts.EnsureDefaults()
		b := e.base
		c = &Client{store: e.store, batch: b.batch, batchIdem: b.batchIdem, notify: NotifySpace{store: e.store, apart: b.notify.apart, now: opts.Now}, oracle: e.oracle, live: e.live, opts: opts,
			deferred: b.deferred, epoched: b.epoched, idem: b.idem, unlessed: b.unlessed,
			index: b.index, cond: b.cond, awaitOnePhase: b.awaitOnePhase, sleep: ctxwait.Sleep, secondaryBatch: 256}
		if !flags.twoPhase {
			c.onePhase, _ = e.store.(storage.OnePhaser)
		}
		if opts.AsyncCommit {
			c.async, _ = e.store.(storage.AsyncPrewriter)
		}
	}
	e.live.Register(name)
	e.clients[name] = c
	return c
}

// dump renders the cells of col in rows as the Bob and Joe tables of the
// paper's walk-through: one line per timestamp, newest first, with its
// data, lock and write cells.
func (e *env) dump(rows []string, col string) string {
	var b strings.Builder
	for _, row := range rows {
		r, err := e.store.ReadRow(context.Background(), []byte(row), storage.Filter{
			{Family: FamilyData, Qualifier: col}, {Family: FamilyLock, Qualifier: col}, {Family: FamilyWrite, Qualifier: col}})
		if err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "%s %s\n", row, col)
		byTS := map[uint64][]string{}
		for _, cell := range r.Cells {
			byTS[cell.TS] = append(byTS[cell.TS], FormatCell(cell.Family, cell.Value))
		}
		var tss []uint64
		for ts := range byTS {
			tss = append(tss, ts)
		}
		sort.Slice(tss, func(i, j int) bool { return tss[i] > tss[j] })
		for _, ts := range tss {
			fmt.Fprintf(&b, "  %d: %s\n", ts, strings.Join(byTS[ts], "  "))
		}
	}
	return b.String()
}

// errString renders an error class for scenario output.
func errString(err error) string {
	var ce *ConflictError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ce):
		return "conflict: " + ce.Reason
	case errors.Is(err, errLocked):
		return "locked: wait"
	case errors.Is(err, ErrNotFound):
		return "not found"
	}
	return "error: " + err.Error()
}
