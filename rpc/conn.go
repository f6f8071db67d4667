package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/internal/ctxwait"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
)

// Client-side errors.
var (
	// ErrUnavailable: the server could not be reached, or kept failing,
	// until the call's retry budget ran out. A write that met it has an
	// unknown outcome unless it carried a nonce and is retried. It
	// matches storage.ErrUnavailable and storage.ErrBudgetSpent too: to the
	// store's callers a server that does not answer is a store that does
	// not, and one that has retried for its whole budget.
	ErrUnavailable error = unavailableError{}
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
	// ErrUnimplemented: the server does not serve the method called (a
	// server of an older build): it applied nothing.
	ErrUnimplemented = errors.New("rpc: the server does not serve this call")
)

// MsgLimit begins the message of a ResourceExhausted status that a server
// limit caused (ErrLimit), telling it from gRPC's own for a message over
// the size limit.
const MsgLimit = "server limit reached"

// MsgNoSpace begins the message of a ResourceExhausted status that a
// server's nearly full disk caused (storage.ErrNoSpace).
const MsgNoSpace = "disk nearly full"

// Default budgets (DialOptions).
const (
	DefaultRetryBudget   = 30 * time.Second
	DefaultCleanupBudget = time.Second
)

// unavailableError is ErrUnavailable: a sentinel that is also
// storage.ErrUnavailable and storage.ErrBudgetSpent.
type unavailableError struct{}

func (unavailableError) Error() string { return "rpc: server unavailable" }
func (unavailableError) Is(target error) bool {
	return target == storage.ErrUnavailable || target == storage.ErrBudgetSpent
}

// DialOptions configures Dial.
type DialOptions struct {
	// Token is sent on every call (rpc.TokenHeader).
	Token string
	// TLS, if set, connects with TLS; CAFile builds one trusting that CA.
	TLS    *tls.Config
	CAFile string
	// DialTimeout bounds each attempt of Dial's connection check. Default
	// 5s.
	DialTimeout time.Duration
	// CallTimeout bounds each attempt of a call (for a stream: the wait
	// for its next message). Default 10s.
	CallTimeout time.Duration
	// RetryBudget bounds how long Dial, a call, and an operation
	// (WithOperation) go on retrying while the server does not answer
	// (down, restarting, unreachable), before they fail with
	// ErrUnavailable. Default 30s.
	RetryBudget time.Duration
	// CleanupBudget bounds the calls an operation makes after its context
	// ended (cleanup under context.WithoutCancel; see WithOperation).
	// Default 1s.
	CleanupBudget time.Duration
	// MaxMessageSize bounds a message either way. Default 64 MiB.
	MaxMessageSize int
	// GRPC are more gRPC dial options, applied after the connection's
	// own: an interceptor that counts or traces the calls, say. Options
	// that replace the connection's own (its credentials, back-off or
	// message sizes) change how it behaves; leave those alone.
	GRPC []grpc.DialOption
}

func (o *DialOptions) validate() error {
	if o.DialTimeout < 0 || o.CallTimeout < 0 || o.RetryBudget < 0 || o.CleanupBudget < 0 || o.MaxMessageSize < 0 {
		return fmt.Errorf("%w: negative dial option", storage.ErrInvalidArgument)
	}
	return nil
}

func (o *DialOptions) ensureDefaults() {
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = 10 * time.Second
	}
	if o.RetryBudget == 0 {
		o.RetryBudget = DefaultRetryBudget
	}
	if o.CleanupBudget == 0 {
		o.CleanupBudget = DefaultCleanupBudget
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
	// FormatVersion is the on-disk format of the server's store, as its
	// Ping answered when dialed; 0 from a server that does not say (one
	// made before stores recorded their format: version 1).
	FormatVersion uint64
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

// Dial connects to the server at addr and checks that it answers (a
// Ping): a server that is down is a clear error naming the address, not
// a hang. A server that does not answer (down, restarting) is tried again
// until RetryBudget is spent or ctx ends; a refusal (the token, the
// certificate, a TLS server dialed in plaintext) fails at once.
func Dial(ctx context.Context, addr string, opts DialOptions) (*Conn, error) {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
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
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(opts.MaxMessageSize), grpc.MaxCallSendMsgSize(opts.MaxMessageSize), CodecCallOption()),
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
	dopts = append(dopts, grpc.WithChainUnaryInterceptor(sendReserve))
	dopts = append(dopts, opts.GRPC...)
	cc, err := grpc.NewClient(addr, dopts...)
	if err != nil {
		return nil, fmt.Errorf("%w: server %s: %v", storage.ErrInvalidArgument, addr, err)
	}
	c := &Conn{Addr: addr, opts: opts, cc: cc,
		Storage: rpcpb.NewStorageClient(cc), Oracle: rpcpb.NewOracleClient(cc), Coord: rpcpb.NewCoordClient(cc)}
	if err := c.ping(ctx, tlsConf != nil); err != nil {
		_ = cc.Close()
		return nil, err
	}
	return c, nil
}

