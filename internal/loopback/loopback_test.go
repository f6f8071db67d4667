package loopback

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddrBelowEphemeral: the address is on 127.0.0.1, can be bound,
// and on Linux its port lies below the ephemeral range, where no port-0
// bind or outgoing connection takes it.
func TestFreeAddrBelowEphemeral(t *testing.T) {
	for range 20 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		host, p, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("FreeAddr() = %q, %v", addr, err)
		}
		port, _ := strconv.Atoi(p)
		if lo := ephemeralLow(); lo > 2*lowest && (port < lowest || port >= lo) {
			t.Fatalf("port %d outside [%d, %d)", port, lowest, lo)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free: %v", addr, err)
		}
		l.Close()
	}
}

// TestTryPortTaken: a port someone holds is not handed out.
func TestTryPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if addr, ok := tryPort(l.Addr().(*net.TCPAddr).Port); ok {
		t.Fatalf("tryPort handed out %s, which is held", addr)
	}
}
