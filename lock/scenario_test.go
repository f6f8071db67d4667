package lock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/seed-992972ee/percolator/internal/manualclock"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// TestScenarios runs the lease scenarios in testdata/: one lock, its
// holders and waiters driven a look at a time, time moved by hand (the
// store's clock and every holder's monotonic clock together), so each
// step is deterministic. Regenerate with -rewrite.
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

// scenarioStore is a memory store whose clock is the scenario's, and
// which loses the reply of the next conditional write of a kind when
// told to (the write applies).
type scenarioStore struct {
	*memory.Store
	clock *manualclock.Clock
	lose  string // "grant", "renewal", "ticket": the next such write's reply is lost
}

func (s *scenarioStore) Now(context.Context) (time.Time, error) { return s.clock.Now(), nil }

func (s *scenarioStore) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, a, b []storage.Mutation) (bool, error) {
	matched, err := s.Store.CheckAndMutate(ctx, row, p, a, b)
	if s.lose != "" && s.lose == kindOf(append(append([]storage.Mutation(nil), a...), b...)) {
		s.lose = ""
		return false, errLost
	}
	return matched, err
}

// kindOf names a locker's conditional write by what it puts.
func kindOf(muts []storage.Mutation) string {
	switch {
	case isGrant(muts):
		return "grant"
	case isRenewal(muts):
		return "renewal"
	case writes(muts, qualTicket):
		return "ticket"
	}
	return ""
}

// scenario is one file's world: one store, a Locker per holder name,
// the Acquire calls still waiting, the leases held, and a resource the
// lock protects, which refuses a token below the highest it has seen.
type scenario struct {
	t       *testing.T
	clock   *manualclock.Clock
	store   *scenarioStore
	lockers map[string]*Locker
	waiters map[string]*waiter
	leases  map[string]*Lease
	fence   uint64 // the highest token the resource has seen
}

const scenarioLock = "db"

func newScenario(t *testing.T) *scenario {
	clock := manualclock.New(scenarioStart)
	st := &scenarioStore{Store: memory.New(), clock: clock}
	t.Cleanup(func() { st.Close() })
	return &scenario{t: t, clock: clock, store: st, lockers: map[string]*Locker{},
		waiters: map[string]*waiter{}, leases: map[string]*Lease{}}
}

