package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/rpc"
)

// testCert writes a self-signed certificate for 127.0.0.1 (its own CA)
// and its key, and returns their paths.
func testCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "percolator test"},
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
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

var servingAddr = regexp.MustCompile(`msg=serving addr=\S*:(\d+)`)

// serveInProcess runs serve with args until it logs the address it
// serves on, and returns that port on 127.0.0.1, what it logged so far,
// and a stop that ends it and returns its exit status. A serve that exits
// first fails the test.
func serveInProcess(t *testing.T, args ...string) (addr, logged string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	var errOut lockedBuffer
	exit := make(chan int, 1)
	go func() { exit <- run(ctx, append([]string{"serve"}, args...), strings.NewReader(""), &out, &errOut) }()
	var once sync.Once
	code := 0
	stop = func() int {
		once.Do(func() {
			cancel()
			code = <-exit
		})
		return code
	}
	t.Cleanup(func() { stop() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := servingAddr.FindStringSubmatch(errOut.String()); m != nil {
			return net.JoinHostPort("127.0.0.1", m[1]), errOut.String(), stop
		}
		select {
		case c := <-exit:
			exit <- c
			t.Fatalf("serve %q exited %d before serving:\n%s", args, c, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve %q did not start:\n%s", args, errOut.String())
		}
	}
}

// TestServeNonLoopbackNeedsTLS: beyond loopback a token would cross the
// network in clear without TLS, so serve requires --tls-cert/--tls-key
// there, or an explicit --insecure that its log warns about. Loopback is
// as before. Every client here dials 127.0.0.1 only.
func TestServeNonLoopbackNeedsTLS(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key := testCert(t)
	ping := func(t *testing.T, addr string, opts rpc.DialOptions) {
		t.Helper()
		opts.Token = "s3cret"
		conn, err := rpc.Dial(context.Background(), addr, opts)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		conn.Close()
	}

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want []string
		}{
			{[]string{"--listen", "0.0.0.0:0", "--token-file", tokenFile}, []string{"0.0.0.0:0", "TLS", "--tls-cert", "--insecure", "in clear"}},
			{[]string{"--listen", ":0", "--token-file", tokenFile}, []string{"TLS", "--insecure"}},
			{[]string{"--listen", "0.0.0.0:0"}, []string{"token"}},
			{[]string{"--listen", "0.0.0.0:0", "--insecure"}, []string{"token"}},
			{[]string{"--listen", "0.0.0.0:0", "--token-file", tokenFile, "--insecure", "--tls-cert", cert, "--tls-key", key}, []string{"--insecure", "--tls-cert"}},
		} {
			args := append([]string{"serve", "--dir", t.TempDir()}, tc.args...)
			// A serve that starts instead runs until this ends: exit 0.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var out, errb bytes.Buffer
			code := run(ctx, args, strings.NewReader(""), &out, &errb)
			cancel()
			errOut := errb.String()
			if code != 2 {
				t.Errorf("percolator %q: exit %d, want 2\n%s%s", args, code, out.String(), errOut)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("percolator %q: %q does not say %q", args, errOut, w)
				}
			}
		}
	})
	t.Run("loopback", func(t *testing.T) {
		addr, _, stop := serveInProcess(t, "--dir", t.TempDir(), "--listen", "127.0.0.1:0")
		ping(t, addr, rpc.DialOptions{})
		if code := stop(); code != 0 {
			t.Fatalf("exit %d", code)
		}
		addr, logged, stop := serveInProcess(t, "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--token-file", tokenFile)
		ping(t, addr, rpc.DialOptions{})
		if strings.Contains(logged, "WARN") {
			t.Fatalf("a loopback serve with a token warns:\n%s", logged)
		}
		if code := stop(); code != 0 {
			t.Fatalf("exit %d", code)
		}
	})
	t.Run("insecure", func(t *testing.T) {
		addr, logged, stop := serveInProcess(t, "--dir", t.TempDir(), "--listen", "0.0.0.0:0", "--token-file", tokenFile, "--insecure")
		if !strings.Contains(logged, "level=WARN") || !strings.Contains(logged, "--insecure") || !strings.Contains(logged, "in clear") {
			t.Fatalf("serve --insecure beyond loopback does not warn of what it risks:\n%s", logged)
		}
		ping(t, addr, rpc.DialOptions{})
		if code := stop(); code != 0 {
			t.Fatalf("exit %d", code)
		}
	})
	t.Run("tls", func(t *testing.T) {
		addr, logged, stop := serveInProcess(t, "--dir", t.TempDir(), "--listen", "0.0.0.0:0", "--token-file", tokenFile, "--tls-cert", cert, "--tls-key", key)
		if strings.Contains(logged, "WARN") {
			t.Fatalf("a TLS serve warns:\n%s", logged)
		}
		ping(t, addr, rpc.DialOptions{CAFile: cert})
		if code := stop(); code != 0 {
			t.Fatalf("exit %d", code)
		}
	})
}

// TestServeLimitFlags: serve's limit flags reach the server, and a client
// past a limit fails with a message naming the flag that raises it. Each
// command opens a nonce group, kept for 30 minutes: with
// --max-nonce-groups 1 the second is refused.
func TestServeLimitFlags(t *testing.T) {
	if _, errOut, code := runCLI(t, "serve", "--dir", t.TempDir(), "--max-sessions", "0"); code != 2 || !strings.Contains(errOut, "--max-sessions") {
		t.Fatalf("serve --max-sessions 0: exit %d: %s", code, errOut)
	}
	addr, _, _ := serveInProcess(t, "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--max-nonce-groups", "1")
	if out, errOut, code := runCLI(t, "locks", "--server", addr); code != 0 {
		t.Fatalf("locks: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := runCLI(t, "locks", "--server", addr)
	if code != 1 || !strings.Contains(errOut, "server limit reached") || !strings.Contains(errOut, "--max-nonce-groups") {
		t.Fatalf("locks past the server's nonce group limit: exit %d\n%s%s\nwant exit 1 naming the limit and its flag", code, out, errOut)
	}
}
