package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
	"github.com/seed-992972ee/percolator/queue"
)

// queueCmd is `queue`: work queues on the database's store (package
// queue), its commands push, consume, stats and dead.
func queueCmd() *cobra.Command {
	var tg cli.Target
	c := &cobra.Command{
		Use:   "queue <command> NAME",
		Short: "work queues: push, consume (pop under a lease, print, ack), stats, dead",
		Long: `Work queues on the database's store, at least once under leases: push items,
consume them (pop under a lease, print, ack), show a queue's depth, and
list or requeue its dead letters.`,
		Example: `  seq 100 | percolator queue push jobs --dir D
  percolator queue consume jobs --dir D --count 10`,
		Args: cobra.ArbitraryArgs,
		RunE: cli.GroupRun,
	}
	tg.Register(c.PersistentFlags(), "database directory")
	c.AddCommand(queuePushCmd(&tg), queueConsumeCmd(&tg), queueStatsCmd(&tg), queueDeadCmd(&tg))
	return c
}

// openQueue checks the queue's name and opens the target's database (an
// embedded one created if create) and the queues on its store.
func openQueue(ctx context.Context, tg *cli.Target, name string, create bool) (*queue.Queue, func(), error) {
	if err := queue.CheckName(name); err != nil {
		return nil, nil, cli.UsageError{Msg: err.Error()}
	}
	if err := tg.Validate(); err != nil {
		return nil, nil, err
	}
	db, err := tg.Open(ctx, create && tg.Dir != "")
	if err != nil {
		return nil, nil, err
	}
	q, err := queue.New(db.Store(), queue.Options{})
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return q, func() { _ = db.Close() }, nil
}

// queuePushCmd is `queue push NAME [ITEM...]`.
func queuePushCmd(tg *cli.Target) *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:     "push NAME [ITEM...]",
		Short:   "push each ITEM, or each line of stdin when none",
		Example: "  percolator queue push jobs a b c --dir D\n  seq 100 | percolator queue push jobs --dir D",
		Args:    cli.ArgsBetween(1, -1, "a queue NAME, then the items"),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			q, closeDB, err := openQueue(ctx, tg, args[0], true)
			if err != nil {
				return err
			}
			defer closeDB()
			n, err := queuePush(ctx, q, args[0], args[1:], c.InOrStdin())
			if err != nil {
				return err
			}
			return view.Pushed(c.OutOrStdout(), n, jsonOut)
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the count pushed as JSON")
	return c
}

// queueConsumeCmd is `queue consume NAME`.
func queueConsumeCmd(tg *cli.Target) *cobra.Command {
	var count int
	var idle, ttl time.Duration
	var jsonOut bool
	c := &cobra.Command{
		Use:   "consume NAME",
		Short: "pop items under a lease, print each body on its own line, then ack it",
		Long: `Pop items under a lease, print each body on its own line, then ack it (at
least once: a consumer killed between the two leaves the item to come
again once its lease expires); stop after --count items, or after
--idle-exit with nothing to do (default: run until a signal).`,
		Example: "  percolator queue consume jobs --dir D --count 10 --ttl 1m",
		Args:    cli.ArgsBetween(1, 1, "one queue NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case count < 0:
				return cli.Usagef("--count must not be negative")
			case idle < 0:
				return cli.Usagef("--idle-exit must not be negative")
			case ttl < time.Millisecond:
				return cli.Usagef("--ttl must be at least 1ms")
			}
			ctx := c.Context()
			q, closeDB, err := openQueue(ctx, tg, args[0], false)
			if err != nil {
				return err
			}
			defer closeDB()
			return queueConsume(ctx, q, args[0], queue.ConsumeOptions{TTL: ttl, Count: count, Idle: idle}, jsonOut, c.OutOrStdout())
		},
	}
	c.Flags().IntVar(&count, "count", 0, "stop after this many items (0: no limit)")
	c.Flags().DurationVar(&idle, "idle-exit", 0, "stop after this long with nothing to do (0: never)")
	c.Flags().DurationVar(&ttl, "ttl", 30*time.Second, "the lease on each item")
	c.Flags().BoolVar(&jsonOut, "json", false, "print each item as JSON on its own line (id, body, deliveries, pushed_at)")
	return c
}

