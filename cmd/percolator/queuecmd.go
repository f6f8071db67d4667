package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/seed-992972ee/percolator/queue"
)

const queueUsage = `usage: percolator queue COMMAND NAME [flags] (--dir D | --server ADDR | --bigtable P/I/T --etcd E)
  push NAME [ITEM...]     push each ITEM, or each line of stdin when none
  consume NAME [--count N] [--idle-exit D] [--ttl 30s]
        pop items under a lease, print each body on its own line, then ack
        it; stop after N items, or after D with nothing to do (default:
        run until a signal)
  stats NAME              depth, in flight, oldest item's age, dead letters
  dead NAME [--requeue]   list the dead letters (ID, deliveries, body), or
                          put them back in the queue`

// percolator queue: work queues on the database's store (package queue).
func runQueue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return queueCmd(ctx, args, os.Stdin, stdout, stderr)
}

func queueCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if done, err := helpOnly("queue", queueUsage, args, stderr); done {
		return err
	}
	cmd, args := args[0], args[1:]
	fs := newFlags("queue "+cmd, stderr)
	var tg target
	tg.register(fs, "database directory")
	count := fs.Int("count", 0, "consume: stop after this many items (0: no limit)")
	idle := fs.Duration("idle-exit", 0, "consume: stop after this long with nothing to do (0: never)")
	ttl := fs.Duration("ttl", 30*time.Second, "consume: the lease on each item")
	requeue := fs.Bool("requeue", false, "dead: put the dead letters back in the queue")
	switch cmd {
	case "push", "consume", "stats", "dead":
	default:
		fmt.Fprintln(stderr, queueUsage)
		return usagef("queue: unknown command %q", cmd)
	}
	// NAME and ITEMs may come before or between the flags.
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(pos) == 0:
		return usagef("queue %s: a queue NAME is required", cmd)
	case len(pos) > 1 && cmd != "push":
		return usagef("queue %s: one queue NAME, got also %q", cmd, pos[1:])
	case *count < 0:
		return usagef("queue consume: --count must not be negative")
	case *idle < 0:
		return usagef("queue consume: --idle-exit must not be negative")
	case *ttl < time.Millisecond:
		return usagef("queue consume: --ttl must be at least 1ms")
	}
	name, items := pos[0], pos[1:]
	if err := queue.CheckName(name); err != nil {
		return usagef("queue %s: %v", cmd, err)
	}
	if err := tg.validate(); err != nil {
		return err
	}
	db, err := tg.open(ctx, cmd == "push" && tg.dir != "")
	if err != nil {
		return err
	}
	defer db.Close()
	q, err := queue.New(db.Store(), queue.Options{})
	if err != nil {
		return err
	}
	switch cmd {
	case "push":
		return queuePush(ctx, q, name, items, stdin, stdout)
	case "consume":
		return queueConsume(ctx, q, name, *count, *idle, *ttl, stdout)
	case "stats":
		s, err := q.Stats(ctx, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "depth %d\nin-flight %d\noldest %s\ndead %d\n", s.Depth, s.InFlight, s.Oldest.Round(time.Millisecond), s.Dead)
		return nil
	}
	dead, err := q.Dead(ctx, name, 0)
	if err != nil {
		return err
	}
	for _, d := range dead {
		if *requeue {
			if err := q.Requeue(ctx, name, d.ID); err != nil && !errors.Is(err, queue.ErrNotDead) {
				return err
			}
			fmt.Fprintf(stdout, "requeued %s\n", d.ID)
			continue
		}
		fmt.Fprintf(stdout, "%s\t%d\t%s\n", d.ID, d.Deliveries, d.Body)
	}
	if len(dead) == 0 {
		fmt.Fprintln(stderr, "no dead letters")
	}
	return nil
}

func queuePush(ctx context.Context, q *queue.Queue, name string, items []string, stdin io.Reader, stdout io.Writer) error {
	n := 0
	push := func(body string) error {
		id, err := q.Push(ctx, name, []byte(body))
		// An outcome it could not learn: sent again under its ID, which
		// never pushes it twice (a plain Push would).
		for tries := 0; errors.Is(err, queue.ErrUnknown) && tries < 5 && ctx.Err() == nil; tries++ {
			id, err = q.PushAgain(ctx, name, id, []byte(body))
		}
		if err != nil {
			return err
		}
		n++
		return nil
	}
	if len(items) > 0 {
		for _, it := range items {
			if err := push(it); err != nil {
				return err
			}
		}
	} else {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64*1024), queue.MaxBodySize+1)
		for sc.Scan() {
			if err := push(sc.Text()); err != nil {
				return err
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("reading items: %w (after %d pushed)", err, n)
		}
	}
	fmt.Fprintf(stdout, "pushed %d\n", n)
	return nil
}

// queueConsume pops, prints and acks items. A body is printed before its
// ack (at least once: a consumer killed between the two leaves the item
// to be delivered again once its lease expires).
func queueConsume(ctx context.Context, q *queue.Queue, name string, count int, idle, ttl time.Duration, stdout io.Writer) error {
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	for n := 0; count == 0 || n < count; n++ {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if idle > 0 {
			pctx, cancel = context.WithTimeout(ctx, idle)
		}
		d, err := q.Pop(pctx, name, ttl)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				return nil // idle for --idle-exit
			}
			if ctx.Err() != nil {
				return nil // stopped by a signal
			}
			return err
		}
		w.Write(d.Body)
		w.WriteByte('\n')
		if err := w.Flush(); err != nil {
			return err
		}
		if !d.Valid() {
			continue // printed after its lease ended: it will come again
		}
		if err := q.Ack(context.WithoutCancel(ctx), d); err != nil && !errors.Is(err, queue.ErrNotHeld) {
			return err
		}
	}
	return nil
}
