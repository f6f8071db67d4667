package rpc_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/internal/loopback"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
)

// A message over the server's size limit is refused at once with a clear
// error: it fails the same way every time, so it is not retried (it used
// to be, until the retry budget ran out, and then reported as the server
// being unavailable).
func TestOversizedMessageIsRefusedNotRetried(t *testing.T) {
	srv := servertest.Start(t, server.Options{MaxMessageSize: 4 << 10}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{RetryBudget: 20 * time.Second})
	st := servertest.Store(t, conn, remote.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := st.Mutate(ctx, []byte("row"), storage.SetCell("f", "q", 1, make([]byte, 8<<10)))
	if !errors.Is(err, storage.ErrInvalidArgument) || !strings.Contains(err.Error(), "larger than max") {
		t.Fatalf("Mutate of a 8 KiB value over a 4 KiB limit: %v, want ErrInvalidArgument saying the message is larger than the maximum", err)
	}
	if errors.Is(err, rpc.ErrUnavailable) {
		t.Fatalf("Mutate: %v: reported as unavailable", err)
	}
	r, err := st.ReadRow(ctx, []byte("row"), storage.Filter{{Family: "f", AllQualifiers: true}})
	if err != nil || len(r.Cells) != 0 {
		t.Fatalf("after the refused Mutate the row holds %v (%v), want nothing", r.Cells, err)
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Dial to a port with nothing listening, or to one that accepts and never
// answers, fails once the retry budget is spent, with an error naming the
// address.
func TestDialUnreachable(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() { // accept and hold, never answering
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	const timeout, budget = time.Second, 2 * time.Second
	for name, addr := range map[string]string{"nothing listening": freeAddr(t), "never answers": silent.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			c, err := rpc.Dial(context.Background(), addr, rpc.DialOptions{DialTimeout: timeout, RetryBudget: budget})
			if err == nil {
				c.Close()
				t.Fatalf("Dial(%s) succeeded", addr)
			}
			// Only a hang fails this: the budget is 2s.
			if el := time.Since(start); el > 30*time.Second {
				t.Errorf("Dial took %v with a %v retry budget", el, budget)
			}
			if !errors.Is(err, rpc.ErrUnavailable) || !strings.Contains(err.Error(), addr) {
				t.Errorf("Dial: %v, want ErrUnavailable naming %s", err, addr)
			}
		})
	}
}

// selfSigned returns a certificate for 127.0.0.1 that is its own CA, and
// the path of a PEM file holding it.
func selfSigned(t *testing.T) (tls.Certificate, string) {
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
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, path
}

func TestTLS(t *testing.T) {
	cert, caFile := selfSigned(t)
	srv := servertest.Start(t, server.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}, "")
	ctx := context.Background()

	t.Run("trusted", func(t *testing.T) {
		conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{CAFile: caFile})
		st := servertest.Store(t, conn, remote.Options{})
		if n, err := st.Increment(ctx, []byte("r"), "c", "n", 3); err != nil || n != 3 {
			t.Fatalf("Increment over TLS = %d, %v", n, err)
		}
	})
	t.Run("plaintext client", func(t *testing.T) {
		c, err := rpc.Dial(ctx, srv.Addr, rpc.DialOptions{DialTimeout: 2 * time.Second})
		if err == nil {
			c.Close()
			t.Fatal("a plaintext client reached a TLS server")
		}
		if !errors.Is(err, rpc.ErrUnavailable) || !strings.Contains(err.Error(), srv.Addr) || !strings.Contains(err.Error(), "TLS") {
			t.Fatalf("plaintext Dial: %v, want ErrUnavailable naming %s and suggesting TLS", err, srv.Addr)
		}
	})
	t.Run("untrusted", func(t *testing.T) {
		_, other := selfSigned(t)
		c, err := rpc.Dial(ctx, srv.Addr, rpc.DialOptions{CAFile: other, DialTimeout: 2 * time.Second})
		if err == nil {
			c.Close()
			t.Fatal("a client trusting another CA reached the server")
		}
		if !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("Dial trusting another CA: %v, want an error about the certificate", err)
		}
	})
}

// TestUnavailableIsStoreUnavailable: a server that does not answer is, to
// the store's callers (the observer's outage handling), a store that does
// not, and one whose retry budget is spent.
func TestUnavailableIsStoreUnavailable(t *testing.T) {
	err := fmt.Errorf("%w: server 127.0.0.1:1: connection refused", rpc.ErrUnavailable)
	if !errors.Is(err, rpc.ErrUnavailable) || !errors.Is(err, storage.ErrUnavailable) || !errors.Is(err, storage.ErrBudgetSpent) {
		t.Fatalf("%v: matches rpc.ErrUnavailable %v, storage.ErrUnavailable %v", err, errors.Is(err, rpc.ErrUnavailable), errors.Is(err, storage.ErrUnavailable))
	}
	if errors.Is(storage.ErrUnavailable, rpc.ErrUnavailable) {
		t.Fatal("storage.ErrUnavailable matches rpc.ErrUnavailable: a Bigtable outage would read as a server's")
	}
}
