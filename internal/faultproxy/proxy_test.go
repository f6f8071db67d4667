package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// ioTimeout bounds every blocking step of a test, so a bug fails the test
// instead of hanging it. No test waits for it to pass.
const ioTimeout = 5 * time.Second

// HTTP/2 frame types and flags used by the tests, beyond DATA and HEADERS.
const (
	framePriority     = 0x2
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePing         = 0x6
	frameWindowUpdate = 0x8

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
)

// newProxy starts a proxy to target; cleanup closes it and checks that no
// goroutine of it is left.
func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	return newProxyWith(t, target, Options{})
}

// newProxyWith is newProxy with options.
func newProxyWith(t *testing.T, target string, opts Options) *Proxy {
	t.Helper()
	p, err := NewWithOptions(target, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		checkNoProxyGoroutines(t)
	})
	return p
}

// checkNoProxyGoroutines fails t if a goroutine is running proxy code
// (the proxy's or a nemesis's).
// Tests do not run in parallel, so any such goroutine belongs to a proxy
// that was closed. A goroutine that has run its deferred wg.Done may not
// have exited yet when Close returns, so the check looks again for a
// while before it fails (as go.uber.org/goleak does).
func checkNoProxyGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for delay := time.Microsecond; ; delay *= 2 {
		left := proxyGoroutines()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutines left after Close:\n%s", strings.Join(left, "\n\n"))
			return
		}
		time.Sleep(delay)
	}
}

// proxyGoroutines returns the stacks of the goroutines running proxy code.
func proxyGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var left []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if proxyFrame.MatchString(g) {
			left = append(left, g)
		}
	}
	return left
}

// proxyFrame matches a stack frame in the package's own code, not its
// tests: any goroutine the proxy or a nemesis started runs through one.
var proxyFrame = regexp.MustCompile(`/internal/faultproxy/[a-z]+\.go:\d+`)

// rawTarget is a plain TCP server behind a proxy; the test plays the HTTP/2
// server by hand on the connections it accepts.
type rawTarget struct {
	ln    *net.TCPListener
	proxy *Proxy
}

func newRawTarget(t *testing.T) *rawTarget {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &rawTarget{ln: ln.(*net.TCPListener), proxy: newProxy(t, ln.Addr().String())}
}

// connect dials through the proxy and returns the client's connection and
// the server's end of the proxy's connection to the target.
func (r *rawTarget) connect(t *testing.T) (client, server net.Conn) {
	t.Helper()
	client, err := net.Dial("tcp", r.proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	r.ln.SetDeadline(time.Now().Add(ioTimeout))
	server, err = r.ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	client.SetDeadline(time.Now().Add(ioTimeout))
	server.SetDeadline(time.Now().Add(ioTimeout))
	return client, server
}

// frame returns an HTTP/2 frame with a payload of n patterned bytes.
// stream may carry the reserved bit.
func frame(typ, flags uint8, stream uint32, n int) []byte {
	b := []byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags,
		byte(stream >> 24), byte(stream >> 16), byte(stream >> 8), byte(stream)}
	for i := range n {
		b = append(b, byte(i*7+int(typ)))
	}
	return b
}

// writeInPieces writes b in pieces of growing size, so the proxy sees a
// frame arrive over several reads.
func writeInPieces(t *testing.T, w io.Writer, b []byte) {
	t.Helper()
	for size := 1; len(b) > 0; size *= 3 {
		n := min(size, len(b))
		if _, err := w.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
}

// readN reads exactly n bytes from r.
func readN(t *testing.T, r io.Reader, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return b
}

// expectClosed checks that c is closed by its peer: a read ends in EOF or
// a reset, not a timeout, and with no data.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	n, err := c.Read(make([]byte, 1))
	if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a connection the proxy closed: n=%d err=%v", n, err)
	}
}

// The server sends each frame only once the client has the previous one,
// so the proxy cannot be waiting for more than one frame; the frames arrive
// at the proxy in pieces and must leave it whole and unchanged.
func TestForwardsEachFrameWholeAndPromptly(t *testing.T) {
	r := newRawTarget(t)
	client, server := r.connect(t)
	preface := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	writeInPieces(t, client, preface)
	if got := readN(t, server, len(preface)); !bytes.Equal(got, preface) {
		t.Fatalf("server got %q, want the preface unchanged", got)
	}
	frames := [][]byte{
		frame(frameSettings, 0, 0, 12),
		frame(frameHeaders, flagEndHeaders, 1, 10),
		frame(frameData, 0, 1, 0),
		frame(frameData, 0, 1, 3*readBufSize+5),
		frame(frameHeaders, flagEndHeaders|flagEndStream, 1, 7),
	}
	for i, f := range frames {
		writeInPieces(t, server, f)
		if got := readN(t, client, len(f)); !bytes.Equal(got, f) {
			t.Fatalf("frame %d: client got %d bytes that differ from the %d sent", i, len(got), len(f))
		}
	}
}