// ping checks that the server answers, retrying within the retry budget
// what a restarting server gives, each attempt bounded by DialTimeout.
func (c *Conn) ping(ctx context.Context, secure bool) error {
	po := *c
	po.opts.CallTimeout = c.opts.DialTimeout
	err := po.Do(ctx, func(actx context.Context, _ int) error {
		resp, err := c.Storage.Ping(actx, &rpcpb.PingRequest{})
		if err == nil {
			c.FormatVersion = resp.GetFormatVersion()
			return nil
		}
		if !Retryable(err) {
			return err
		}
		msg := status.Convert(err).Message()
		// A refusal that fails the same way every time ends the retries:
		// Do returns an error that is not a gRPC status as it is.
		switch {
		case strings.Contains(msg, "authentication handshake failed"):
			return fmt.Errorf("%w: server %s: %s", ErrUnavailable, c.Addr, msg)
		case !secure && strings.Contains(msg, "server preface") && servesTLS(actx, c.Addr):
			// The connection closed before the server's HTTP/2 preface,
			// and the server completes a TLS handshake: it serves TLS.
			return fmt.Errorf("%w: server %s serves TLS, and this client dialed it in plaintext (%s): dial it with its CA (DialOptions.CAFile)", ErrUnavailable, c.Addr, msg)
		}
		return err
	})
	if errors.Is(err, ErrUnauthenticated) {
		return fmt.Errorf("%w: server %s refused the token", ErrUnauthenticated, c.Addr)
	}
	return err
}

// servesTLS reports whether addr completes a TLS handshake. It tells a TLS
// server (which closes a plaintext connection without a word) from a
// connection cut for another reason (a restart, the network), which a
// failed Ping alone cannot.
func servesTLS(ctx context.Context, addr string) bool {
	d := tls.Dialer{
		NetDialer: &net.Dialer{},
		// Only whether the server speaks TLS is asked; nothing is sent on
		// the connection, so its certificate need not be trusted.
		Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // a probe, no data
	}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// Close closes the connection.
func (c *Conn) Close() error { return c.cc.Close() }

// CallTimeout is the per-attempt deadline.
func (c *Conn) CallTimeout() time.Duration { return c.opts.CallTimeout }

// CleanupBudget is how long cleanup may take after its operation ended
// (DialOptions.CleanupBudget): what a closing client spends on a last call.
func (c *Conn) CleanupBudget() time.Duration { return c.opts.CleanupBudget }

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

// Do runs call, retrying retryable failures with jittered exponential
// back-off (10ms doubling to 1s) until it succeeds, fails otherwise, the
// caller's context ends (returning its error), or a budget is spent
// (doc.go, "Budgets"): the call's own retry budget from its start, the
// retry budget of each operation it is part of (WithOperation), the
// cleanup budget of an operation that has ended. Each attempt has
// CallTimeout, or what is left of the budgets if less. attempt counts
// from 0; an operation whose budget was spent before the call fails it
// with no attempt. The error is the last one, converted (Error); a spent
// budget's matches ErrUnavailable and says which.
func (c *Conn) Do(ctx context.Context, call func(ctx context.Context, attempt int) error) error {
	return c.retry(ctx, false, func(actx context.Context, attempt int, _ progressFunc) error { return call(actx, attempt) })
}

// Stream is Do for a call that streams replies: it calls progress for
// each message received, and the function progress returns once it has
// handled the message, before it waits for the next. A message is an
// answer: the call's own retry budget starts again from it, and its
// operations' stop counting. The attempt's limit (CallTimeout, or what is
// left of the budgets) bounds each wait for a message, not the attempt,
// nor the time the caller takes to handle one: a stream that keeps
// sending runs as long as it needs, and one that goes quiet (a
// blackholed connection) is cut and retried.
func (c *Conn) Stream(ctx context.Context, call func(ctx context.Context, attempt int, progress func() (waitNext func())) error) error {
	return c.retry(ctx, true, call)
}

// progressFunc marks a stream's message received; the function it
// returns marks the wait for the next begun.
type progressFunc = func() (waitNext func())

func (c *Conn) retry(ctx context.Context, stream bool, call func(context.Context, int, progressFunc) error) error {
	op, _ := ctx.Value(operationKey{}).(*operation)
	b := &budget{c: c, op: op, since: time.Now()}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		deadline, kind, which := b.deadline(time.Now())
		left := time.Until(deadline)
		switch {
		case attempt == 0 && kind == limitCall:
			// A call makes one attempt, however small its own budget.
			left = max(left, c.opts.CallTimeout)
		case left <= 0:
			return b.spent(kind, which)
		}
		err := c.attempt(ctx, b, attempt, min(left, c.opts.CallTimeout), stream, call)
		switch {
		case err == nil:
			b.op.answered(time.Now())
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case err == errCleanupCut:
			deadline, kind, which = b.deadline(time.Now())
			return b.spent(kind, which)
		case !Retryable(err):
			b.op.answered(time.Now()) // the server answered, with a refusal
			return c.Error(err)
		}
		now := time.Now()
		b.failed(c.Error(err))
		if deadline, kind, which = b.deadline(now); !now.Before(deadline) {
			return b.spent(kind, which)
		}
		d := 10 * time.Millisecond << min(b.failures(), 7)
		d = d/2 + time.Duration(rand.Int64N(int64(d)))
		if err := sleep(ctx, min(d, time.Until(deadline))); err != nil {
			return err
		}
	}
}

