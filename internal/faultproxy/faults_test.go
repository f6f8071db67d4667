package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"
)

// quiet is how long a test watches a held connection for bytes that must
// not come. It only bounds how hard the test looks: a slow machine makes
// the check weaker, never wrong.
const quiet = 150 * time.Millisecond

// waitConns waits for n open connections on p.
func waitConns(t *testing.T, p *Proxy, n int) []*Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), ioTimeout)
	defer cancel()
	conns, err := p.WaitConns(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	return conns
}

// expectNothing checks that nothing arrives on c for a while and that c
// stays open, then restores the test's deadline.
func expectNothing(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(quiet))
	n, err := c.Read(make([]byte, 1))
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a held connection: n=%d err=%v; want nothing until the deadline", n, err)
	}
	c.SetReadDeadline(time.Now().Add(ioTimeout))
}

func expectBytes(t *testing.T, c net.Conn, want []byte) {
	t.Helper()
	if got := readN(t, c, len(want)); !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes that differ from the %d expected", len(got), len(want))
	}
}

func expectErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
}

// Conns lists open connections oldest first, with the client's address;
// a connection cut alone leaves the others working, and its handle then
// refuses faults.
func TestConnsListsAndCutsOne(t *testing.T) {
	r := newRawTarget(t)
	c1, s1 := r.connect(t)
	c2, s2 := r.connect(t)
	conns := waitConns(t, r.proxy, 2)
	if len(conns) != 2 || conns[0].ID() != 1 || conns[1].ID() != 2 {
		t.Fatalf("Conns() = %v, want IDs 1 and 2", conns)
	}
	if got, want := conns[0].ClientAddr(), c1.LocalAddr().String(); got != want {
		t.Fatalf("ClientAddr() = %s, want %s", got, want)
	}
	if err := conns[0].Cut(); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c1)
	expectClosed(t, s1)
	wait(t, conns[0].Done(), "the cut connection is done")
	if left := r.proxy.Conns(); len(left) != 1 || left[0] != conns[1] {
		t.Fatalf("after cutting conn 1: Conns() = %v", left)
	}
	f := frame(frameData, 0, 1, 3)
	s2.Write(f)
	expectBytes(t, c2, f)
	c2.Write([]byte("up"))
	expectBytes(t, s2, []byte("up"))

	for name, err := range map[string]error{
		"Cut":              conns[0].Cut(),
		"Blackhole":        conns[0].Blackhole(),
		"Resume":           conns[0].Resume(),
		"SetDelay":         conns[0].SetDelay(BothWays, Fixed(time.Second)),
		"DropNextResponse": conns[0].DropNextResponse(),
	} {
		if !errors.Is(err, ErrConnClosed) {
			t.Errorf("%s on a closed connection: %v, want ErrConnClosed", name, err)
		}
	}
}

// A blackholed connection forwards nothing either way, ends included,
// and closes nothing; Resume forwards what it held, in order.
func TestBlackholeHoldsBothWaysThenResumes(t *testing.T) {
	r := newRawTarget(t)
	client, server := r.connect(t)
	c := waitConns(t, r.proxy, 1)[0]
	if err := c.Blackhole(); err != nil {
		t.Fatal(err)
	}
	if !c.Blackholed() {
		t.Fatal("Blackholed() = false after Blackhole")
	}
	up := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	down := append(frame(frameSettings, 0, 0, 6), frame(frameHeaders, flagEndHeaders, 1, 40)...)
	client.Write(up)
	client.(*net.TCPConn).CloseWrite()
	writeInPieces(t, server, down)
	expectNothing(t, server)
	expectNothing(t, client)

	if err := c.Resume(); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(server); err != nil || !bytes.Equal(got, up) {
		t.Fatalf("server got %q, err %v after Resume; want %q, then EOF", got, err, up)
	}
	expectBytes(t, client, down)
	if c.Blackholed() {
		t.Fatal("Blackholed() = true after Resume")
	}
}

// SetBlackhole holds every connection, new ones included; lifting it
// releases those, but not one blackholed on its own.
func TestProxyBlackholeHoldsNewConnections(t *testing.T) {
	r := newRawTarget(t)
	alone, aloneServer := r.connect(t)
	c := waitConns(t, r.proxy, 1)[0]
	c.Blackhole()
	r.proxy.SetBlackhole(true)
	client, server := r.connect(t)
	f := frame(frameData, 0, 1, 5)
	server.Write(f)
	aloneServer.Write(f)
	expectNothing(t, client)

	r.proxy.SetBlackhole(false)
	expectBytes(t, client, f)
	expectNothing(t, alone)
	c.Resume()
	expectBytes(t, alone, f)
}

