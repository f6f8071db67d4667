package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
)

// Client-side errors.
var (
	// ErrUnavailable: the server could not be reached, or kept failing,
	// until the call's retry budget ran out. A write that met it has an
	// unknown outcome unless it carried a nonce and is retried.
	ErrUnavailable = errors.New("rpc: server unavailable")
	// ErrUnauthenticated: the server refused the token.
	ErrUnauthenticated = errors.New("rpc: unauthenticated")
	// ErrOutcomeUnknown: a non-idempotent call may or may not have been
	// applied, and the server can no longer tell.
	ErrOutcomeUnknown = errors.New("rpc: outcome unknown")
	// ErrLimit: the server refused the call, applying nothing, because it
	// would pass a limit on what clients hold open (sessions, advisory
	// locks, nonce groups or calls); the message names the limit and the
	// serve flag that raises it. Closing what is held makes room.
	ErrLimit = errors.New("rpc: server limit reached")
)

// MsgLimit begins the message of a ResourceExhausted status that a server
// limit caused (ErrLimit), telling it from gRPC's own for a message over
// the size limit.
const MsgLimit = "server limit reached"

// DialOptions configures Dial.
type DialOptions struct {
	// Token is sent on every call (rpc.TokenHeader).
	Token string
	// TLS, if set, connects with TLS; CAFile builds one trusting that CA.
	TLS    *tls.Config
	CAFile string
	// DialTimeout bounds the first connection check. Default 5s.
	DialTimeout time.Duration
	// CallTimeout bounds each attempt of a call. Default 10s.
	CallTimeout time.Duration
	// RetryBudget bounds how long a call is retried after failures the
	// server may recover from (a restart). Default 30s.
	RetryBudget time.Duration
	// MaxMessageSize bounds a message either way. Default 64 MiB.
	MaxMessageSize int
}

func (o *DialOptions) ensureDefaults() {
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = 10 * time.Second
	}
	if o.RetryBudget == 0 {
		o.RetryBudget = 30 * time.Second
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = 64 << 20
	}
}

// Conn is a connection to a percolator server, shared by the storage,
// oracle and coord clients of a process. Safe for concurrent use.
type Conn struct {
	Addr    string
	opts    DialOptions
	cc      *grpc.ClientConn
	Storage rpcpb.StorageClient
	Oracle  rpcpb.OracleClient
	Coord   rpcpb.CoordClient
}

// tokenCreds sends the token on every call.
type tokenCreds struct {
	token  string
	secure bool
}

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{TokenHeader: "Bearer " + t.token}, nil
}

func (t tokenCreds) RequireTransportSecurity() bool { return false }

// Dial connects to the server at addr and checks that it answers (a Ping
// bounded by DialTimeout): a server that is down is a clear error naming
// the address, not a hang.
func Dial(ctx context.Context, addr string, opts DialOptions) (*Conn, error) {
	opts.ensureDefaults()
	creds := insecure.NewCredentials()
	tlsConf := opts.TLS
	if tlsConf == nil && opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("rpc: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: no certificate in CA file %s", storage.ErrInvalidArgument, opts.CAFile)
		}
		tlsConf = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if tlsConf != nil {
		creds = credentials.NewTLS(tlsConf)
	}
	dopts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(opts.MaxMessageSize), grpc.MaxCallSendMsgSize(opts.MaxMessageSize)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}),
		// Reconnect as often as Do retries: gRPC's default back-off (1s
		// growing to 2 minutes) would leave a client idle for seconds after
		// a restarted server is back, using up its retry budget.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: opts.DialTimeout,
		}),
	}
	if opts.Token != "" {
		dopts = append(dopts, grpc.WithPerRPCCredentials(tokenCreds{token: opts.Token}))
	}
	cc, err := grpc.NewClient(addr, dopts...)
	if err != nil {
		return nil, fmt.Errorf("%w: server %s: %v", storage.ErrInvalidArgument, addr, err)
	}
	c := &Conn{Addr: addr, opts: opts, cc: cc,
		Storage: rpcpb.NewStorageClient(cc), Oracle: rpcpb.NewOracleClient(cc), Coord: rpcpb.NewCoordClient(cc)}
	pctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	if _, err := c.Storage.Ping(pctx, &rpcpb.PingRequest{}); err != nil {
		_ = cc.Close()
		if status.Code(err) == codes.Unauthenticated {
			return nil, fmt.Errorf("%w: server %s refused the token", ErrUnauthenticated, addr)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		msg := status.Convert(err).Message()
		if tlsConf == nil && strings.Contains(msg, "server preface") {
			// A TLS server closes a plaintext connection without a word.
			msg += " (if the server serves TLS, dial it with its CA: DialOptions.CAFile)"
		}
		return nil, fmt.Errorf("%w: server %s unreachable: %s", ErrUnavailable, addr, msg)
	}
	return c, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.cc.Close() }

// CallTimeout is the per-attempt deadline.
func (c *Conn) CallTimeout() time.Duration { return c.opts.CallTimeout }

// Retryable reports whether a call's failure may pass if the call is sent
// again: the server was unreachable, restarting or shutting down, or the
// attempt's own deadline passed. ResourceExhausted is not: gRPC returns it
// for a message over the size limit, which fails the same way every time.
func Retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted:
		return true
	}
	return false
}

// Do runs call with a per-attempt deadline, retrying retryable failures
// with jittered exponential back-off (10ms doubling to 1s) until it
// succeeds, fails otherwise, the caller's context ends, or the retry
// budget is spent. attempt counts from 0. The error is the last one,
// converted (Error).
func (c *Conn) Do(ctx context.Context, call func(ctx context.Context, attempt int) error) error {
	deadline := time.Now().Add(c.opts.RetryBudget)
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		err := call(actx, attempt)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !Retryable(err) || time.Now().After(deadline) {
			return c.Error(err)
		}
		d := 10 * time.Millisecond << min(attempt, 7)
		d = d/2 + time.Duration(rand.Int64N(int64(d)))
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// Error converts a call's gRPC error to the storage model's errors.
func (c *Conn) Error(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.InvalidArgument:
		return fmt.Errorf("%w: %s", storage.ErrInvalidArgument, st.Message())
	case codes.ResourceExhausted:
		if strings.HasPrefix(st.Message(), MsgLimit) {
			return fmt.Errorf("%w: server %s: %s", ErrLimit, c.Addr, strings.TrimPrefix(strings.TrimPrefix(st.Message(), MsgLimit), ": "))
		}
		return fmt.Errorf("%w: message over the size limit (server %s): %s", storage.ErrInvalidArgument, c.Addr, st.Message())
	case codes.PermissionDenied:
		return storage.ReservedError("server %s: %s", c.Addr, st.Message())
	case codes.Unauthenticated:
		return fmt.Errorf("%w: server %s: %s", ErrUnauthenticated, c.Addr, st.Message())
	case codes.Canceled:
		return fmt.Errorf("%w: %s", context.Canceled, st.Message())
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted:
		return fmt.Errorf("%w: server %s: %s", ErrUnavailable, c.Addr, st.Message())
	}
	return fmt.Errorf("rpc: server %s: %s: %s", c.Addr, st.Code(), st.Message())
}
