package faultproxy

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// The plan is a function of the seed and options: same seed, same
// events; a zero rate plans none of its kind; every draw is in range.
func TestNemesisPlanIsSeeded(t *testing.T) {
	opts := NemesisOptions{Seed: 42, CutRate: 0, BlackholeRate: 3, DelayRate: 2}
	opts.EnsureDefaults()
	plan := func(o NemesisOptions) []event {
		pl := newPlanner(o)
		var evs []event
		for range 200 {
			e, ok := pl.next()
			if !ok {
				t.Fatal("no event with non-zero rates")
			}
			evs = append(evs, e)
		}
		return evs
	}
	a, b := plan(opts), plan(opts)
	other := opts
	other.Seed = 43
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("two plans from one seed differ")
	}
	if fmt.Sprint(a) == fmt.Sprint(plan(other)) {
		t.Fatal("plans from seeds 42 and 43 are the same")
	}
	kinds := map[faultKind]int{}
	for i, e := range a {
		kinds[e.kind]++
		if i > 0 && e.at < a[i-1].at {
			t.Fatalf("event %d at %v before event %d at %v", i, e.at, i-1, a[i-1].at)
		}
		bound := map[faultKind]time.Duration{faultBlackhole: opts.MaxBlackhole, faultDelay: opts.MaxDelayFor}[e.kind]
		if e.lasts <= 0 || e.lasts > bound || e.latency <= 0 || e.latency > opts.MaxLatency || e.dir.validate() != nil {
			t.Fatalf("event %d out of range: %+v", i, e)
		}
	}
	if kinds[faultCut] != 0 || kinds[faultBlackhole] == 0 || kinds[faultDelay] == 0 {
		t.Fatalf("kinds planned: %v; want no cut (rate 0) and both others", kinds)
	}
	if _, ok := newPlanner(NemesisOptions{}).next(); ok {
		t.Fatal("an event planned with every rate zero")
	}
}

func TestNemesisOptionsValidate(t *testing.T) {
	p := newProxy(t, "127.0.0.1:1")
	for _, o := range []NemesisOptions{
		{CutRate: -1},
		{BlackholeRate: math.NaN()},
		{DelayRate: math.Inf(1)},
		{Duration: -time.Second},
		{MaxLatency: -1},
	} {
		n, err := StartNemesis(o, p)
		if err == nil {
			n.Stop()
		}
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("StartNemesis(%+v): %v, want ErrInvalidArgument", o, err)
		}
	}
	if _, err := StartNemesis(NemesisOptions{CutRate: 1}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("StartNemesis without a proxy: %v, want ErrInvalidArgument", err)
	}
}

// logBuffer collects a nemesis's log lines and passes them on to t.
type logBuffer struct {
	t  *testing.T
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) logf(format string, args ...any) {
	l.t.Logf(format, args...)
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, format+"\n", args...)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Clients call on through a nemesis for its duration: every call ends in
// success or in a network failure, the nemesis runs exactly the events
// its seed plans, logs its seed, and heals everything when it ends, after
// which every client's calls succeed.
func TestNemesisFaultsThenHeals(t *testing.T) {
	e := newGRPCEnv(t)
	clients := []healthpb.HealthClient{e.client}
	for range 2 {
		clients = append(clients, dialHealth(t, e.proxy.Addr(), insecure.NewCredentials()))
	}
	opts := NemesisOptions{
		Seed: 4, Duration: time.Second,
		CutRate: 6, BlackholeRate: 6, DelayRate: 6,
		MaxBlackhole: 300 * time.Millisecond, MaxDelayFor: 300 * time.Millisecond, MaxLatency: 20 * time.Millisecond,
	}
	log := &logBuffer{t: t}
	opts.Logf = log.logf
	var stop atomic.Bool
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	for _, c := range clients {
		wg.Go(func() {
			for !stop.Load() {
				switch err := checkWith(t, c, heldTimeout, ""); status.Code(err) {
				case codes.OK:
					ok.Add(1)
				case codes.Unavailable, codes.DeadlineExceeded:
					failed.Add(1)
				default:
					t.Errorf("a call through the nemesis: %v", err)
				}
			}
		})
	}
	n, err := StartNemesis(opts, e.proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop() })
	wait(t, n.Done(), "the nemesis ends after its duration")
	stats := n.Stop()
	stop.Store(true)
	wg.Wait()
	t.Logf("calls: %d ok, %d failed; nemesis: %+v", ok.Load(), failed.Load(), stats)

	opts.EnsureDefaults()
	pl, planned, kinds := newPlanner(opts), 0, map[faultKind]int{}
	for ev, _ := pl.next(); ev.at < opts.Duration; ev, _ = pl.next() {
		planned++
		kinds[ev.kind]++
	}
	if len(kinds) != 3 {
		t.Fatalf("seed %d plans %v: pick a seed that plans every kind of fault", opts.Seed, kinds)
	}
	if stats.Events != planned {
		t.Errorf("the nemesis ran %d events, its seed plans %d within its duration", stats.Events, planned)
	}
	if acted := stats.Cuts + stats.Blackholes + stats.Delays + stats.Skipped; acted > stats.Events {
		t.Errorf("stats %+v: more actions than events", stats)
	}
	if !strings.Contains(log.String(), fmt.Sprintf("seed %d", opts.Seed)) {
		t.Errorf("the log does not give the seed:\n%s", log)
	}
	expectHealed(t, e.proxy)
	for i, c := range clients {
		if err := checkWith(t, c, patientTimeout, "", grpc.WaitForReady(true)); err != nil {
			t.Errorf("client %d after the nemesis: %v", i, err)
		}
	}
}

// Stop ends a nemesis early and heals it: a blackhole meant to last an
// hour is lifted, and calls go through.
func TestNemesisStopHealsEarly(t *testing.T) {
	e := newGRPCEnv(t)
	e.mustCheck(t)
	n, err := StartNemesis(NemesisOptions{BlackholeRate: 100, MaxBlackhole: time.Hour, Logf: t.Logf}, e.proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop() })
	deadline := time.Now().Add(ioTimeout)
	for !waitConns(t, e.proxy, 1)[0].Blackholed() {
		if time.Now().After(deadline) {
			t.Fatal("the nemesis blackholed nothing")
		}
		time.Sleep(time.Millisecond)
	}
	stats := n.Stop()
	if stats.Blackholes == 0 {
		t.Fatalf("stats %+v: no blackhole counted", stats)
	}
	n.Stop() // again: harmless
	expectHealed(t, e.proxy)
	e.mustCheck(t)
}

// expectHealed checks that no connection of p is blackholed or delayed.
func expectHealed(t *testing.T, p *Proxy) {
	t.Helper()
	for _, c := range p.Conns() {
		p.mu.Lock()
		held, delay := c.heldLocked(), c.state.delay
		p.mu.Unlock()
		if held || delay != [2]Delay{} {
			t.Errorf("%v after the nemesis: blackholed %v, delay %v", c, held, delay)
		}
	}
}