// Frames arrive whole and in order through random per-frame latencies,
// and none before its latency's lower bound; the other direction and a
// half-close keep their order too.
func TestDelayKeepsOrderAndLatency(t *testing.T) {
	r := newRawTarget(t)
	client, server := r.connect(t)
	c := waitConns(t, r.proxy, 1)[0]
	const lo, hi = 20 * time.Millisecond, 60 * time.Millisecond
	if err := c.SetDelay(ToClient, Uniform(lo, hi)); err != nil {
		t.Fatal(err)
	}
	if err := r.proxy.SetDelay(ToServer, Fixed(lo)); err != nil {
		t.Fatal(err)
	}
	var down []byte
	for i := range 200 { // each frame is a chunk with its own latency
		down = append(down, frame(frameData, 0, 1, i%37)...)
	}
	start := time.Now()
	server.Write(down)
	server.(*net.TCPConn).CloseWrite()
	expectBytes(t, client, down[:frameHeaderLen])
	if el := time.Since(start); el < lo {
		t.Fatalf("the first frame arrived after %v, before the least latency %v", el, lo)
	}
	if rest, err := io.ReadAll(client); err != nil || !bytes.Equal(rest, down[frameHeaderLen:]) {
		t.Fatalf("client got %d bytes (err %v) that differ from the %d sent", len(rest), err, len(down)-frameHeaderLen)
	}

	var up []byte
	start = time.Now()
	for i := range 50 {
		b := bytes.Repeat([]byte{byte(i)}, 1+i)
		up = append(up, b...)
		client.Write(b)
	}
	client.(*net.TCPConn).CloseWrite()
	expectBytes(t, server, up[:1])
	if el := time.Since(start); el < lo {
		t.Fatalf("the first byte arrived after %v, before the latency %v", el, lo)
	}
	if rest, err := io.ReadAll(server); err != nil || !bytes.Equal(rest, up[1:]) {
		t.Fatalf("server got %d bytes (err %v) that differ from the %d sent", len(rest), err, len(up)-1)
	}
}

// A connection's arming drops its own next response only, before the
// proxy's arming, which then takes the next response anywhere.
func TestConnDropNextResponse(t *testing.T) {
	r := newRawTarget(t)
	c1, s1 := r.connect(t)
	c2, s2 := r.connect(t)
	conns := waitConns(t, r.proxy, 2)
	if err := conns[0].DropNextResponse(); err != nil {
		t.Fatal(err)
	}
	resp := frame(frameHeaders, flagEndHeaders, 1, 8)
	s2.Write(resp)
	expectBytes(t, c2, resp)
	settings := frame(frameSettings, 0, 0, 6)
	s1.Write(append(settings, resp...))
	if got, err := io.ReadAll(c1); err != nil || !bytes.Equal(got, settings) {
		t.Fatalf("conn 1 got %x, err %v; want the SETTINGS frame, then EOF", got, err)
	}
	expectClosed(t, s1)
	// The server's side reads EOF once the proxy closed it, a moment
	// before the connection counts as closed (Done): until then Conns
	// still lists it.
	select {
	case <-conns[0].Done():
	case <-time.After(ioTimeout):
		t.Fatal("connection 1 closed on both sides but not Done")
	}

	c3, s3 := r.connect(t)
	c4 := waitConns(t, r.proxy, 2)[1]
	if c4.ID() != 3 {
		t.Fatalf("the new connection has ID %d, want 3", c4.ID())
	}
	c4.DropNextResponse()
	r.proxy.DropNextResponse()
	s3.Write(resp)
	expectClosed(t, c3) // the connection's own arming
	s2.Write(resp)
	expectClosed(t, c2) // the proxy's
	if n := r.proxy.Dropped(); n != 3 {
		t.Fatalf("Dropped() = %d, want 3", n)
	}
}

