package verify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/history"
	"github.com/seed-992972ee/percolator/workload"
)

// ClientOptions are one client process's: it opens its own DB handle and
// runs Threads logical processes of the workload until its context ends,
// appending every event to History.
type ClientOptions struct {
	Workload string
	Prefix   string // the run's row prefix
	// History is the file the events are appended to, one JSON line each
	// and one write call each, so a SIGKILL loses at most the line being
	// written.
	History string
	// ProcessBase is the first process id; the processes of one client
	// are ProcessBase+0 .. ProcessBase+Threads-1, and a process whose
	// operation ended unknown goes on under a fresh id (+Threads), below
	// ProcessBase+ProcessSpan.
	ProcessBase int
	Threads     int
	Seed        uint64
	// Final makes the client perform the workload's final read once, on
	// one process, and return.
	Final bool
	// OpTimeout bounds each operation; one that runs out is unknown.
	OpTimeout time.Duration
	// Workers runs the workload's workers (workload.Worked) in this
	// client too: on an embedded store, which has one owner, they cannot
	// run elsewhere.
	Workers bool
	// Open opens the DB (again after it failed or closed).
	Open func(context.Context) (*percolator.DB, error)
}

// ProcessSpan is how many process ids one client start may use.
const ProcessSpan = 1_000_000

// valueSpan is how many unique values one client start may hand out.
const valueSpan = 1 << 40

// recorder appends events to the history file.
type recorder struct {
	mu  sync.Mutex
	f   *os.File
	enc *history.Encoder
	err error
}

func (r *recorder) write(o history.Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = r.enc.Write(o)
	}
}

// RunClient runs one client process until ctx ends.
func RunClient(ctx context.Context, o ClientOptions) error {
	w, err := workload.NewChecked(o.Workload, workload.CheckedOptions{Prefix: o.Prefix, ValueBase: int64(o.ProcessBase/ProcessSpan) * valueSpan})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(o.History, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	rec := &recorder{f: f, enc: history.NewEncoder(f)}
	c := &client{o: o, w: w, rec: rec}
	err = c.run(ctx)
	return errors.Join(err, rec.err, f.Close())
}

// client is one client process's state: its DB, reopened when it fails.
type client struct {
	o   ClientOptions
	w   workload.Checked
	rec *recorder

	mu struct {
		sync.Mutex
		db *percolator.DB
	}
}

func (c *client) run(ctx context.Context) error {
	defer c.closeDB()
	if err := c.setup(ctx); err != nil {
		return err
	}
	if ww, ok := c.w.(workload.Worked); ok && c.o.Workers {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			work(wctx, ww, c.db, c.dropDB)
		}()
		defer func() { cancel(); <-done }()
	}
	if c.o.Final {
		f, mops := c.w.Final()
		if f == "" {
			return nil
		}
		return c.final(ctx, f, mops)
	}
	var wg sync.WaitGroup
	for t := range c.o.Threads {
		wg.Go(func() { c.thread(ctx, t) })
	}
	wg.Wait()
	return nil
}