// queueStatsCmd is `queue stats NAME`.
func queueStatsCmd(tg *cli.Target) *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:     "stats NAME",
		Short:   "depth, in flight, oldest item's age, dead letters",
		Example: "  percolator queue stats jobs --dir D\n  percolator queue stats jobs --dir D --json",
		Args:    cli.ArgsBetween(1, 1, "one queue NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			q, closeDB, err := openQueue(ctx, tg, args[0], false)
			if err != nil {
				return err
			}
			defer closeDB()
			s, err := q.Stats(ctx, args[0])
			if err != nil {
				return err
			}
			return view.QueueStats(c.OutOrStdout(), s, jsonOut)
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the counts as JSON")
	return c
}

// queueDeadCmd is `queue dead NAME [--requeue]`.
func queueDeadCmd(tg *cli.Target) *cobra.Command {
	var requeue, jsonOut bool
	c := &cobra.Command{
		Use:     "dead NAME",
		Short:   "list the dead letters (ID, deliveries, body), or --requeue them",
		Example: "  percolator queue dead jobs --dir D\n  percolator queue dead jobs --dir D --requeue",
		Args:    cli.ArgsBetween(1, 1, "one queue NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			q, closeDB, err := openQueue(ctx, tg, args[0], false)
			if err != nil {
				return err
			}
			defer closeDB()
			return queueDead(ctx, q, args[0], requeue, jsonOut, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	c.Flags().BoolVar(&requeue, "requeue", false, "put the dead letters back in the queue")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the dead letters (or those requeued) as JSON")
	return c
}

// queueDead lists the dead letters, or puts them back in the queue.
func queueDead(ctx context.Context, q *queue.Queue, name string, requeue, jsonOut bool, stdout, stderr io.Writer) error {
	dead, err := q.Dead(ctx, name, 0)
	if err != nil {
		return err
	}
	if len(dead) == 0 {
		fmt.Fprintln(stderr, "no dead letters")
	}
	if !requeue {
		return view.DeadLetters(stdout, dead, jsonOut)
	}
	var ids []string
	for _, d := range dead {
		if err := q.Requeue(ctx, name, d.ID); err != nil && !errors.Is(err, queue.ErrNotDead) {
			_ = view.RequeuedItems(stdout, ids, jsonOut) // what was done before the failure
			return err
		}
		ids = append(ids, d.ID)
	}
	return view.RequeuedItems(stdout, ids, jsonOut)
}

// queuePush pushes each item, or each line of stdin when there are none,
// and returns how many it pushed.
func queuePush(ctx context.Context, q *queue.Queue, name string, items []string, stdin io.Reader) (int, error) {
	n := 0
	push := func(body string) error {
		_, err := q.PushUntilKnown(ctx, name, []byte(body), 5)
		if err == nil {
			n++
		}
		return err
	}
	if len(items) > 0 {
		for _, it := range items {
			if err := push(it); err != nil {
				return n, err
			}
		}
	} else {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64*1024), queue.MaxBodySize+1)
		for sc.Scan() {
			if err := push(sc.Text()); err != nil {
				return n, err
			}
		}
		if err := sc.Err(); err != nil {
			return n, fmt.Errorf("reading items: %w (after %d pushed)", err, n)
		}
	}
	return n, nil
}

// queueConsume prints each item's body on its own line (or the item as
// JSON on one line), then acks it (queue.Consume).
func queueConsume(ctx context.Context, q *queue.Queue, name string, o queue.ConsumeOptions, jsonOut bool, stdout io.Writer) error {
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	return q.Consume(ctx, name, o, func(d *queue.Delivery) error {
		if err := view.Delivery(w, d, jsonOut); err != nil {
			return err
		}
		return w.Flush()
	})
}
