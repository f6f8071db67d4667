package cli

import (
	"crypto/tls"
	"fmt"
	"net"

	"github.com/spf13/pflag"
)

// ListenFlags are the flags of a command that serves gRPC (serve,
// oracle), defined once: the address, the token every call must carry,
// TLS, and --insecure. Beyond loopback it needs a token, and TLS or
// --insecure: without TLS the token crosses the network in clear.
type ListenFlags struct {
	Addr              string
	tokenFile         string
	certFile, keyFile string
	insecure          bool

	// Set by Check.
	Token  string
	Beyond bool        // Addr may be reached from other machines
	TLS    *tls.Config // nil without --tls-cert
}

// Register adds --listen (default addr), --token-file, --tls-cert,
// --tls-key and --insecure to fs; exposed says what a token taken off
// the network lets one do.
func (l *ListenFlags) Register(fs *pflag.FlagSet, addr, exposed string) {
	fs.StringVar(&l.Addr, "listen", addr, "address to serve gRPC on")
	fs.StringVar(&l.tokenFile, "token-file", "", "file holding the token every call must carry (default: $PERCOLATOR_TOKEN; none: no token required)")
	fs.StringVar(&l.certFile, "tls-cert", "", "TLS certificate (PEM); with --tls-key, serve TLS")
	fs.StringVar(&l.keyFile, "tls-key", "", "TLS private key (PEM)")
	fs.BoolVar(&l.insecure, "insecure", false, "allow a --listen address beyond loopback without TLS: the token and every request and reply then cross the network in clear, so anyone who can see the traffic can take the token and "+exposed+" (use --tls-cert/--tls-key instead)")
}

// Check checks the flags, reads the token and the TLS key pair, and
// refuses an address beyond loopback without a token, or without TLS
// unless --insecure.
func (l *ListenFlags) Check() error {
	switch {
	case (l.certFile == "") != (l.keyFile == ""):
		return Usagef("--tls-cert and --tls-key go together")
	case l.insecure && l.certFile != "":
		return Usagef("--insecure and --tls-cert contradict each other: with TLS nothing crosses the network in clear")
	}
	var err error
	if l.Token, err = ReadToken(l.tokenFile); err != nil {
		return err
	}
	if l.Beyond, err = checkListen("--listen", l.Addr, l.Token, l.certFile != "", l.insecure); err != nil {
		return err
	}
	l.TLS, err = loadTLS(l.certFile, l.keyFile)
	return err
}

// loadTLS is the server's TLS configuration from a certificate and key,
// or nil without them.
func loadTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// checkListen refuses a listen address (given by flag) beyond loopback
// without a token, and without TLS unless insecure: the token would cross
// the network in clear. It reports whether the address is beyond
// loopback.
func checkListen(flag, listen, token string, hasTLS, insecure bool) (beyond bool, err error) {
	if beyond, err = beyondLoopback(flag, listen); err != nil {
		return false, err
	}
	switch {
	case beyond && token == "":
		return true, Usagef("%s %s is not a loopback address: set a token (--token-file or PERCOLATOR_TOKEN) to serve beyond this machine", flag, listen)
	case beyond && !hasTLS && !insecure:
		return true, Usagef("%s %s is not a loopback address: without TLS the token would cross the network in clear; "+
			"serve TLS with --tls-cert and --tls-key, or pass --insecure to accept the risk", flag, listen)
	}
	return beyond, nil
}

// RequireLoopback refuses a listen address other than loopback: without a
// token, anyone who can reach the port could read and write everything.
func RequireLoopback(addr string) error {
	beyond, err := beyondLoopback("--listen", addr)
	if err == nil && beyond {
		err = Usagef("--listen %s is not a loopback address: set a token (--token-file or PERCOLATOR_TOKEN) to serve beyond this machine", addr)
	}
	return err
}

// beyondLoopback reports whether a listen address may be reached from
// other machines: anything but localhost and a loopback IP (an empty host
// listens on every interface).
func beyondLoopback(flag, addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, Usagef("%s %s: %v", flag, addr, err)
	}
	if host == "localhost" {
		return false, nil
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback(), nil
}

// CheckHTTP checks h by the rules of these flags, after Check: beyond
// loopback the status page needs the token, and TLS or --insecure.
func (l *ListenFlags) CheckHTTP(h *HTTPFlags) error {
	return h.Check(l.Token, l.certFile != "", l.insecure)
}

// CertFile is --tls-cert: a client in the same process that dials the
// listener trusts it.
func (l *ListenFlags) CertFile() string { return l.certFile }