// Pass-through forwards bytes that are no HTTP/2 (here a frame header
// announcing 16 MiB that never come), half-closes and cuts; drops need
// frames and are refused.
func TestPassThrough(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := newProxyWith(t, ln.Addr().String(), Options{PassThrough: true})
	r := &rawTarget{ln: ln.(*net.TCPListener), proxy: p}
	client, server := r.connect(t)
	c := waitConns(t, p, 1)[0]
	expectErr(t, p.DropNextResponse(), ErrPassThrough)
	expectErr(t, p.DropNextResponseThenRefuse(), ErrPassThrough)
	expectErr(t, c.DropNextResponse(), ErrPassThrough)

	garbage := []byte{0xff, 0xff, 0xff, frameHeaders, 0, 0, 0, 0, 1, 'x'}
	server.Write(garbage)
	expectBytes(t, client, garbage)
	client.Write([]byte("hello"))
	expectBytes(t, server, []byte("hello"))
	server.(*net.TCPConn).CloseWrite()
	if rest, err := io.ReadAll(client); err != nil || len(rest) != 0 {
		t.Fatalf("after the server's half-close: %x, %v; want EOF", rest, err)
	}
	if p.Dropped() != 0 {
		t.Fatalf("Dropped() = %d, want 0", p.Dropped())
	}

	c.Blackhole()
	client.Write([]byte("held"))
	expectNothing(t, server)
	c.Resume()
	expectBytes(t, server, []byte("held"))
	c.Cut()
	expectClosed(t, client)
	expectClosed(t, server)
}

// Bad arguments fail with ErrInvalidArgument and change nothing.
func TestInvalidArguments(t *testing.T) {
	r := newRawTarget(t)
	r.connect(t)
	c := waitConns(t, r.proxy, 1)[0]
	good := Fixed(time.Millisecond)
	r.proxy.SetDelay(BothWays, good)
	c.SetDelay(BothWays, good)
	for _, bad := range []struct {
		dir Direction
		d   Delay
	}{
		{0, good},
		{BothWays + 1, good},
		{ToServer, Delay{Min: -1}},
		{ToClient, Delay{Min: 2, Max: 1}},
		{ToClient, Delay{Max: -1}},
	} {
		expectErr(t, r.proxy.SetDelay(bad.dir, bad.d), ErrInvalidArgument)
		expectErr(t, c.SetDelay(bad.dir, bad.d), ErrInvalidArgument)
	}
	r.proxy.mu.Lock()
	defer r.proxy.mu.Unlock()
	if want := [2]Delay{good, good}; r.proxy.mu.delay != want || c.state.delay != want {
		t.Fatalf("after rejected calls: proxy delay %v, connection delay %v; want %v", r.proxy.mu.delay, c.state.delay, want)
	}
}

func TestWaitConnsHonoursContext(t *testing.T) {
	r := newRawTarget(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.proxy.WaitConns(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitConns with a canceled context: %v", err)
	}
}

// RandomConn picks by the generator's state among the open connections,
// oldest first.
func TestRandomConnIsSeeded(t *testing.T) {
	r := newRawTarget(t)
	if c := r.proxy.RandomConn(rand.New(rand.NewPCG(1, 1))); c != nil {
		t.Fatalf("RandomConn with no connection = %v", c)
	}
	for range 4 {
		r.connect(t)
	}
	conns := waitConns(t, r.proxy, 4)
	a, b := rand.New(rand.NewPCG(7, 7)), rand.New(rand.NewPCG(7, 7))
	seen := map[uint64]bool{}
	for range 40 {
		c := r.proxy.RandomConn(a)
		if want := conns[b.IntN(len(conns))]; c != want {
			t.Fatalf("RandomConn picked %v, want %v", c, want)
		}
		seen[c.ID()] = true
	}
	if len(seen) != 4 {
		t.Fatalf("40 picks hit only connections %v", seen)
	}
}

// Close ends connections that hold bytes (blackholed, delayed, waiting on
// a half-read frame) and every goroutine; the leak check must see the
// proxy's goroutines while it runs, or it could not fail.
func TestCloseEndsHeldConnections(t *testing.T) {
	r := newRawTarget(t)
	c1, s1 := r.connect(t)
	c2, s2 := r.connect(t)
	_, s3 := r.connect(t)
	conns := waitConns(t, r.proxy, 3)
	conns[0].Blackhole()
	conns[1].SetDelay(BothWays, Fixed(time.Hour))
	f := frame(frameData, 0, 1, 10)
	s1.Write(f)
	c1.Write(f)
	s2.Write(f)
	c2.Write(f)
	s3.Write(f[:5])
	if len(proxyGoroutines()) == 0 {
		t.Fatal("no proxy goroutine found while the proxy runs: the leak check cannot see them")
	}
	if err := r.proxy.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoProxyGoroutines(t)
	for _, c := range []net.Conn{c1, s1, c2, s2, s3} {
		expectClosed(t, c)
	}
}
