package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/seed-992972ee/percolator/internal/manualclock"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// TestScenarios runs the queue scenarios in testdata/: a producer and
// workers, each a process with its own Queue on one store, driven a call
// at a time, time moved by hand (the store's clock and every process's
// monotonic clock together), so each step is deterministic. Regenerate
// with -rewrite.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := newScenario(t)
		datadriven.RunTest(t, path, s.run)
	})
}

// scenarioStart is where the scenario's clock starts.
var scenarioStart = time.UnixMilli(1_700_000_000_000)

// rel shows a time as its distance from the scenario's start.
func rel(t time.Time) string { return "+" + t.Sub(scenarioStart).String() }

func relMS(ms int64) string { return rel(time.UnixMilli(ms)) }

// scenarioStore is a memory store (its optional capabilities promoted)
// whose clock is the scenario's.
type scenarioStore struct {
	*memory.Store
	clock *manualclock.Clock
}

func (s *scenarioStore) Now(context.Context) (time.Time, error) { return s.clock.Now(), nil }

const scenarioQueue = "jobs"

// scenario is one file's world: a Queue per process (the producer, each
// worker), the delivery each worker holds, and the item IDs by body
// (bodies name items in the file; IDs are random).
type scenario struct {
	t      *testing.T
	clock  *manualclock.Clock
	store  *scenarioStore
	opts   Options
	queues map[string]*Queue
	held   map[string]*Delivery // by worker
	ids    map[string]string    // body → item ID
	leases map[uint64]string    // lease id → "worker#delivery"
}

func newScenario(t *testing.T) *scenario {
	clock := manualclock.New(scenarioStart)
	st := &scenarioStore{Store: memory.New(), clock: clock}
	t.Cleanup(func() { st.Close() })
	return &scenario{t: t, clock: clock, store: st, opts: Options{MaxDeliveries: 3},
		queues: map[string]*Queue{}, held: map[string]*Delivery{}, ids: map[string]string{}, leases: map[uint64]string{}}
}