// locker is holder h's Locker: tickets live 30s unless a scenario dies
// waiting, so a waiter need not renew between the steps shown.
func (s *scenario) locker(h string) *Locker {
	if lk := s.lockers[h]; lk != nil {
		return lk
	}
	lk, err := New(s.store, Options{Holder: h, TicketTTL: 30 * time.Second})
	if err != nil {
		s.t.Fatal(err)
	}
	lk.local = s.clock.Now
	s.lockers[h] = lk
	return lk
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	handlers := map[string]func(*datadriven.TestData) string{
		"acquire": s.acquire, "look": s.look, "cancel": s.cancel,
		"renew": s.renew, "release": s.release, "use": s.use,
		"advance": s.advance, "show": s.show, "dump": s.dump,
	}
	h, ok := handlers[d.Cmd]
	if !ok {
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	if d.HasArg("lose") {
		d.ScanArgs(t, "lose", &s.store.lose)
	}
	out := h(d)
	if s.store.lose != "" {
		d.Fatalf(t, "no %s reply was lost", s.store.lose)
	}
	return out
}

func (s *scenario) holder(d *datadriven.TestData) string {
	var h string
	d.ScanArgs(s.t, "h", &h)
	return h
}

func duration(t *testing.T, d *datadriven.TestData, key string) time.Duration {
	var v string
	d.ScanArgs(t, key, &v)
	dur, err := time.ParseDuration(v)
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return dur
}

// acquire starts an Acquire of the lock by holder h and makes its first
// look (take a ticket, read the row, grant if first and free).
func (s *scenario) acquire(d *datadriven.TestData) string {
	h := s.holder(d)
	w, err := s.locker(h).newWaiter(scenarioLock, duration(s.t, d, "ttl"))
	if err != nil {
		return err.Error()
	}
	s.waiters[h] = w
	return s.round(h, w)
}

// look is the next look of h's waiting Acquire.
func (s *scenario) look(d *datadriven.TestData) string {
	h := s.holder(d)
	w := s.waiters[h]
	if w == nil {
		d.Fatalf(s.t, "%s is not waiting", h)
	}
	return s.round(h, w)
}

func (s *scenario) round(h string, w *waiter) string {
	l, o, err := w.round(context.Background())
	out := fmt.Sprintf("%s: ticket %d: %s", h, w.my, o)
	if err != nil {
		out += ": " + err.Error()
	}
	if l != nil {
		delete(s.waiters, h)
		s.leases[h] = l
		out += ": " + leaseString(l)
	}
	return out
}

func leaseString(l *Lease) string {
	return fmt.Sprintf("token %d, expires %s, valid until %s", l.Token, rel(l.Expiry), rel(l.Deadline()))
}

// cancel ends h's waiting Acquire as a cancelled context does: its
// ticket is withdrawn.
func (s *scenario) cancel(d *datadriven.TestData) string {
	h := s.holder(d)
	w := s.waiters[h]
	if w == nil {
		d.Fatalf(s.t, "%s is not waiting", h)
	}
	w.withdraw(context.Background())
	delete(s.waiters, h)
	return h + ": withdrawn"
}

func (s *scenario) lease(d *datadriven.TestData) (string, *Lease) {
	h := s.holder(d)
	l := s.leases[h]
	if l == nil {
		d.Fatalf(s.t, "%s holds no lease", h)
	}
	return h, l
}

func (s *scenario) renew(d *datadriven.TestData) string {
	h, l := s.lease(d)
	if err := s.locker(h).Renew(context.Background(), l); err != nil {
		return fmt.Sprintf("%s: %v (ErrNotHeld: %v)", h, err, errors.Is(err, ErrNotHeld))
	}
	return h + ": renewed: " + leaseString(l)
}

func (s *scenario) release(d *datadriven.TestData) string {
	h, l := s.lease(d)
	if err := s.locker(h).Release(context.Background(), l); err != nil {
		return fmt.Sprintf("%s: %v (ErrNotHeld: %v)", h, err, errors.Is(err, ErrNotHeld))
	}
	return h + ": released"
}

// use is h acting on the protected resource under its lease: it asks
// its own clock first (Valid) and stops if the lease is over by it,
// unless told to ignore it (a holder that stalled between the check and
// the act); the resource refuses a token below the highest it has seen.
func (s *scenario) use(d *datadriven.TestData) string {
	h, l := s.lease(d)
	if !l.Valid() && !d.HasArg("ignore-clock") {
		return fmt.Sprintf("%s: over by its clock (deadline %s): stops", h, rel(l.Deadline()))
	}
	if l.Token < s.fence {
		return fmt.Sprintf("%s: token %d refused by the resource (it has seen %d)", h, l.Token, s.fence)
	}
	s.fence = l.Token
	return fmt.Sprintf("%s: token %d accepted by the resource", h, l.Token)
}

func (s *scenario) advance(d *datadriven.TestData) string {
	s.clock.Advance(duration(s.t, d, "by"))
	return "now " + rel(s.clock.Now())
}

// show is Locker.Show: what an operator sees.
func (s *scenario) show(*datadriven.TestData) string {
	st, err := s.locker("operator").Show(context.Background(), scenarioLock)
	if err != nil {
		return err.Error()
	}
	state := "free"
	if st.Held {
		state = "held"
	}
	return fmt.Sprintf("%s: holder %s, token %d, expiry %s; waiters %v", state, st.Holder, st.Token, rel(st.Expiry), st.Waiters)
}

// dump is the lock's row, cell by cell (versions after @).
func (s *scenario) dump(*datadriven.TestData) string {
	st, err := s.locker("operator").read(context.Background(), scenarioLock)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "token counter  @%d\n", st.tokenTS)
	if h := st.holder; h != nil {
		released := ""
		if h.Released {
			released = ", released"
		}
		fmt.Fprintf(&b, "holder         @%d: %s, token %d, expiry %s%s\n", st.holderTS, h.Holder, h.Token, rel(time.UnixMilli(h.ExpiryMS)), released)
	}
	fmt.Fprintf(&b, "ticket counter @%d\n", st.ticketN)
	for _, tk := range st.tickets {
		fmt.Fprintf(&b, "ticket %d       @%d: %s, expiry %s\n", tk.n, tk.ts, tk.t.Holder, rel(time.UnixMilli(tk.t.ExpiryMS)))
	}
	return strings.TrimSuffix(b.String(), "\n")
}
