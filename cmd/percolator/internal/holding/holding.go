// Package holding runs a command while holding a lease of package lock,
// for percolator lock acquire NAME -- COMMAND.
//
// The command must not act without the lock, nor outlive its lease:
//
//  1. The lease is renewed every third of its TTL, by this process's
//     clock, each renewal given up at the lease's deadline (too late to
//     let the holder go on).
//  2. When the lease ends by this process's clock (a renewal refused, or
//     none answered in time) the command is stopped: SIGTERM, which a
//     shell obeys at once (unlike a SIGINT while it waits for a command),
//     then SIGKILL after 2s; Run returns ErrLeaseLost.
//  3. A signal to this process (its context ending) is passed on to the
//     command as SIGINT, and the lease is still renewed until the command
//     exits.
//  4. Once the command exited, the lease is released.
package holding

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/lock"
)

// ErrLeaseLost: the lease ended before the command did, which was
// stopped.
var ErrLeaseLost = errors.New("lease lost")

// Run runs cmd while renewing l, then releases l, and returns cmd's
// result (an *exec.ExitError when it failed), or ErrLeaseLost. It gives
// cmd the lease's token and name ($PERCOLATOR_LOCK_TOKEN,
// $PERCOLATOR_LOCK_NAME). When ctx ends, cmd is sent SIGINT and the lease
// is still renewed until cmd exits. A release that fails is reported on
// stderr: the lease then expires by itself.
func Run(ctx context.Context, lk *lock.Locker, l *lock.Lease, c *exec.Cmd, stderr io.Writer) error {
	if c.Env == nil {
		c.Env = os.Environ()
	}
	c.Env = append(c.Env, "PERCOLATOR_LOCK_TOKEN="+strconv.FormatUint(l.Token, 10), "PERCOLATOR_LOCK_NAME="+l.Name)
	if err := c.Start(); err != nil {
		_ = lk.Release(context.WithoutCancel(ctx), l)
		return err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	runErr, err := hold(ctx, lk, l, c, done)
	if err != nil {
		return err
	}
	if err := lk.Release(context.WithoutCancel(ctx), l); err != nil {
		const cmd = "percolator lock acquire"
		fmt.Fprintf(stderr, "%s: releasing %s: %s (the lease expires by itself)\n", cmd, l.Name, cli.Message(cmd, err))
	}
	return runErr
}

// hold renews l until the command c exits (its Wait's result arrives on
// done) and returns that result; or, when the lease ends first, stops c
// and returns the error saying so.
func hold(ctx context.Context, lk *lock.Locker, l *lock.Lease, c *exec.Cmd, done <-chan error) (runErr, err error) {
	every := time.NewTicker(max(l.TTL()/3, 10*time.Millisecond)) // by this process's clock, not the store's expiry
	defer every.Stop()
	end := time.NewTimer(time.Until(l.Deadline()))
	defer end.Stop()
	interrupted := ctx.Done()
	for {
		select {
		case runErr = <-done:
			return runErr, nil
		case <-interrupted:
			_ = c.Process.Signal(os.Interrupt)
			interrupted = nil // renewing on until c exits
		case <-every.C:
			if err = renewBy(context.WithoutCancel(ctx), lk, l); err == nil && l.Valid() {
				end.Reset(time.Until(l.Deadline()))
				continue
			}
			stopCommand(c, done)
			return nil, fmt.Errorf("%w: lock %s (%v); the command was stopped", ErrLeaseLost, l.Name, err)
		case <-end.C:
			stopCommand(c, done)
			return nil, fmt.Errorf("%w: lock %s (no renewal in time); the command was stopped", ErrLeaseLost, l.Name)
		}
	}
}

// renewBy renews l, giving up at the lease's deadline: a renewal that
// has not answered by then is too late to let the holder go on.
func renewBy(ctx context.Context, lk *lock.Locker, l *lock.Lease) error {
	ctx, cancel := context.WithDeadline(ctx, l.Deadline())
	defer cancel()
	return lk.Renew(ctx, l)
}

// stopCommand stops c: SIGTERM (which a shell obeys at once, unlike a
// SIGINT while it waits for a command), then SIGKILL after 2s.
func stopCommand(c *exec.Cmd, done <-chan error) {
	_ = c.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		_ = c.Process.Kill()
		<-done
	}
}
