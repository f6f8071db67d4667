package rpc_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/internal/faultproxy"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
)

// hang bounds a wait that only a hang would reach; no test here times
// the machine.
const hang = 30 * time.Second

// down is an attempt of a call to a server that is down.
func down(n *atomic.Int32) func(context.Context, int) error {
	return func(context.Context, int) error {
		n.Add(1)
		return status.Error(codes.Unavailable, "connection refused (simulated)")
	}
}

// Within an operation the retry budget counts from the last answer the
// server gave the operation (or its start), not from each call's start:
// once it is spent, the operation's later calls fail at once, without an
// attempt, so a caller that re-sends (txn does) does not multiply it.
// Outside the operation, and under WithCleanup, a call has its own
// budget. An answer restarts the count.
func TestOperationBudget(t *testing.T) {
	srv := servertest.Start(t, server.Options{}, "")
	const budget = 300 * time.Millisecond
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{RetryBudget: budget})
	ctx := rpc.WithOperation(context.Background())

	var first, later, outside atomic.Int32
	err := conn.Do(ctx, down(&first))
	if !errors.Is(err, rpc.ErrUnavailable) || !strings.Contains(err.Error(), srv.Addr) || first.Load() < 2 {
		t.Fatalf("first call of the operation: %v after %d attempts; want ErrUnavailable naming %s after retries", err, first.Load(), srv.Addr)
	}
	for range 4 { // a caller re-sending
		err = conn.Do(ctx, down(&later))
	}
	if later.Load() != 0 || !errors.Is(err, rpc.ErrUnavailable) || !strings.Contains(err.Error(), "operation's retry budget") {
		t.Fatalf("calls after the operation's budget was spent: %d attempts, %v; want none, and ErrUnavailable saying the operation's budget is spent", later.Load(), err)
	}
	if err := conn.Do(context.Background(), down(&outside)); outside.Load() < 2 || !errors.Is(err, rpc.ErrUnavailable) {
		t.Fatalf("a call outside the operation: %d attempts, %v; want its own budget", outside.Load(), err)
	}
	cleanup := rpc.WithCleanup(context.Background())
	for i := range 2 {
		var n atomic.Int32
		if err := conn.Do(cleanup, down(&n)); n.Load() < 2 || !errors.Is(err, rpc.ErrUnavailable) {
			t.Fatalf("call %d under WithCleanup: %d attempts, %v; want a budget of its own", i, n.Load(), err)
		}
	}

	// An answer restarts the operation's count.
	ctx = rpc.WithOperation(context.Background())
	var a, b atomic.Int32
	_ = conn.Do(ctx, down(&a))
	fresh := rpc.WithOperation(context.Background())
	err = conn.Do(fresh, func(context.Context, int) error {
		if b.Add(1) < 3 {
			return status.Error(codes.Unavailable, "restarting (simulated)")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("a call answered on its third attempt: %v", err)
	}
	var c atomic.Int32
	if err := conn.Do(fresh, down(&c)); c.Load() < 2 || !errors.Is(err, rpc.ErrUnavailable) {
		t.Fatalf("after an answer, a failing call of the operation made %d attempts (%v); want a budget of its own again", c.Load(), err)
	}

	// Nested: the inner operation is bounded by the outer's budget, and an
	// answer counts for both.
	outer := rpc.WithOperation(context.Background())
	_ = conn.Do(outer, down(&atomic.Int32{}))
	var inner atomic.Int32
	if err := conn.Do(rpc.WithOperation(outer), down(&inner)); inner.Load() != 0 || !errors.Is(err, rpc.ErrUnavailable) {
		t.Fatalf("a call of an operation nested in a spent one: %d attempts, %v; want none", inner.Load(), err)
	}
}

// blackholed is an attempt that never gets an answer: it waits for its
// context, as a call on a blackholed connection does.
func blackholed(started chan<- struct{}) func(context.Context, int) error {
	return func(actx context.Context, attempt int) error {
		if attempt == 0 && started != nil {
			close(started)
		}
		<-actx.Done()
		return status.FromContextError(actx.Err()).Err()
	}
}

// When an operation's context ends, its cleanup (calls made under
// context.WithoutCancel) has the cleanup budget left, attempts in flight
// included, however long the call timeout and retry budget are: a
// cancelled operation ends within it whatever the server does.
func TestCleanupBudgetAfterCancel(t *testing.T) {
	srv := servertest.Start(t, server.Options{}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{CallTimeout: time.Hour, RetryBudget: time.Hour, CleanupBudget: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	opCtx := rpc.WithOperation(ctx)
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- conn.Do(context.WithoutCancel(opCtx), blackholed(started)) }()
	<-started
	cancel()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, rpc.ErrUnavailable) || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "cleanup") {
			t.Fatalf("%s: %v; want ErrUnavailable and context.Canceled, saying the cleanup was cut short", what, err)
		}
	}
	select {
	case err := <-done:
		check("an attempt in flight when the operation was cancelled", err)
	case <-time.After(hang):
		t.Fatal("an attempt of a cancelled operation's cleanup ran on past its cleanup budget")
	}
	go func() { done <- conn.Do(context.WithoutCancel(opCtx), blackholed(nil)) }()
	select {
	case err := <-done:
		check("a cleanup call begun after the cancellation", err)
	case <-time.After(hang):
		t.Fatal("a cleanup call of a cancelled operation ran on past its cleanup budget")
	}
	// The operation's own calls end at once with its context.
	if err := conn.Do(opCtx, blackholed(nil)); !errors.Is(err, context.Canceled) {
		t.Fatalf("a call with the cancelled context: %v", err)
	}
}

