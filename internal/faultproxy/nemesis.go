package faultproxy

import (
	"cmp"
	"container/heap"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// NemesisOptions configures a Nemesis. Rates are mean faults per second
// over all its proxies together (a Poisson process); a zero rate turns
// that fault off.
type NemesisOptions struct {
	// Seed seeds every random choice: when each fault comes, which kind,
	// which connection (by position among the open ones, oldest first),
	// how long it lasts and how much latency it adds. 0 picks one from
	// the clock. The seed is logged either way; replay by passing it.
	Seed uint64
	// Duration is how long faults are injected; then the nemesis heals
	// everything it did and stops by itself. 0: until Stop.
	Duration time.Duration
	// CutRate: connections cut per second.
	CutRate float64
	// BlackholeRate: connections blackholed per second, each for a
	// random time in (0, MaxBlackhole].
	BlackholeRate float64
	// DelayRate: connections delayed per second, each for a random time
	// in (0, MaxDelayFor], by a fixed latency drawn from (0, MaxLatency]
	// in a random direction (or both).
	DelayRate float64
	// MaxBlackhole bounds a blackhole's length. Default 1s.
	MaxBlackhole time.Duration
	// MaxDelayFor bounds how long a delay lasts. Default 1s.
	MaxDelayFor time.Duration
	// MaxLatency bounds a delay's latency. Default 50ms.
	MaxLatency time.Duration
	// Logf receives one line per action (t.Logf fits; it must stay
	// callable until Stop returns). Default: discard.
	Logf func(format string, args ...any)
}

// EnsureDefaults fills in the defaults of unset fields.
func (o *NemesisOptions) EnsureDefaults() {
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.MaxBlackhole == 0 {
		o.MaxBlackhole = time.Second
	}
	if o.MaxDelayFor == 0 {
		o.MaxDelayFor = time.Second
	}
	if o.MaxLatency == 0 {
		o.MaxLatency = 50 * time.Millisecond
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Validate rejects negative or non-finite rates and negative durations.
func (o *NemesisOptions) Validate() error {
	for _, r := range []float64{o.CutRate, o.BlackholeRate, o.DelayRate} {
		if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return fmt.Errorf("%w: nemesis rate %v", ErrInvalidArgument, r)
		}
	}
	for _, d := range []time.Duration{o.Duration, o.MaxBlackhole, o.MaxDelayFor, o.MaxLatency} {
		if d < 0 {
			return fmt.Errorf("%w: nemesis duration %v", ErrInvalidArgument, d)
		}
	}
	return nil
}

// faultKind is what one nemesis event does.
type faultKind int

const (
	faultCut faultKind = iota
	faultBlackhole
	faultDelay
)

func (k faultKind) String() string {
	return [...]string{"cut", "blackhole", "delay"}[k]
}

// event is one planned fault. Every field is drawn from the seed, the same
// number of draws per event, so the plan is a function of the seed and
// the options alone.
type event struct {
	at      time.Duration // since the start
	kind    faultKind
	pick    uint64        // which open connection: pick mod their number
	lasts   time.Duration // blackhole or delay
	latency time.Duration // delay
	dir     Direction     // delay
}

// planner draws a nemesis's events in order.
type planner struct {
	rng  *rand.Rand
	opts NemesisOptions
	at   time.Duration
}

func newPlanner(opts NemesisOptions) *planner {
	return &planner{rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x6a09e667f3bcc909)), opts: opts}
}

// next returns the next event, or false if every rate is zero.
func (pl *planner) next() (event, bool) {
	o := pl.opts
	total := o.CutRate + o.BlackholeRate + o.DelayRate
	if total == 0 {
		return event{}, false
	}
	pl.at += time.Duration(pl.rng.ExpFloat64() / total * float64(time.Second))
	e := event{at: pl.at, pick: pl.rng.Uint64(), dir: dirs[pl.rng.IntN(2)]}
	if pl.rng.IntN(3) == 0 {
		e.dir = BothWays
	}
	switch x := pl.rng.Float64() * total; {
	case x < o.CutRate:
		e.kind = faultCut
	case x < o.CutRate+o.BlackholeRate:
		e.kind, e.lasts = faultBlackhole, upTo(pl.rng, o.MaxBlackhole)
	default:
		e.kind, e.lasts = faultDelay, upTo(pl.rng, o.MaxDelayFor)
	}
	e.latency = upTo(pl.rng, o.MaxLatency)
	return e, true
}

