package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seed-992972ee/percolator/lock"
)

const lockUsage = `usage: percolator lock COMMAND NAME [flags] (--dir D | --server ADDR | --bigtable P/I/T --etcd E)
  acquire NAME [--ttl 30s] [--wait D] [-- COMMAND ARGS...]
        wait for the lock; with a COMMAND, run it holding the lease (renewed
        every TTL/3; its token in $PERCOLATOR_LOCK_TOKEN), then release it and
        exit with the command's status; without one, print the lease
        (token, id, expiry) and leave it to expire or to lock release
  release NAME --token T --id I    release a lease acquire printed
  show NAME                        holder, token, expiry and waiters`

// percolator lock: leased locks on the database's store (package lock).
func runLock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if done, err := helpOnly("lock", lockUsage, args, stderr); done {
		return err
	}
	cmd, args := args[0], args[1:]
	var command []string
	for i, a := range args {
		if a == "--" {
			args, command = args[:i], args[i+1:]
			break
		}
	}
	fs := newFlags("lock "+cmd, stderr)
	var tg target
	tg.register(fs, "database directory")
	ttl := fs.Duration("ttl", 30*time.Second, "the lease's length")
	wait := fs.Duration("wait", 0, "give up waiting after this long (0: wait until a signal)")
	token := fs.Uint64("token", 0, "the lease's token (release)")
	id := fs.Uint64("id", 0, "the lease's id (release)")
	switch cmd {
	case "acquire", "release", "show":
	default:
		fmt.Fprintln(stderr, lockUsage)
		return usagef("lock: unknown command %q", cmd)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usagef("lock %s: one lock NAME is required", cmd)
	}
	name := fs.Arg(0)
	if rest := fs.Args()[1:]; len(rest) > 0 { // flags after NAME
		if err := parseFlags(fs, rest); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return usagef("lock %s: one lock NAME is required, got also %q", cmd, fs.Args())
		}
	}
	switch {
	case *ttl <= 0:
		return usagef("lock %s: --ttl must be positive", cmd)
	case *wait < 0:
		return usagef("lock %s: --wait must not be negative", cmd)
	case cmd == "release" && (*token == 0 || *id == 0):
		return usagef("lock release: --token and --id are required (acquire prints them)")
	case len(command) > 0 && cmd != "acquire":
		return usagef("lock %s: takes no command", cmd)
	}
	if err := tg.validate(); err != nil {
		return err
	}
	db, err := tg.open(ctx, cmd == "acquire" && tg.dir != "")
	if err != nil {
		return err
	}
	defer db.Close()
	lk, err := lock.New(db.Store(), lock.Options{Holder: fmt.Sprintf("pid-%d", os.Getpid())})
	if err != nil {
		return err
	}
	switch cmd {
	case "show":
		st, err := lk.Show(ctx, name)
		if err != nil {
			return err
		}
		switch {
		case st.Token == 0:
			fmt.Fprintf(stdout, "%s: never granted\n", name)
		case st.Held:
			fmt.Fprintf(stdout, "%s: held by %s, token %d, for %s more (store clock)\n", name, st.Holder, st.Token, st.Expiry.Sub(st.Now).Round(time.Millisecond))
		default:
			fmt.Fprintf(stdout, "%s: free (last token %d)\n", name, st.Token)
		}
		if len(st.Waiters) > 0 {
			fmt.Fprintf(stdout, "waiters, in ticket order: %s\n", strings.Join(st.Waiters, " "))
		}
		return nil
	case "release":
		l, err := lk.Lease(name, *token, *id, *ttl)
		if err != nil {
			return err
		}
		if err := lk.Release(ctx, l); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "released %s token %d\n", name, *token)
		return nil
	}
	actx := ctx
	if *wait > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, *wait)
		defer cancel()
	}
	l, err := lk.Acquire(actx, name, *ttl)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("%w: lock %s not acquired within %s", errFailed, name, *wait)
	}
	if err != nil {
		return err
	}
	if len(command) == 0 {
		fmt.Fprintf(stdout, "acquired %s token %d id %d expires %s (store clock)\n", name, l.Token, l.ID, l.Expiry.UTC().Format(time.RFC3339Nano))
		return nil
	}
	return runHolding(ctx, lk, l, command, stdout, stderr)
}

// runHolding runs command while renewing l, then releases it. The
// command must not act without the lock: when the lease ends by this
// process's clock (a renewal refused, or none answered in time) the
// command is stopped (SIGTERM, then SIGKILL). A signal to percolator is
// passed on to the command (SIGINT), and the lease is still renewed until
// the command exits: it must not outlive its lease either.
func runHolding(ctx context.Context, lk *lock.Locker, l *lock.Lease, command []string, stdout, stderr io.Writer) error {
	c := exec.Command(command[0], command[1:]...)
	c.Stdout, c.Stderr, c.Stdin = stdout, stderr, os.Stdin
	c.Env = append(os.Environ(), "PERCOLATOR_LOCK_TOKEN="+strconv.FormatUint(l.Token, 10), "PERCOLATOR_LOCK_NAME="+l.Name)
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
		fmt.Fprintf(stderr, "percolator lock: releasing %s: %v (the lease expires by itself)\n", l.Name, err)
	}
	var ee *exec.ExitError
	if errors.As(runErr, &ee) {
		return exitCode(ee.ExitCode())
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
			return nil, fmt.Errorf("lock %s: lease lost (%v); the command was stopped", l.Name, err)
		case <-end.C:
			stopCommand(c, done)
			return nil, fmt.Errorf("lock %s: lease lost (no renewal in time); the command was stopped", l.Name)
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

// helpOnly handles a command family's arguments that name no command to
// run (none, or help): it prints usage and reports done, with a usage
// error when there were none.
func helpOnly(family, usage string, args []string, stderr io.Writer) (bool, error) {
	if len(args) > 0 && args[0] != "-h" && args[0] != "--help" && args[0] != "help" {
		return false, nil
	}
	fmt.Fprintln(stderr, usage)
	if len(args) == 0 {
		return true, usagef("%s: a command is required", family)
	}
	return true, nil
}