// On a blackholed connection (TCP stays open, nothing comes back) each
// attempt is bounded by what is left of the budget, not only by the call
// timeout: the call fails within the budget with ErrUnavailable naming the
// address.
func TestBlackholeBoundedByBudget(t *testing.T) {
	srv := servertest.Start(t, server.Options{}, "")
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	conn := servertest.Dial(t, p.Addr(), rpc.DialOptions{CallTimeout: time.Hour, RetryBudget: 500 * time.Millisecond})
	p.SetBlackhole(true)
	defer p.SetBlackhole(false)
	done := make(chan error, 1)
	go func() {
		done <- conn.Do(context.Background(), func(actx context.Context, _ int) error {
			_, err := conn.Storage.Ping(actx, &rpcpb.PingRequest{})
			return err
		})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, rpc.ErrUnavailable) || !strings.Contains(err.Error(), p.Addr()) {
			t.Fatalf("a call through a blackhole: %v; want ErrUnavailable naming %s", err, p.Addr())
		}
	case <-time.After(hang):
		t.Fatal("a call through a blackhole outlived its retry budget")
	}
}

// Dial retries within the retry budget while the server is restarting
// (its port refusing connections), instead of failing at once.
func TestDialRetriesWhileServerRestarts(t *testing.T) {
	addr := freeAddr(t)
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int32
	go func() { // the port is open, and closes every connection at once
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			refused.Add(1)
			c.Close()
		}
	}()
	done := make(chan error, 1)
	go func() {
		c, err := rpc.Dial(context.Background(), addr, rpc.DialOptions{RetryBudget: time.Hour})
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	for deadline := time.Now().Add(hang); refused.Load() < 3; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("Dial returned while the server restarted: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("Dial did not try the restarting server")
		}
	}
	lis.Close()
	servertest.Start(t, server.Options{}, addr)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Dial once the server is back: %v", err)
		}
	case <-time.After(hang):
		t.Fatal("Dial did not connect to the restarted server")
	}

	// It honours its context.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := rpc.Dial(ctx, freeAddr(t), rpc.DialOptions{RetryBudget: time.Hour})
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Dial with its context cancelled: %v", err)
		}
	case <-time.After(hang):
		t.Fatal("Dial ignored its context")
	}
}

// A connection cut during the handshake (a server restarting, a proxy
// closing it) is not blamed on TLS; a TLS server dialed in plaintext is,
// and fails at once rather than after the retry budget.
func TestDialTLSHintOnlyForTLS(t *testing.T) {
	plain := servertest.Start(t, server.Options{}, "")
	p, err := faultproxy.New(plain.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetRefuse(true) // accepts, and closes each connection at once
	_, err = rpc.Dial(context.Background(), p.Addr(), rpc.DialOptions{RetryBudget: 500 * time.Millisecond})
	if !errors.Is(err, rpc.ErrUnavailable) || strings.Contains(err.Error(), "TLS") {
		t.Fatalf("Dial through a proxy cutting every connection: %v; want ErrUnavailable without a TLS hint", err)
	}

	cert, _ := selfSigned(t)
	secure := servertest.Start(t, server.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}, "")
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	_, err = rpc.Dial(ctx, secure.Addr, rpc.DialOptions{RetryBudget: time.Hour})
	if ctx.Err() != nil {
		t.Fatalf("Dial of a TLS server in plaintext was retried: %v", err)
	}
	if !errors.Is(err, rpc.ErrUnavailable) || !strings.Contains(err.Error(), "serves TLS") || !strings.Contains(err.Error(), secure.Addr) {
		t.Fatalf("Dial of a TLS server in plaintext: %v; want ErrUnavailable naming %s and saying it serves TLS", err, secure.Addr)
	}
}