// setup opens the DB and runs the workload's setup, retrying until ctx
// ends (a server being restarted by the nemesis).
func (c *client) setup(ctx context.Context) error {
	for {
		db, err := c.db(ctx)
		if err == nil {
			err = c.w.Setup(ctx, db)
		}
		if err == nil || ctx.Err() != nil {
			return err
		}
		c.dropDB(db)
		if !sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// finalTimeout bounds the final read, which may wait for work to catch
// up (the observers').
const finalTimeout = 90 * time.Second

// final performs the final read until it succeeds or ctx ends.
func (c *client) final(ctx context.Context, f string, mops []history.Mop) error {
	c.o.OpTimeout = max(c.o.OpTimeout, finalTimeout)
	for p := c.o.ProcessBase; ctx.Err() == nil; p += c.o.Threads {
		if c.op(ctx, p, f, mops) == history.OK {
			return nil
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return fmt.Errorf("verify: the final read did not succeed: %w", ctx.Err())
}

// thread is one logical process: operations one after another, under a
// fresh process id after one whose outcome is unknown.
func (c *client) thread(ctx context.Context, t int) {
	rng := rand.New(rand.NewPCG(c.o.Seed, uint64(c.o.ProcessBase+t)))
	p := c.o.ProcessBase + t
	for ctx.Err() == nil {
		f, mops := c.w.Next(rng)
		if c.op(ctx, p, f, mops) == history.Info {
			p += c.o.Threads
		}
	}
}

// op records one operation's invocation, performs it and records its
// completion, returning its outcome. With no DB to be had (a server being
// restarted) nothing is invoked and it returns Fail after a pause.
func (c *client) op(ctx context.Context, p int, f string, mops []history.Mop) history.Type {
	db, err := c.db(ctx)
	if err != nil {
		sleep(ctx, 100*time.Millisecond)
		return history.Fail
	}
	c.rec.write(history.Op{Process: p, Type: history.Invoke, F: f, Time: history.Now(), Value: mops})
	octx, cancel := context.WithTimeout(ctx, c.o.OpTimeout)
	out, err := c.w.Apply(octx, db, f, mops)
	cancel()
	ev := history.Op{Process: p, Type: workload.Outcome(err, readOnly(f)), F: f, Time: history.Now(), Value: out}
	if err != nil {
		ev.Error = err.Error()
		if reopen(err) {
			c.dropDB(db)
		}
	}
	c.rec.write(ev)
	return ev.Type
}

// work runs the workload's workers on the DB db returns, again after it
// fails, until ctx ends; drop discards a DB that failed.
func work(ctx context.Context, w workload.Worked, db func(context.Context) (*percolator.DB, error), drop func(*percolator.DB)) {
	for ctx.Err() == nil {
		d, err := db(ctx)
		if err == nil {
			err = w.Work(ctx, d)
			if err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "verify: workers: %v\n", err)
				if reopen(err) {
					drop(d)
				}
			}
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// WorkerOptions are one worker process's: it opens its own DB handle and
// runs the workload's workers until its context ends.
type WorkerOptions struct {
	Workload string
	Prefix   string // the run's row prefix
	// OpTimeout bounds opening the DB.
	OpTimeout time.Duration
	Open      func(context.Context) (*percolator.DB, error)
}

// RunWorker runs one worker process until ctx ends.
func RunWorker(ctx context.Context, o WorkerOptions) error {
	w, err := workload.NewChecked(o.Workload, workload.CheckedOptions{Prefix: o.Prefix})
	if err != nil {
		return err
	}
	ww, ok := w.(workload.Worked)
	if !ok {
		return fmt.Errorf("%w: the %s workload has no workers", ErrInvalidArgument, o.Workload)
	}
	c := &client{o: ClientOptions{OpTimeout: o.OpTimeout, Open: o.Open}}
	defer c.closeDB()
	work(ctx, ww, c.db, c.dropDB)
	return nil
}

// readOnly reports whether operations of function f write nothing.
func readOnly(f string) bool { return f == "read" }

// reopen reports whether err says the DB handle is no use any more.
func reopen(err error) bool {
	return errors.Is(err, percolator.ErrClosed) || errors.Is(err, percolator.ErrInUse) || errors.Is(err, percolator.ErrStoreFailed)
}

// db returns the open DB, opening it if needed.
func (c *client) db(ctx context.Context) (*percolator.DB, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.db != nil {
		return c.mu.db, nil
	}
	octx, cancel := context.WithTimeout(ctx, c.o.OpTimeout)
	defer cancel()
	db, err := c.o.Open(octx)
	if err != nil {
		return nil, err
	}
	c.mu.db = db
	return db, nil
}

// dropDB closes db if it is still the client's, so that the next
// operation opens a new one.
func (c *client) dropDB(db *percolator.DB) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if db != nil && c.mu.db == db {
		c.mu.db = nil
		go func() { _ = db.Close() }()
	}
}

func (c *client) closeDB() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.db != nil {
		_ = c.mu.db.Close()
		c.mu.db = nil
	}
}

// sleep waits d or until ctx ends, reporting whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
