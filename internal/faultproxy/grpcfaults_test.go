package faultproxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// heldTimeout is the deadline of a call that must time out on a held
// connection; patientTimeout of one that must succeed through a fault
// that only slows it. Both bound hangs; neither is waited for on success.
const (
	heldTimeout    = 200 * time.Millisecond
	patientTimeout = 10 * time.Second
)

// A call on a blackholed connection times out and the connection stays;
// a call made while held is held, not lost: it completes on Resume, on
// the same connection.
func TestGRPCBlackholeTimesOutThenResumes(t *testing.T) {
	e := newGRPCEnv(t)
	e.mustCheck(t)
	c := waitConns(t, e.proxy, 1)[0]
	if err := c.Blackhole(); err != nil {
		t.Fatal(err)
	}
	expectCode(t, checkWith(t, e.client, heldTimeout, ""), codes.DeadlineExceeded)
	ran := e.health.ran.Load()

	errc := make(chan error, 1)
	go func() { errc <- checkWith(t, e.client, patientTimeout, "") }()
	time.Sleep(quiet) // lets the call reach the blackhole; asserts nothing
	if got := e.health.ran.Load(); got != ran {
		t.Fatalf("the server ran %d handlers through a blackhole", got-ran)
	}
	if err := c.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("the call held by the blackhole: %v", err)
	}
	if conns := e.proxy.Conns(); len(conns) != 1 || conns[0] != c {
		t.Fatalf("after Resume: Conns() = %v, want the same connection", conns)
	}
}

// Cutting one client's connection fails its call in flight and leaves the
// other client's connection alone; the cut client reconnects.
func TestGRPCCutOneConnection(t *testing.T) {
	e := newGRPCEnv(t)
	other := dialHealth(t, e.proxy.Addr(), insecure.NewCredentials())
	e.mustCheck(t)
	first := waitConns(t, e.proxy, 1)[0]
	if err := checkWith(t, other, callTimeout, ""); err != nil {
		t.Fatal(err)
	}
	second := waitConns(t, e.proxy, 2)[1]

	errc := make(chan error, 1)
	go func() { errc <- e.check(t, blockService) }()
	wait(t, e.health.entered, "the call reached the server")
	if err := first.Cut(); err != nil {
		t.Fatal(err)
	}
	expectCode(t, <-errc, codes.Unavailable)
	wait(t, e.health.canceled, "the server saw its connection closed")
	select {
	case <-second.Done():
		t.Fatal("cutting one connection closed the other")
	default:
	}
	if err := checkWith(t, other, callTimeout, ""); err != nil {
		t.Fatalf("the other client after the cut: %v", err)
	}
	e.mustCheck(t, grpc.WaitForReady(true))
	conns := e.proxy.Conns()
	if len(conns) != 2 || conns[0] != second || conns[1].ID() != 3 {
		t.Fatalf("after the reconnect: Conns() = %v, want conn 2 and a new conn 3", conns)
	}
}

// Latency slows calls (never below its lower bound) and breaks none.
func TestGRPCDelaySlowsButDoesNotBreak(t *testing.T) {
	e := newGRPCEnv(t)
	e.mustCheck(t)
	c := waitConns(t, e.proxy, 1)[0]
	const d = 50 * time.Millisecond
	if err := c.SetDelay(BothWays, Fixed(d)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := checkWith(t, e.client, patientTimeout, ""); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 2*d {
		t.Fatalf("a call took %v through %v each way", el, d)
	}

	c.SetDelay(BothWays, Delay{})
	if err := e.proxy.SetDelay(BothWays, Uniform(0, 20*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				if err := checkWith(t, e.client, patientTimeout, ""); err != nil {
					t.Errorf("a call through random latency: %v", err)
				}
			}
		})
	}
	wg.Wait()
	e.expectRan(t, 42)
}

// A connection's own drop loses a response of that connection only,
// after the server applied the call.
func TestGRPCDropOnOneConnection(t *testing.T) {
	e := newGRPCEnv(t)
	other := dialHealth(t, e.proxy.Addr(), insecure.NewCredentials())
	e.mustCheck(t)
	first := waitConns(t, e.proxy, 1)[0]
	if err := checkWith(t, other, callTimeout, ""); err != nil {
		t.Fatal(err)
	}
	waitConns(t, e.proxy, 2)
	if err := first.DropNextResponse(); err != nil {
		t.Fatal(err)
	}
	if err := checkWith(t, other, callTimeout, ""); err != nil {
		t.Fatalf("the other connection's call: %v", err)
	}
	e.expectRan(t, 3)
	expectCode(t, e.check(t, ""), codes.Unavailable)
	e.expectRan(t, 4)
	if n := e.proxy.Dropped(); n != 1 {
		t.Fatalf("Dropped() = %d, want 1", n)
	}
	e.mustCheck(t, grpc.WaitForReady(true))
}

// In front of TLS the proxy passes bytes through: calls work, and cuts,
// blackholes and delays act as on h2c; drops are refused.
func TestGRPCPassThroughTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	p := newProxyWith(t, ln.Addr().String(), Options{PassThrough: true})
	client := dialHealth(t, p.Addr(), credentials.NewClientTLSFromCert(pool, ""))
	if err := checkWith(t, client, callTimeout, ""); err != nil {
		t.Fatal(err)
	}
	c := waitConns(t, p, 1)[0]
	expectErr(t, p.DropNextResponse(), ErrPassThrough)
	expectErr(t, c.DropNextResponse(), ErrPassThrough)

	const d = 50 * time.Millisecond
	c.SetDelay(ToClient, Fixed(d))
	start := time.Now()
	if err := checkWith(t, client, patientTimeout, ""); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < d {
		t.Fatalf("a call took %v through %v", el, d)
	}
	c.SetDelay(ToClient, Delay{})

	c.Blackhole()
	expectCode(t, checkWith(t, client, heldTimeout, ""), codes.DeadlineExceeded)
	c.Resume()
	if err := checkWith(t, client, patientTimeout, ""); err != nil {
		t.Fatal(err)
	}
	c.Cut()
	// The first call may go out on the cut connection before the client
	// has read its end; the next one reconnects.
	if err := checkWith(t, client, patientTimeout, "", grpc.WaitForReady(true)); err != nil {
		expectCode(t, err, codes.Unavailable)
		if err := checkWith(t, client, patientTimeout, "", grpc.WaitForReady(true)); err != nil {
			t.Fatalf("after a cut: %v", err)
		}
	}
	if conns := p.Conns(); len(conns) != 1 || conns[0].ID() != 2 {
		t.Fatalf("after the reconnect: Conns() = %v, want a new conn 2", conns)
	}
}

// selfSigned returns a certificate for 127.0.0.1 that is its own CA, and a
// pool holding it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "faultproxy test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
