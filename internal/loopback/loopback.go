// Package loopback picks loopback addresses for processes that are handed
// an address to listen on, rather than binding one themselves and
// passing the listener on: an etcd member, a child server, a service of
// `percolator verify`.
//
// Such an address is only free a moment ago: between the pick and the
// child's bind, another process may take its port. Anything that binds
// port 0, and every outgoing connection (its source port), takes its
// port from the kernel's ephemeral range, so on a busy machine a port
// picked there is soon taken again; a port picked below that range can
// only be taken by another process picking the same one by chance.
// FreeAddr picks there. The chance of a clash is small, not nil: a
// caller that can tell a taken port from another failure retries with a
// new address (the etcd members do).
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
)

// lowest is the lowest port FreeAddr picks below the ephemeral range
// (above the ports of well-known services).
const lowest = 10_000

// FreeAddr returns a 127.0.0.1 address whose port was free a moment
// ago, below the kernel's ephemeral ports where it can tell where they
// begin and there is room, in the ephemeral range otherwise.
func FreeAddr() (string, error) {
	if lo := ephemeralLow(); lo > 2*lowest {
		for range 100 {
			if addr, ok := tryPort(lowest + rand.IntN(lo-lowest)); ok {
				return addr, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("loopback: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// tryPort binds port on 127.0.0.1 and releases it.
func tryPort(port int) (string, bool) {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return "", false
	}
	defer l.Close()
	return l.Addr().String(), true
}

// ephemeralLow returns the lowest ephemeral port, or 0 if unknown (not
// Linux).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var lo int
	if _, err := fmt.Sscan(string(b), &lo); err != nil {
		return 0
	}
	return lo
}
