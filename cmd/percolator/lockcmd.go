package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/holding"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
	"github.com/seed-992972ee/percolator/lock"
)

// lockCmd is `lock`: leased locks on the database's store (package
// lock), its commands acquire, release and show.
func lockCmd() *cobra.Command {
	var tg cli.Target
	c := &cobra.Command{
		Use:   "lock <command> NAME",
		Short: "leased locks: acquire (and run a command holding it), release, show",
		Long: `Leased locks with fencing tokens on the database's store: acquire one (and
run a command holding it), release a lease acquire printed, or show a
lock's holder and waiters.`,
		Example: `  percolator lock acquire nightly --dir D --ttl 1m -- ./backup.sh
  percolator lock show nightly --dir D`,
		Args: cobra.ArbitraryArgs,
		RunE: cli.GroupRun,
	}
	tg.Register(c.PersistentFlags(), "database directory")
	c.AddCommand(lockAcquireCmd(&tg), lockReleaseCmd(&tg), lockShowCmd(&tg))
	return c
}

// openLocker opens the target's database (an embedded one created if
// create) and a Locker on its store.
func openLocker(ctx context.Context, tg *cli.Target, create bool) (*lock.Locker, func(), error) {
	if err := tg.Validate(); err != nil {
		return nil, nil, err
	}
	db, err := tg.Open(ctx, create && tg.Dir != "")
	if err != nil {
		return nil, nil, err
	}
	lk, err := lock.New(db.Store(), lock.Options{Holder: fmt.Sprintf("pid-%d", os.Getpid())})
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return lk, func() { _ = db.Close() }, nil
}

// lockAcquireCmd is `lock acquire NAME [-- COMMAND ARGS...]`.
func lockAcquireCmd(tg *cli.Target) *cobra.Command {
	var ttl, wait time.Duration
	var jsonOut bool
	c := &cobra.Command{
		Use:   "acquire NAME [-- COMMAND ARGS...]",
		Short: "wait for the lock; run COMMAND holding it, or print the lease",
		Long: `Wait for the lock. With a COMMAND, run it holding the lease (renewed every
TTL/3; its token in $PERCOLATOR_LOCK_TOKEN, the name in $PERCOLATOR_LOCK_NAME),
then release it and exit with the command's status; the command is stopped
if the lease is lost. Without one, print the lease (token, id, expiry) and
leave it to expire or to lock release.`,
		Example: `  percolator lock acquire nightly --dir D --ttl 1m -- ./backup.sh
  percolator lock acquire nightly --server 127.0.0.1:7420 --wait 10s`,
		Args: func(c *cobra.Command, args []string) error {
			n := c.ArgsLenAtDash() // the arguments before "--"
			if n < 0 {
				n = len(args)
			}
			if n != 1 {
				return cli.Usagef("want one lock NAME (then -- and a command), got %q", args)
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case ttl <= 0:
				return cli.Usagef("--ttl must be positive")
			case wait < 0:
				return cli.Usagef("--wait must not be negative")
			case jsonOut && len(args) > 1:
				return cli.Usagef("--json prints the lease, which acquire prints only without a COMMAND")
			}
			return lockAcquire(c, tg, args[0], args[1:], ttl, wait, jsonOut)
		},
	}
	c.Flags().DurationVar(&ttl, "ttl", 30*time.Second, "the lease's length")
	c.Flags().DurationVar(&wait, "wait", 0, "give up waiting after this long (0: wait until a signal)")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the lease as JSON (without a COMMAND)")
	return c
}

// lockAcquire acquires the lock name and prints the lease, or runs
// command holding it.
func lockAcquire(c *cobra.Command, tg *cli.Target, name string, command []string, ttl, wait time.Duration, jsonOut bool) error {
	ctx := c.Context()
	lk, closeDB, err := openLocker(ctx, tg, true)
	if err != nil {
		return err
	}
	defer closeDB()
	actx := ctx
	if wait > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	l, err := lk.Acquire(actx, name, ttl)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("%w: lock %s not acquired within %s", cli.ErrFailed, name, wait)
	}
	if err != nil {
		return err
	}
	if len(command) == 0 {
		return view.Lease(c.OutOrStdout(), l, jsonOut)
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.InOrStdin(), c.OutOrStdout(), c.ErrOrStderr()
	err = holding.Run(ctx, lk, l, cmd, c.ErrOrStderr())
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return cli.ExitCode(ee.ExitCode()) // the command's status, passed on
	}
	return err
}

// lockReleaseCmd is `lock release NAME --token T --id I`.
func lockReleaseCmd(tg *cli.Target) *cobra.Command {
	var token, id uint64
	c := &cobra.Command{
		Use:     "release NAME --token T --id I",
		Short:   "release a lease acquire printed",
		Example: "  percolator lock release nightly --dir D --token 7 --id 1234",
		Args:    cli.ArgsBetween(1, 1, "one lock NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			if token == 0 || id == 0 {
				return cli.Usagef("--token and --id are required (acquire prints them)")
			}
			ctx, name := c.Context(), args[0]
			lk, closeDB, err := openLocker(ctx, tg, false)
			if err != nil {
				return err
			}
			defer closeDB()
			l, err := lk.Lease(name, token, id, 30*time.Second) // a lease to release: its length does not matter
			if err != nil {
				return err
			}
			if err := lk.Release(ctx, l); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "released %s token %d\n", name, token)
			return nil
		},
	}
	c.Flags().Uint64Var(&token, "token", 0, "the lease's token (acquire prints it)")
	c.Flags().Uint64Var(&id, "id", 0, "the lease's id (acquire prints it)")
	return c
}

// lockShowCmd is `lock show NAME`.
func lockShowCmd(tg *cli.Target) *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:     "show NAME",
		Short:   "holder, token, expiry and waiters",
		Example: "  percolator lock show nightly --dir D\n  percolator lock show nightly --dir D --json",
		Args:    cli.ArgsBetween(1, 1, "one lock NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			ctx, name, w := c.Context(), args[0], c.OutOrStdout()
			lk, closeDB, err := openLocker(ctx, tg, false)
			if err != nil {
				return err
			}
			defer closeDB()
			st, err := lk.Show(ctx, name)
			if err != nil {
				return err
			}
			if jsonOut {
				return view.LockStateJSON(w, name, st)
			}
			view.LockState(w, name, st)
			return nil
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the state as JSON")
	return c
}