// Only HEADERS and DATA on a non-zero stream are a response; everything
// before the response reaches the client, nothing of it or after it does,
// and both sides are closed.
func TestDropSkipsControlFramesAndCutsAtResponse(t *testing.T) {
	r := newRawTarget(t)
	client, server := r.connect(t)
	r.proxy.DropNextResponse()
	control := bytes.Join([][]byte{
		frame(frameSettings, 0, 0, 6),
		frame(frameSettings, flagAck, 0, 0),
		frame(framePing, 0, 0, 8),
		frame(frameWindowUpdate, 0, 0, 4),
		frame(frameWindowUpdate, 0, 1, 4),
		frame(frameRSTStream, 0, 3, 4),
		frame(framePriority, 0, 1, 5),
		frame(frameHeaders, flagEndHeaders, 1<<31, 3), // reserved bit only: stream 0
	}, nil)
	writeInPieces(t, server, control)
	response := frame(frameHeaders, flagEndHeaders, 1<<31|5, 12)
	server.Write(response[:11]) // errors ignored from here on: the proxy closes
	server.Write(append(response[11:], frame(frameData, 0, 5, 10)...))

	got, err := io.ReadAll(client)
	if err != nil || !bytes.Equal(got, control) {
		t.Fatalf("client got %d bytes, err %v; want the %d bytes of control frames, then EOF", len(got), err, len(control))
	}
	expectClosed(t, server)
	if n := r.proxy.Dropped(); n != 1 {
		t.Fatalf("Dropped() = %d, want 1", n)
	}
}

// A DATA frame is a response too. One arming drops one response, however
// often it was armed: the next connection's response passes.
func TestDropIsOncePerArming(t *testing.T) {
	r := newRawTarget(t)
	r.proxy.DropNextResponse()
	r.proxy.DropNextResponse()
	client, server := r.connect(t)
	server.Write(frame(frameData, 0, 1, 4))
	expectClosed(t, client)

	client, server = r.connect(t)
	f := frame(frameHeaders, flagEndHeaders, 3, 4)
	server.Write(f)
	if got := readN(t, client, len(f)); !bytes.Equal(got, f) {
		t.Fatalf("second response: got %x, want %x", got, f)
	}
	if n := r.proxy.Dropped(); n != 1 {
		t.Fatalf("Dropped() = %d, want 1", n)
	}
}

// A frame the server's end of stream cuts short is not forwarded, and the
// broken stream closes both sides, not just one direction.
func TestTruncatedFrameIsNotForwarded(t *testing.T) {
	r := newRawTarget(t)
	f := frame(frameData, 0, 1, 20)
	for _, cut := range []int{4, frameHeaderLen, 15} {
		client, server := r.connect(t)
		server.Write(f[:cut])
		server.(*net.TCPConn).CloseWrite()
		if got, err := io.ReadAll(client); err != nil || len(got) != 0 {
			t.Fatalf("cut at %d: client got %x, err %v; want nothing, then EOF", cut, got, err)
		}
		expectClosed(t, server)
	}
}

// A clean end of one direction is passed on as a half-close; the other
// direction keeps working, whichever side ends first.
func TestHalfClosePassesThrough(t *testing.T) {
	r := newRawTarget(t)
	for _, serverFirst := range []bool{false, true} {
		client, server := r.connect(t)
		first, second := client.(*net.TCPConn), server.(*net.TCPConn)
		if serverFirst {
			first, second = second, first
		}
		sendAndEnd(t, first, second, frame(frameData, flagEndStream, 1, 9))
		sendAndEnd(t, second, first, frame(frameData, flagEndStream, 3, 5))
	}
}

// sendAndEnd writes f on from and half-closes it; to must read f, then EOF.
func sendAndEnd(t *testing.T, from, to *net.TCPConn, f []byte) {
	t.Helper()
	from.Write(f)
	from.CloseWrite()
	if got, err := io.ReadAll(to); err != nil || !bytes.Equal(got, f) {
		t.Fatalf("%v got %x, err %v; want %x, then EOF", to.LocalAddr(), got, err, f)
	}
}

func TestCutClosesEveryConnection(t *testing.T) {
	r := newRawTarget(t)
	c1, s1 := r.connect(t)
	c2, s2 := r.connect(t)
	r.proxy.Cut()
	for _, c := range []net.Conn{c1, s1, c2, s2} {
		expectClosed(t, c)
	}
	client, server := r.connect(t)
	f := frame(frameData, 0, 1, 3)
	server.Write(f)
	if got := readN(t, client, len(f)); !bytes.Equal(got, f) {
		t.Fatalf("after Cut: got %x, want %x", got, f)
	}
}

func TestRefuseClosesNewConnections(t *testing.T) {
	r := newRawTarget(t)
	old, oldServer := r.connect(t)
	r.proxy.SetRefuse(true)
	client, err := net.Dial("tcp", r.proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	client.SetDeadline(time.Now().Add(ioTimeout))
	expectClosed(t, client)

	f := frame(frameData, 0, 1, 3)
	oldServer.Write(f)
	if got := readN(t, old, len(f)); !bytes.Equal(got, f) {
		t.Fatalf("connection open before SetRefuse: got %x, want %x", got, f)
	}
	r.proxy.SetRefuse(false)
	_, server := r.connect(t) // the proxy dials the target again
	server.Close()
}

func TestCloseEndsConnectionsAndGoroutines(t *testing.T) {
	r := newRawTarget(t)
	client, server := r.connect(t)
	if err := r.proxy.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoProxyGoroutines(t)
	expectClosed(t, client)
	expectClosed(t, server)
	if c, err := net.Dial("tcp", r.proxy.Addr()); err == nil {
		c.Close()
		t.Fatal("the proxy still accepts after Close")
	}
	if err := r.proxy.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