// upTo draws from (0, max]; it draws once whatever max is.
func upTo(rng *rand.Rand, max time.Duration) time.Duration {
	x := rng.Uint64()
	if max <= 0 {
		return 0
	}
	return time.Duration(x%uint64(max)) + 1
}

// NemesisStats counts what a nemesis did.
type NemesisStats struct {
	Events     int // planned events that came due
	Skipped    int // of them, found no open connection
	Cuts       int
	Blackholes int
	Delays     int
}

// Nemesis cuts, blackholes and delays the connections of one or more
// proxies at random, for a duration or until Stop, logging each action.
// When it stops it resumes every connection it blackholed and removes
// every delay it set. While it runs it owns the connections' own
// blackholes and delays (Conn.Blackhole, Conn.SetDelay): a test that
// runs one beside it should use the proxy-wide faults instead.
//
// Which connection an event hits depends on which are open when it comes,
// so a replay from the seed repeats the plan exactly and the run as far as
// the connections it finds are the same.
type Nemesis struct {
	proxies []*Proxy
	opts    NemesisOptions
	start   time.Time
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	// Owned by the run goroutine until done is closed.
	heals  healQueue
	latest map[*Conn]time.Time // a connection's latest heal; earlier ones are stale
	stats  NemesisStats
}

// StartNemesis validates opts and starts a nemesis on proxies. Stop it
// before the test ends (t.Cleanup(n.Stop)).
func StartNemesis(opts NemesisOptions, proxies ...*Proxy) (*Nemesis, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if len(proxies) == 0 {
		return nil, fmt.Errorf("%w: nemesis without a proxy", ErrInvalidArgument)
	}
	n := &Nemesis{
		proxies: proxies,
		opts:    opts,
		start:   time.Now(),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		latest:  make(map[*Conn]time.Time),
	}
	until := "until stopped"
	if opts.Duration > 0 {
		until = "for " + opts.Duration.String()
	}
	opts.Logf("nemesis: seed %d (replay with NemesisOptions.Seed=%d): cut %.3g/s, blackhole %.3g/s up to %v, delay %.3g/s up to %v for up to %v, %s",
		opts.Seed, opts.Seed, opts.CutRate, opts.BlackholeRate, opts.MaxBlackhole, opts.DelayRate, opts.MaxLatency, opts.MaxDelayFor, until)
	go n.run()
	return n, nil
}

// Seed returns the seed the nemesis runs from.
func (n *Nemesis) Seed() uint64 { return n.opts.Seed }

// Done is closed when the nemesis has stopped and healed what it did.
func (n *Nemesis) Done() <-chan struct{} { return n.done }

// Stop ends the nemesis early (or waits for its end), heals what it did
// and returns what it did. It may be called more than once and from any
// goroutine.
func (n *Nemesis) Stop() NemesisStats {
	n.once.Do(func() { close(n.stop) })
	<-n.done
	return n.stats
}

// run executes the plan until the duration ends or Stop.
func (n *Nemesis) run() {
	defer close(n.done)
	defer n.healAll()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	pl := newPlanner(n.opts)
	next, ok := pl.next()
	for {
		if !n.sleepUntil(timer, n.wakeAt(next, ok)) {
			return
		}
		now := time.Now()
		n.healDue(now)
		// Every event planned within the duration runs, late if the
		// machine was slow: how many run depends on the seed alone.
		for ok && n.within(next.at) && !n.start.Add(next.at).After(now) {
			n.apply(next, now)
			next, ok = pl.next()
		}
		if n.opts.Duration > 0 && now.Sub(n.start) >= n.opts.Duration {
			return
		}
	}
}

// within reports whether an event at offset at falls in the duration.
func (n *Nemesis) within(at time.Duration) bool {
	return n.opts.Duration == 0 || at < n.opts.Duration
}

