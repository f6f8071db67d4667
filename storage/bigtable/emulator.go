package bigtable

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"cloud.google.com/go/bigtable/bttest"
	"google.golang.org/grpc"
)

// Emulator is the Bigtable emulator (bttest) serving in this process: an
// in-memory Bigtable for tests and `percolator devcluster`. It keeps
// nothing across a restart and is not for production.
type Emulator struct {
	srv *bttest.Server
}

// StartEmulator starts the emulator on addr ("127.0.0.1:0" for any free
// port). interceptors, if any, see every call it serves (tests inject
// faults with them).
func StartEmulator(addr string, interceptors ...grpc.UnaryServerInterceptor) (*Emulator, error) {
	var x exclusion
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(append(interceptors, x.unary)...),
		grpc.ChainStreamInterceptor(x.stream),
	}
	srv, err := bttest.NewServer(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("bigtable: start emulator: %w", err)
	}
	return &Emulator{srv: srv}, nil
}

// Addr is the emulator's address, the value of BIGTABLE_EMULATOR_HOST.
func (e *Emulator) Addr() string { return e.srv.Addr }

// Close stops the emulator.
func (e *Emulator) Close() { e.srv.Close() }

// exclusion keeps the emulator's writes from running beside its reads.
// bttest copies a row under the row's lock for a read, but the copy shares
// the row's sorted list of column names, which a write that adds a column
// appends to and sorts in place: a read racing it may skip or repeat a
// column (and the race detector reports it). Reads share the lock; every
// other call takes it alone. Real Bigtable needs none of this.
type exclusion struct{ mu sync.RWMutex }

func (x *exclusion) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return h(ctx, req)
}

// stream runs a streaming call under the lock, holding back what it sends
// until it returned and the lock is released: a client that writes from
// inside a scan's callback (before the scan's stream ends) must not wait
// for a lock that the scan holds. MutateRows is a write.
//
// The lock is taken once the call's request has arrived (the first
// RecvMsg; every streaming call of the Bigtable API is a single request
// and a stream of replies), not when the stream opens: a client stopped
// between sending a stream's headers and its request (SIGSTOP) would
// otherwise hold the lock, and stall every other client, until it runs
// again.
func (x *exclusion) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	b := &bufferedStream{ServerStream: ss, x: x, write: strings.HasSuffix(info.FullMethod, "/MutateRows")}
	err := h(srv, b)
	b.unlock()
	for _, m := range b.held {
		if serr := ss.SendMsg(m); serr != nil {
			return serr
		}
	}
	return err
}

// bufferedStream holds back the messages a handler sends, and takes the
// exclusion lock when the handler has read its request.
type bufferedStream struct {
	grpc.ServerStream
	x      *exclusion
	write  bool // take the lock alone
	locked bool
	held   []any
}

func (b *bufferedStream) RecvMsg(m any) error {
	if err := b.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if !b.locked {
		b.locked = true
		if b.write {
			b.x.mu.Lock()
		} else {
			b.x.mu.RLock()
		}
	}
	return nil
}

func (b *bufferedStream) unlock() {
	switch {
	case !b.locked:
	case b.write:
		b.x.mu.Unlock()
	default:
		b.x.mu.RUnlock()
	}
	b.locked = false
}

func (b *bufferedStream) SendMsg(m any) error {
	b.held = append(b.held, m)
	return nil
}
