package faultproxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"
)

// dialTimeout bounds the dial to the target; Close aborts it sooner.
const dialTimeout = 5 * time.Second

var (
	// ErrPassThrough: the fault needs HTTP/2 frame parsing, and the proxy
	// passes the server's bytes through unparsed (Options.PassThrough).
	ErrPassThrough = errors.New("faultproxy: dropping a response needs HTTP/2 frames, and this proxy passes bytes through unparsed")
	// ErrConnClosed: the connection acted on is already closed.
	ErrConnClosed = errors.New("faultproxy: connection closed")
	// ErrInvalidArgument: a Delay, Direction or option is out of range.
	// Nothing was changed.
	ErrInvalidArgument = errors.New("faultproxy: invalid argument")
)

// Options configures a Proxy. The zero value parses h2c and seeds random
// delays with 0.
type Options struct {
	// PassThrough forwards the server's bytes unparsed, as the client's
	// always are: for TLS, or anything that is not HTTP/2 in the clear.
	// Faults that need frames (DropNextResponse) then fail with
	// ErrPassThrough; every other fault works.
	PassThrough bool
	// Seed seeds the generator that random delays (Uniform) are drawn
	// from.
	Seed uint64
}

// Proxy forwards each TCP connection accepted on Addr to a target and
// injects faults into them on request. See the package documentation for
// what it guarantees.
//
// Every method is safe for concurrent use. mu guards the fault settings,
// the set of live connections and every connection's own fault settings;
// it is never held across I/O that can block.
type Proxy struct {
	target      string
	passThrough bool
	ln          net.Listener
	ctx         context.Context // canceled by Close: aborts dials in flight
	cancel      context.CancelFunc
	wg          sync.WaitGroup // the accept loop and every connection's serve

	mu struct {
		sync.Mutex
		closed bool
		refuse bool
		// blackhole holds every connection, as Conn.Blackhole holds one.
		blackhole bool
		// epoch counts Cuts. A connection accepted in an earlier epoch is
		// closed, not tracked, when its dial completes: the Cut came while
		// it was dialing and could not see it.
		epoch uint64
		armed bool // Invariant: cleared by the frame it drops.
		// refuseOnDrop: the frame armed drops also sets refuse.
		refuseOnDrop bool
		dropped      int
		delay        [2]Delay // added on every connection, per direction (dirs)
		rng          *rand.Rand
		nextID       uint64
		conns        map[*Conn]struct{} // Invariant: the connections whose serve has not returned.
		// changed is closed, and replaced, when a connection is tracked
		// or a blackhole is set or lifted: waiters re-check their state.
		changed chan struct{}
	}
}

// New listens on 127.0.0.1 at a free port and forwards every connection
// accepted there to target (host:port), parsing the server's bytes as
// h2c.
func New(target string) (*Proxy, error) {
	return NewWithOptions(target, Options{})
}

// NewWithOptions is New with options.
func NewWithOptions(target string, opts Options) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{target: target, passThrough: opts.PassThrough, ln: ln}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.mu.conns = make(map[*Conn]struct{})
	p.mu.rng = rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	p.mu.changed = make(chan struct{})
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the address clients dial (127.0.0.1:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Close closes the listener and every connection, and returns once every
// goroutine the proxy started has ended. Later calls return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	first := !p.mu.closed
	p.mu.closed = true
	p.cutLocked()
	p.mu.Unlock()
	var err error
	if first {
		p.cancel()
		err = p.ln.Close()
	}
	p.wg.Wait()
	return err
}

// DropNextResponse arms the proxy: the next HEADERS or DATA frame the
// server sends on a non-zero stream, on any connection, is dropped with
// everything after it and that connection is closed on both sides. Arming
// an armed proxy still drops one response. It fails with ErrPassThrough,
// changing nothing, if the proxy does not parse frames.
func (p *Proxy) DropNextResponse() error {
	return p.arm(false)
}

// DropNextResponseThenRefuse arms the proxy as DropNextResponse does, and
// the drop also sets refuse (SetRefuse(true)) in the same step: no retry of
// the lost call can reach the target until SetRefuse(false), so a test can
// act in between (restart the server, write through another client).
func (p *Proxy) DropNextResponseThenRefuse() error {
	return p.arm(true)
}

func (p *Proxy) arm(refuse bool) error {
	if p.passThrough {
		return ErrPassThrough
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.armed, p.mu.refuseOnDrop = true, refuse
	return nil
}

// Dropped returns how many responses the proxy has dropped, whether armed
// on the proxy or on one connection.
func (p *Proxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.dropped
}

// Cut closes on both sides every connection the proxy has accepted,
// including one still dialing the target, as a network failure would.
// Connections accepted later are proxied as before.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutLocked()
}