// attempt runs one attempt of call with limit: a deadline for a unary
// call, an idle limit (re-armed by each message) for a stream. An
// operation of b whose context ends meanwhile leaves the attempt its
// cleanup budget; an attempt it cuts returns errCleanupCut.
func (c *Conn) attempt(ctx context.Context, b *budget, n int, limit time.Duration, stream bool, call func(context.Context, int, progressFunc) error) error {
	var (
		actx   context.Context
		cancel context.CancelFunc
		why    cut
	)
	progress := func() func() { return func() {} }
	var idleFor atomic.Int64 // the stream's current wait limit
	if stream {
		actx, cancel = context.WithCancel(ctx)
		idleFor.Store(int64(limit))
		idle := time.AfterFunc(limit, func() { why.set(cutIdle); cancel() })
		defer idle.Stop()
		progress = func() func() {
			idle.Stop()
			b.progress(time.Now())
			return func() {
				now := time.Now()
				b.progress(now) // the caller's time is not the server's
				d, _, _ := b.deadline(now)
				wait := min(c.opts.CallTimeout, d.Sub(now))
				idleFor.Store(int64(wait))
				idle.Reset(wait)
			}
		}
	} else {
		actx, cancel = context.WithTimeout(ctx, limit)
	}
	defer cancel()
	for o := b.op; o != nil; o = o.parent {
		if o.ctx.Err() != nil {
			continue // already in limit
		}
		o := o
		stop := context.AfterFunc(o.ctx, func() {
			o.markEnded(time.Now())
			time.AfterFunc(c.opts.CleanupBudget, func() { why.set(cutCleanup); cancel() })
		})
		defer stop()
	}
	err := call(actx, n, progress)
	if err == nil || ctx.Err() != nil {
		return err
	}
	switch why.v.Load() {
	case cutNone:
		if !stream && errors.Is(actx.Err(), context.DeadlineExceeded) && Retryable(err) {
			return status.Errorf(codes.DeadlineExceeded, "no answer within %v", limit.Round(time.Millisecond))
		}
	case cutCleanup:
		return errCleanupCut
	case cutIdle:
		return status.Errorf(codes.DeadlineExceeded, "the stream sent nothing for %v", time.Duration(idleFor.Load()).Round(time.Millisecond))
	}
	return err
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error { return ctxwait.Sleep(ctx, d) }

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
		if strings.HasPrefix(st.Message(), MsgNoSpace) {
			return fmt.Errorf("%w: server %s: %s", storage.ErrNoSpace, c.Addr, strings.TrimPrefix(strings.TrimPrefix(st.Message(), MsgNoSpace), ": "))
		}
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
	case codes.Unimplemented:
		return fmt.Errorf("%w (server %s, of an older build?): %s", ErrUnimplemented, c.Addr, st.Message())
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted:
		return fmt.Errorf("%w: server %s: %s", ErrUnavailable, c.Addr, st.Message())
	case codes.FailedPrecondition:
		for _, m := range []struct {
			prefix string
			err    error
		}{{MsgEpochChanged, storage.ErrEpochChanged}, {MsgObserversMoved, storage.ErrObserversMoved}, {MsgNoOnePhase, storage.ErrNoOnePhase}} {
			if strings.HasPrefix(st.Message(), m.prefix) {
				return fmt.Errorf("%w: server %s: %s", m.err, c.Addr, strings.TrimPrefix(strings.TrimPrefix(st.Message(), m.prefix), ": "))
			}
		}
	}
	return fmt.Errorf("rpc: server %s: %s: %s", c.Addr, st.Code(), st.Message())
}

// sendReserve carries storage.WithReserve's mark on a call's context to
// the server (ReserveHeader).
func sendReserve(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if storage.UsesReserve(ctx) {
		ctx = metadata.AppendToOutgoingContext(ctx, ReserveHeader, "1")
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}
