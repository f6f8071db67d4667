package faultproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the dial to the target; Close aborts it sooner.
const dialTimeout = 5 * time.Second

// readBufSize is the server→client read buffer. It only saves reads: a
// frame is forwarded as soon as it is whole, whatever follows it.
const readBufSize = 64 << 10

// Proxy forwards each TCP connection accepted on Addr to a target and
// injects faults into them on request. See the package documentation for
// what it guarantees.
//
// Every method is safe for concurrent use. mu guards the fault settings
// and the set of live links; it is never held across I/O that can block.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // canceled by Close: aborts dials in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and both pumps of every link

	mu struct {
		sync.Mutex
		closed bool
		refuse bool
		// epoch counts Cuts. A connection accepted in an earlier epoch is
		// closed, not tracked, when its dial completes: the Cut came while
		// it was dialing and could not see it.
		epoch uint64
		armed bool // Invariant: cleared by the frame it drops.
		// refuseOnDrop: the frame armed drops also sets refuse.
		refuseOnDrop bool
		dropped      int
		links        map[*link]struct{} // Invariant: the links whose serve has not returned.
	}
}

// link is one proxied connection: the client's and the proxy's to the
// target.
type link struct {
	client, server net.Conn
}

// close closes both sides; the pumps then fail and end. Closing twice is
// harmless.
func (l *link) close() {
	l.client.Close()
	l.server.Close()
}

// New listens on 127.0.0.1 at a free port and forwards every connection
// accepted there to target (host:port).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{target: target, ln: ln}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.mu.links = make(map[*link]struct{})
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the address clients dial (127.0.0.1:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

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
// an armed proxy still drops one response.
func (p *Proxy) DropNextResponse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.armed, p.mu.refuseOnDrop = true, false
}

// DropNextResponseThenRefuse arms the proxy as DropNextResponse does, and
// the drop also sets refuse (SetRefuse(true)) in the same step: no retry of
// the lost call can reach the target until SetRefuse(false), so a test can
// act in between (restart the server, write through another client).
func (p *Proxy) DropNextResponseThenRefuse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.armed, p.mu.refuseOnDrop = true, true
}

// Dropped returns how many responses the proxy has dropped.
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
	for l := range p.mu.links {
		l.close()
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

// takeArm reports whether the proxy is armed, and disarms it, counts a
// drop and, if so armed, refuses new connections if it was. The caller
// must then drop the frame.
func (p *Proxy) takeArm() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mu.armed {
		return false
	}
	p.mu.armed = false
	p.mu.dropped++
	if p.mu.refuseOnDrop {
		p.mu.refuse = true
	}
	return true
}

// admit decides whether to proxy a connection just accepted, and returns
// the epoch it was accepted in.
func (p *Proxy) admit() (epoch uint64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.epoch, !p.mu.closed && !p.mu.refuse
}

// track adds l to the live links, unless the proxy was closed or cut since
// l was accepted in epoch.
func (p *Proxy) track(l *link, epoch uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed || p.mu.epoch != epoch {
		return false
	}
	p.mu.links[l] = struct{}{}
	return true
}

func (p *Proxy) untrack(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.mu.links, l)
}

// acceptLoop runs until Close closes the listener.
func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		epoch, ok := p.admit()
		if !ok {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c, epoch)
	}
}

// serve proxies a connection accepted in epoch until both directions end.
func (p *Proxy) serve(client net.Conn, epoch uint64) {
	defer p.wg.Done()
	l := p.connect(client, epoch)
	if l == nil {
		return
	}
	defer p.untrack(l)
	up := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(up)
		pumpUp(l)
	}()
	p.pumpDown(l)
	<-up
	l.close()
}

// connect dials the target for client and tracks the link; it returns nil,
// having closed client, if the dial fails or the proxy was closed or cut
// meanwhile.
func (p *Proxy) connect(client net.Conn, epoch uint64) *link {
	d := net.Dialer{Timeout: dialTimeout}
	server, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		client.Close()
		return nil
	}
	l := &link{client: client, server: server}
	if !p.track(l, epoch) {
		l.close()
		return nil
	}
	return l
}

// pumpUp copies client→server bytes unparsed.
func pumpUp(l *link) {
	if _, err := io.Copy(l.server, l.client); err != nil {
		l.close()
		return
	}
	closeWrite(l.server)
}

// pumpDown forwards server→client frame by frame, each in one write as
// soon as it is whole, and drops the first response frame it reads while
// the proxy is armed.
func (p *Proxy) pumpDown(l *link) {
	r := bufio.NewReaderSize(l.server, readBufSize)
	var buf []byte
	for {
		var h frameHeader
		var err error
		buf, h, err = readFrame(r, buf)
		switch {
		case err == io.EOF:
			closeWrite(l.client)
			return
		case err != nil, h.isResponse() && p.takeArm():
			l.close()
			return
		}
		if _, err := l.client.Write(buf); err != nil {
			l.close()
			return
		}
	}
}

// closeWrite passes a clean end of stream on to c, keeping the reverse
// direction open.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}
