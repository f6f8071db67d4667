package faultproxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
)

// Conn is one proxied connection: the client's, and the proxy's to the
// target. A test gets it from Proxy.Conns, RandomConn or WaitConns and
// injects faults into it alone. Every method is safe for concurrent use;
// one that changes a fault fails with ErrConnClosed, changing nothing,
// once the connection is closed.
type Conn struct {
	p              *Proxy
	id             uint64
	client, server net.Conn
	closeOnce      sync.Once
	done           chan struct{} // closed by close

	// state is guarded by p.mu (one lock for the proxy and its
	// connections: a frame's drop decision reads both).
	state struct {
		armed      bool // Invariant: cleared by the frame it drops.
		blackholed bool
		delay      [2]Delay // per direction (dirs), on top of the proxy's
	}
}

func newConn(p *Proxy, id uint64, client, server net.Conn) *Conn {
	return &Conn{p: p, id: id, client: client, server: server, done: make(chan struct{})}
}

// ID numbers the connections of a proxy in the order it accepted them,
// from 1.
func (c *Conn) ID() uint64 { return c.id }

// ClientAddr is the client's address (its end of the connection it
// dialed to the proxy), to tell which client a connection belongs to.
func (c *Conn) ClientAddr() string { return c.client.RemoteAddr().String() }

// String names the connection for logs: its ID, client and target.
func (c *Conn) String() string {
	return fmt.Sprintf("conn %d (%s -> %s)", c.id, c.ClientAddr(), c.p.target)
}

// Done is closed once the proxy has closed both sides of the connection,
// for whatever reason (a fault, either side's close or error, Close).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Cut closes both sides of the connection at once, as a network failure
// would; bytes the proxy holds for it (delayed or blackholed) are lost.
func (c *Conn) Cut() error {
	if c.isClosed() {
		return ErrConnClosed
	}
	c.close()
	return nil
}

// Blackhole stops forwarding in both directions without closing either
// side: a partition in which TCP stays open, so only keepalives and
// deadlines notice. Bytes are held, not lost: Resume forwards them in
// order. Blackholing a blackholed connection changes nothing.
func (c *Conn) Blackhole() error { return c.setBlackhole(true) }

// Resume undoes Blackhole: the held bytes go on, in order. It does not
// lift the proxy's own blackhole (Proxy.SetBlackhole).
func (c *Conn) Resume() error { return c.setBlackhole(false) }

func (c *Conn) setBlackhole(on bool) error {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if c.isClosed() {
		return ErrConnClosed
	}
	c.state.blackholed = on
	c.p.broadcastLocked()
	return nil
}

// Blackholed reports whether the connection is blackholed on its own
// (Blackhole) or with the whole proxy (Proxy.SetBlackhole).
func (c *Conn) Blackholed() bool {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	return c.heldLocked()
}

func (c *Conn) heldLocked() bool { return c.state.blackholed || c.p.mu.blackhole }

// SetDelay sets the latency added to every chunk in direction dir on this
// connection, on top of the proxy's (Proxy.SetDelay), for chunks read from
// now on. Delay{} removes it.
func (c *Conn) SetDelay(dir Direction, d Delay) error {
	if err := errors.Join(dir.validate(), d.validate()); err != nil {
		return err
	}
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if c.isClosed() {
		return ErrConnClosed
	}
	setDelay(&c.state.delay, dir, d)
	return nil
}

// DropNextResponse arms this connection: the next HEADERS or DATA frame
// the server sends on it on a non-zero stream is dropped with everything
// after it, and the connection is closed on both sides. It is taken
// before an arming of the whole proxy, which then waits for the next
// response. It fails with ErrPassThrough if the proxy does not parse
// frames.
func (c *Conn) DropNextResponse() error {
	if c.p.passThrough {
		return ErrPassThrough
	}
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if c.isClosed() {
		return ErrConnClosed
	}
	c.state.armed = true
	return nil
}

// close closes both sides; the pumps then fail and end. Closing twice is
// harmless.
func (c *Conn) close() {
	c.closeOnce.Do(func() {
		c.client.Close()
		c.server.Close()
		close(c.done)
	})
}

func (c *Conn) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}
