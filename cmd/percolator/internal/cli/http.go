package cli

import (
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"
)

// HTTPFlags are the flags of a long-running command's HTTP listener, the
// status page at / and the Prometheus metrics at /metrics: --http, and
// --metrics, its old name (hidden; either may be given, not both).
type HTTPFlags struct {
	Addr    string
	metrics string

	// Set by Check.
	Beyond bool // Addr may be reached from other machines
}

// BeyondListen and LoopbackOnly say, in --http's help, what an address
// beyond loopback takes (Register).
const (
	BeyondListen = "beyond loopback they follow the --listen rules: the token is required, over TLS or --insecure"
	LoopbackOnly = "loopback addresses only"
)

// Register adds --http and its old name --metrics to fs; beyond says
// what an address beyond loopback takes.
func (h *HTTPFlags) Register(fs *pflag.FlagSet, beyond string) {
	fs.StringVar(&h.Addr, "http", "", "address to serve the status page (at /) and Prometheus metrics (at /metrics) on, e.g. 127.0.0.1:7421 (default none); "+beyond)
	fs.StringVar(&h.metrics, "metrics", "", "old name of --http")
	_ = fs.MarkHidden("metrics")
}

// Check takes --metrics as --http, and refuses an address beyond loopback
// without a token, or without TLS unless insecure, as ListenFlags.Check
// does for --listen.
func (h *HTTPFlags) Check(token string, hasTLS, insecure bool) error {
	if err := h.alias(); err != nil || h.Addr == "" {
		return err
	}
	var err error
	h.Beyond, err = checkListen("--http", h.Addr, token, hasTLS, insecure)
	return err
}

// CheckLoopback takes --metrics as --http and refuses an address beyond
// loopback: a command with no token and certificate of its own to serve
// with (worker) serves its page on this machine only.
func (h *HTTPFlags) CheckLoopback(who string) error {
	if err := h.alias(); err != nil || h.Addr == "" {
		return err
	}
	beyond, err := beyondLoopback("--http", h.Addr)
	if err == nil && beyond {
		err = Usagef("--http %s is not a loopback address: %s serves its status page on loopback only (it has no --tls-cert to protect a token with); "+
			"give --http 127.0.0.1:PORT and reach it through an SSH tunnel", h.Addr, who)
	}
	return err
}

func (h *HTTPFlags) alias() error {
	switch {
	case h.metrics == "":
	case h.Addr != "" && h.Addr != h.metrics:
		return Usagef("--metrics is the old name of --http: give one of them")
	default:
		h.Addr = h.metrics
	}
	return nil
}

// ServeHTTP serves handler on addr (with TLS when tlsConfig is set) until
// stop, which closes the listener and the connections.
func ServeHTTP(addr string, tlsConfig *tls.Config, handler http.Handler, log *slog.Logger) (stop func(), err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if tlsConfig != nil {
		lis, scheme = tls.NewListener(lis, tlsConfig), "https"
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(lis) }()
	log.Info("serving the status page and metrics", "url", scheme+"://"+lis.Addr().String()+"/")
	return func() { _ = hs.Close() }, nil
}