// sleepUntil waits until wake (forever if it is zero) on timer; false if
// Stop came first.
func (n *Nemesis) sleepUntil(timer *time.Timer, wake time.Time) bool {
	var c <-chan time.Time
	if !wake.IsZero() {
		timer.Reset(time.Until(wake))
		c = timer.C
	}
	select {
	case <-n.stop:
		return false
	case <-c:
		return true
	}
}

// wakeAt is the earliest of the next event, the next heal and the end.
func (n *Nemesis) wakeAt(next event, ok bool) time.Time {
	var wake time.Time
	earliest := func(t time.Time) {
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	if ok && n.within(next.at) {
		earliest(n.start.Add(next.at))
	}
	if len(n.heals) > 0 {
		earliest(n.heals[0].at)
	}
	if n.opts.Duration > 0 {
		earliest(n.start.Add(n.opts.Duration))
	}
	return wake
}

// apply executes one event on the connection it picks.
func (n *Nemesis) apply(e event, now time.Time) {
	n.stats.Events++
	c := n.pick(e.pick)
	if c == nil {
		n.stats.Skipped++
		n.logf(now, "%v: no open connection", e.kind)
		return
	}
	var err error
	switch e.kind {
	case faultCut:
		if err = c.Cut(); err == nil {
			n.stats.Cuts++
			n.logf(now, "cut %v", c)
		}
	case faultBlackhole:
		if err = c.Blackhole(); err == nil {
			n.stats.Blackholes++
			n.schedule(c, now.Add(e.lasts))
			n.logf(now, "blackhole %v for %v", c, e.lasts)
		}
	case faultDelay:
		if err = c.SetDelay(e.dir, Fixed(e.latency)); err == nil {
			n.stats.Delays++
			n.schedule(c, now.Add(e.lasts))
			n.logf(now, "delay %v %v by %v for %v", c, e.dir, e.latency, e.lasts)
		}
	}
	if err != nil {
		n.logf(now, "%v %v: %v", e.kind, c, err)
	}
}

// pick returns the open connection at position pick mod their number,
// over all proxies in order, each oldest first; nil if none is open.
func (n *Nemesis) pick(pick uint64) *Conn {
	var all []*Conn
	for _, p := range n.proxies {
		all = append(all, p.Conns()...)
	}
	if len(all) == 0 {
		return nil
	}
	return all[pick%uint64(len(all))]
}

// schedule makes at c's heal time, replacing any earlier one.
func (n *Nemesis) schedule(c *Conn, at time.Time) {
	n.latest[c] = at
	heap.Push(&n.heals, heal{c: c, at: at})
}

// healDue heals the connections whose latest heal time has come.
func (n *Nemesis) healDue(now time.Time) {
	for len(n.heals) > 0 && !n.heals[0].at.After(now) {
		h := heap.Pop(&n.heals).(heal)
		if n.latest[h.c].Equal(h.at) {
			n.heal(h.c, now)
		}
	}
}

// healAll heals every connection the nemesis left faulty.
func (n *Nemesis) healAll() {
	now := time.Now()
	left := slices.SortedFunc(maps.Keys(n.latest), func(a, b *Conn) int {
		return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.p.target, b.p.target))
	})
	for _, c := range left {
		n.heal(c, now)
	}
	n.heals = nil
	n.logf(now, "stopped: %+v", n.stats)
}

// heal resumes c and removes its delays, unless it has closed meanwhile.
func (n *Nemesis) heal(c *Conn, now time.Time) {
	delete(n.latest, c)
	if c.Resume() != nil || c.SetDelay(BothWays, Delay{}) != nil {
		return
	}
	n.logf(now, "heal %v", c)
}

func (n *Nemesis) logf(now time.Time, format string, args ...any) {
	n.opts.Logf("nemesis +%v: "+format, append([]any{now.Sub(n.start).Round(time.Millisecond)}, args...)...)
}

// heal is a connection's scheduled end of a blackhole or delay.
type heal struct {
	c  *Conn
	at time.Time
}

// healQueue is a min-heap of heals by time.
type healQueue []heal

func (q healQueue) Len() int           { return len(q) }
func (q healQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q healQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *healQueue) Push(x any)        { *q = append(*q, x.(heal)) }
func (q *healQueue) Pop() any {
	old := *q
	h := old[len(old)-1]
	*q = old[:len(old)-1]
	return h
}