func (p *Proxy) cutLocked() {
	p.mu.epoch++
	for c := range p.mu.conns {
		c.close()
	}
}

// SetRefuse sets whether connections accepted from now on are closed at
// once, without dialing the target (the server is down). Connections
// accepted before are left as they are.
func (p *Proxy) SetRefuse(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.refuse = refuse
}

// SetBlackhole sets whether the proxy holds every connection, current and
// future, as Conn.Blackhole holds one: a partition between the clients and
// the server in which TCP stays open. Lifting it releases only what it
// held; a connection blackholed on its own stays so.
func (p *Proxy) SetBlackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.blackhole = on
	p.broadcastLocked()
}

// SetDelay sets the latency added to every chunk in direction dir (one of
// them or BothWays) on every connection, current and future, on top of
// the connection's own (Conn.SetDelay). It applies to chunks read from
// now on. Delay{} removes it.
func (p *Proxy) SetDelay(dir Direction, d Delay) error {
	if err := errors.Join(dir.validate(), d.validate()); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	setDelay(&p.mu.delay, dir, d)
	return nil
}

func setDelay(a *[2]Delay, dir Direction, d Delay) {
	for i, one := range dirs {
		if dir&one != 0 {
			a[i] = d
		}
	}
}

// Conns returns the open connections, oldest first (by ID). A connection
// is listed once its dial to the target has succeeded, until it is closed.
func (p *Proxy) Conns() []*Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.connsLocked()
}

func (p *Proxy) connsLocked() []*Conn {
	conns := make([]*Conn, 0, len(p.mu.conns))
	for c := range p.mu.conns {
		if !c.isClosed() {
			conns = append(conns, c)
		}
	}
	slices.SortFunc(conns, func(a, b *Conn) int { return cmp.Compare(a.id, b.id) })
	return conns
}

// RandomConn returns one of Conns picked with rng, or nil if there is
// none. With the same rng state and the same open connections, it picks
// the same one.
func (p *Proxy) RandomConn(rng *rand.Rand) *Conn {
	conns := p.Conns()
	if len(conns) == 0 {
		return nil
	}
	return conns[rng.IntN(len(conns))]
}

// WaitConns waits until at least n connections are open and returns them
// (as Conns), or returns ctx's error.
func (p *Proxy) WaitConns(ctx context.Context, n int) ([]*Conn, error) {
	for {
		p.mu.Lock()
		conns, changed := p.connsLocked(), p.mu.changed
		p.mu.Unlock()
		if len(conns) >= n {
			return conns, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("faultproxy: waiting for %d connections, %d open: %w", n, len(conns), ctx.Err())
		}
	}
}

// broadcastLocked wakes everyone waiting on changed.
func (p *Proxy) broadcastLocked() {
	close(p.mu.changed)
	p.mu.changed = make(chan struct{})
}

// takeArm reports whether c or else the proxy is armed, and disarms it,
// counts a drop and, if so armed, refuses new connections. The caller
// must then drop the frame.
func (p *Proxy) takeArm(c *Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case c.state.armed:
		c.state.armed = false
	case p.mu.armed:
		p.mu.armed = false
		if p.mu.refuseOnDrop {
			p.mu.refuse = true
		}
	default:
		return false
	}
	p.mu.dropped++
	return true
}

// admit decides whether to proxy a connection just accepted, and returns
// the epoch it was accepted in and its ID.
func (p *Proxy) admit() (epoch, id uint64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed || p.mu.refuse {
		return 0, 0, false
	}
	p.mu.nextID++
	return p.mu.epoch, p.mu.nextID, true
}

// track adds c to the live connections, unless the proxy was closed or
// cut since c was accepted in epoch.
func (p *Proxy) track(c *Conn, epoch uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed || p.mu.epoch != epoch {
		return false
	}
	p.mu.conns[c] = struct{}{}
	p.broadcastLocked()
	return true
}

func (p *Proxy) untrack(c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.mu.conns, c)
}

// acceptLoop runs until Close closes the listener.
func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		epoch, id, ok := p.admit()
		if !ok {
			client.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(client, epoch, id)
	}
}

// serve proxies a connection accepted in epoch until both directions end.
func (p *Proxy) serve(client net.Conn, epoch, id uint64) {
	defer p.wg.Done()
	c := p.connect(client, epoch, id)
	if c == nil {
		return
	}
	defer p.untrack(c)
	c.run()
}

// connect dials the target for client and tracks the connection; it
// returns nil, having closed client, if the dial fails or the proxy was
// closed or cut meanwhile.
func (p *Proxy) connect(client net.Conn, epoch, id uint64) *Conn {
	d := net.Dialer{Timeout: dialTimeout}
	server, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		client.Close()
		return nil
	}
	c := newConn(p, id, client, server)
	if !p.track(c, epoch) {
		c.close()
		return nil
	}
	return c
}