// queue is process p's Queue.
func (s *scenario) queue(p string) *Queue {
	if q := s.queues[p]; q != nil {
		return q
	}
	q, err := New(s.store, s.opts)
	if err != nil {
		s.t.Fatal(err)
	}
	q.clock.local = s.clock.Now
	q.jitter = func(time.Duration) time.Duration { return 0 }
	s.queues[p] = q
	return q
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	handlers := map[string]func(*datadriven.TestData) string{
		"push": s.push, "pop": s.pop, "extend": s.extend, "ack": s.ack, "nack": s.nack,
		"valid": s.valid, "advance": s.advance, "dead": s.dead, "requeue": s.requeue, "stats": s.stats, "dump": s.dump,
	}
	h, ok := handlers[d.Cmd]
	if !ok {
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return h(d)
}

func (s *scenario) arg(d *datadriven.TestData, key string) string {
	var v string
	d.ScanArgs(s.t, key, &v)
	return v
}

func (s *scenario) duration(d *datadriven.TestData, key string) time.Duration {
	dur, err := time.ParseDuration(s.arg(d, key))
	if err != nil {
		d.Fatalf(s.t, "%s: %v", key, err)
	}
	return dur
}

func (s *scenario) body(id string) string {
	for b, i := range s.ids {
		if i == id {
			return b
		}
	}
	return "?" + id
}

// errString names the package's errors, whose texts hold random IDs.
func errString(err error) string {
	for _, e := range []error{ErrNotHeld, ErrNotDead, ErrUnknown, ErrInvalidArgument} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return err.Error()
}

func (s *scenario) push(d *datadriven.TestData) string {
	b := s.arg(d, "body")
	id, err := s.queue("producer").Push(context.Background(), scenarioQueue, []byte(b))
	if err != nil {
		return errString(err)
	}
	s.ids[b] = id
	return fmt.Sprintf("%s: pushed at %s", b, rel(PushedAt(id)))
}

// pop is one TryPop of worker w: one look at the index.
func (s *scenario) pop(d *datadriven.TestData) string {
	w := s.arg(d, "w")
	dl, err := s.queue(w).TryPop(context.Background(), scenarioQueue, s.duration(d, "ttl"))
	switch {
	case err != nil:
		return w + ": " + errString(err)
	case dl == nil:
		return w + ": nothing due"
	}
	s.held[w] = dl
	s.leases[dl.lease] = fmt.Sprintf("%s's (delivery %d)", w, dl.Deliveries)
	return fmt.Sprintf("%s: %s, delivery %d, %s", w, dl.Body, dl.Deliveries, leaseString(dl))
}

func leaseString(dl *Delivery) string {
	return fmt.Sprintf("expires %s, valid until %s", rel(dl.Expiry), rel(dl.until))
}

func (s *scenario) delivery(d *datadriven.TestData) (string, *Delivery) {
	w := s.arg(d, "w")
	dl := s.held[w]
	if dl == nil {
		d.Fatalf(s.t, "%s holds no delivery", w)
	}
	return w, dl
}

func (s *scenario) extend(d *datadriven.TestData) string {
	w, dl := s.delivery(d)
	if err := s.queue(w).Extend(context.Background(), dl, s.duration(d, "ttl")); err != nil {
		return fmt.Sprintf("%s: %s: %s", w, dl.Body, errString(err))
	}
	return fmt.Sprintf("%s: %s extended: %s", w, dl.Body, leaseString(dl))
}

func (s *scenario) ack(d *datadriven.TestData) string {
	w, dl := s.delivery(d)
	if err := s.queue(w).Ack(context.Background(), dl); err != nil {
		return fmt.Sprintf("%s: %s: %s", w, dl.Body, errString(err))
	}
	return fmt.Sprintf("%s: %s acked", w, dl.Body)
}

func (s *scenario) nack(d *datadriven.TestData) string {
	w, dl := s.delivery(d)
	if err := s.queue(w).Nack(context.Background(), dl, s.duration(d, "delay")); err != nil {
		return fmt.Sprintf("%s: %s: %s", w, dl.Body, errString(err))
	}
	return fmt.Sprintf("%s: %s nacked", w, dl.Body)
}

// valid is what worker w's own clock says of its delivery's lease.
func (s *scenario) valid(d *datadriven.TestData) string {
	w, dl := s.delivery(d)
	return fmt.Sprintf("%s: %s: valid by its clock: %v (until %s)", w, dl.Body, dl.Valid(), rel(dl.until))
}

func (s *scenario) advance(d *datadriven.TestData) string {
	s.clock.Advance(s.duration(d, "by"))
	return "now " + rel(s.clock.Now())
}

func (s *scenario) dead(*datadriven.TestData) string {
	ds, err := s.queue("operator").Dead(context.Background(), scenarioQueue, 0)
	if err != nil {
		return errString(err)
	}
	if len(ds) == 0 {
		return "no dead letters"
	}
	var out []string
	for _, dl := range ds {
		out = append(out, fmt.Sprintf("%s: %d deliveries, pushed at %s", dl.Body, dl.Deliveries, rel(dl.PushedAt)))
	}
	return strings.Join(out, "\n")
}

func (s *scenario) requeue(d *datadriven.TestData) string {
	b := s.arg(d, "body")
	if err := s.queue("operator").Requeue(context.Background(), scenarioQueue, s.ids[b]); err != nil {
		return b + ": " + errString(err)
	}
	return b + ": requeued"
}

func (s *scenario) stats(*datadriven.TestData) string {
	st, err := s.queue("operator").Stats(context.Background(), scenarioQueue)
	if err != nil {
		return errString(err)
	}
	return fmt.Sprintf("depth %d, in flight %d, dead %d, retained %d, oldest %v", st.Depth, st.InFlight, st.Dead, st.Retained, st.Oldest)
}

// dump is the queue's rows: each item's state (epoch after @), its index
// entries (their time, the epoch they were written for, and what they
// are to the item now) and the dead-letter marks.
func (s *scenario) dump(*datadriven.TestData) string {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	s.scanRows("i", storage.Filter{{Family: Family, Qualifier: qualState, Limit: 1}}, func(r storage.Row) {
		var st state
		_ = json.Unmarshal(r.Cells[0].Value, &st)
		add("item %-2s @%-2d %s", s.body(string(r.Key[len(prefix(scenarioQueue))+1:])), r.Cells[0].TS, s.stateString(&st))
	})
	s.scanRows("v", storage.Filter{{Family: Family, Qualifier: qualEntry, Limit: 1}}, func(r storage.Row) {
		e, ok := parseEntry(scenarioQueue, r)
		if !ok {
			add("entry %q corrupt", r.Key)
			return
		}
		it, _ := s.queue("operator").readItem(context.Background(), scenarioQueue, e.id, false)
		add("entry at %-9s %-2s for @%-2d %s", relMS(e.at), s.body(e.id), e.epoch, [...]string{"current", "stale", "pending"}[classify(e, it)])
	})
	s.scanRows("d", storage.Filter{{Family: Family, Qualifier: qualDead}}, func(r storage.Row) {
		add("dead mark %-2s @%d", s.body(string(r.Key[len(prefix(scenarioQueue))+1:])), r.Cells[0].TS)
	})
	if len(lines) == 0 {
		return "empty"
	}
	return strings.Join(lines, "\n")
}

func (s *scenario) stateString(st *state) string {
	out := fmt.Sprintf("%-6s", st.St)
	if st.St != stDead {
		out += fmt.Sprintf(" at %-9s", relMS(st.At))
	} else {
		out += fmt.Sprintf(" %-12s", "") // no entry
	}
	out += fmt.Sprintf(" deliveries %d", st.N)
	if st.Lease != 0 {
		out += ", lease " + s.leases[st.Lease]
	}
	return out
}

func (s *scenario) scanRows(kind string, f storage.Filter, fn func(storage.Row)) {
	p := prefix(scenarioQueue) + kind
	var rows []storage.Row
	err := s.store.Scan(context.Background(), []byte(p), []byte(p+"\xff"), f, 0, func(r storage.Row) bool {
		rows = append(rows, r)
		return true
	})
	if err != nil {
		s.t.Fatal(err)
	}
	sort.SliceStable(rows, func(i, j int) bool { return string(rows[i].Key) < string(rows[j].Key) })
	for _, r := range rows {
		fn(r)
	}
}
