package verify

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/history"
	"github.com/seed-992972ee/percolator/workload"
)

// RowPrefix is where every run writes: RowPrefix + run id + "/".
const RowPrefix = "verify/"

// Run deploys (or joins) the target, runs the workload in client
// processes under the nemesis for Duration, stops it, performs the final
// read, merges and checks the history and writes the report to Out. The
// report's Result says whether a forbidden anomaly was found; the error
// is for a run that could not be made.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Out == "" || o.Binary == "" {
		return nil, fmt.Errorf("%w: an output directory and the percolator binary are required", ErrInvalidArgument)
	}
	if err := makeOut(o.Out); err != nil {
		return nil, err
	}
	r := &run{o: &o, id: runID(), logs: filepath.Join(o.Out, "logs"), hist: filepath.Join(o.Out, "clients")}
	for _, d := range []string{r.logs, r.hist} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	base, cleanup, err := r.baseDir()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	return r.run(ctx, base)
}

// run is one run's state.
type run struct {
	o          *Options
	id         string // the run's id: its rows are under RowPrefix+id+"/"
	logs, hist string // Out's logs and client histories
	dep        *deployment
	clients    []*proc
	workers    []*proc        // the workload's workers, where they run apart from the clients
	faults     map[string]int // faults injected, by kind and role ("kill server")
}

func (r *run) prefix() string { return RowPrefix + r.id + "/" }

func (r *run) run(ctx context.Context, base string) (*Report, error) {
	dep, err := deploy(ctx, r.o, base, r.logs)
	if err != nil {
		return nil, err
	}
	r.dep = dep
	defer dep.stop()
	if err := r.startClients(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	r.nemesis(ctx)
	elapsed := time.Since(start)
	if err := r.quiesce(ctx); err != nil {
		return nil, err
	}
	err = r.finalRead(ctx)
	r.stopWorkers()
	if err != nil {
		return nil, err
	}
	rep, h, err := r.check(elapsed)
	if err != nil {
		return nil, err
	}
	if r.o.Target == "" {
		if rep.Removed, err = Remove(ctx, r.o.Open, r.prefix()); err != nil {
			return nil, err
		}
	}
	return rep, r.write(h, rep)
}

// baseDir is where a deployed target lives: Dir, or a temporary
// directory removed at the end (verify deletes only what it made).
func (r *run) baseDir() (string, func(), error) {
	if r.o.Target == "" {
		return "", func() {}, nil
	}
	if r.o.Dir != "" {
		return r.o.Dir, func() {}, os.MkdirAll(r.o.Dir, 0o755)
	}
	tmp, err := os.MkdirTemp("", "percolator-verify-")
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { _ = os.RemoveAll(tmp) }, nil
}

// makeOut creates out, refusing one that holds anything: two runs'
// histories must never mix.
func makeOut(out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		return fmt.Errorf("%w: %s", ErrOutExists, out)
	}
	return nil
}

func runID() string {
	var b [6]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// clientProc is client i: each start appends to a history file of its
// own under process ids of its own.
func (r *run) clientProc(i int, final bool) *proc {
	name := "client" + strconv.Itoa(i)
	return &proc{role: "client", name: name, bin: r.o.Binary, logs: r.logs, env: append(append([]string{}, r.o.Env...), r.dep.env...),
		args: func(start int) []string {
			a := []string{"verify", "client", "--workload", r.o.Workload, "--prefix", r.prefix(),
				"--history", filepath.Join(r.hist, fmt.Sprintf("%s.%d.jsonl", name, start)),
				"--process-base", strconv.Itoa((i*10_000 + start + 1) * ProcessSpan),
				"--threads", strconv.Itoa(r.o.Threads), "--seed", strconv.FormatUint(r.o.Seed+uint64(i*10_000+start), 10)}
			if final {
				a = append(a, "--final")
			}
			if r.inClientWorkers() {
				a = append(a, "--workers")
			}
			return r.targetArgs(a, i, start, final)
		}}
}

// workerProc is worker process i of a workload whose workers run apart.
func (r *run) workerProc(i int) *proc {
	return &proc{role: "worker", name: "worker" + strconv.Itoa(i), bin: r.o.Binary, logs: r.logs, env: append(append([]string{}, r.o.Env...), r.dep.env...),
		args: func(start int) []string {
			a := []string{"verify", "worker", "--workload", r.o.Workload, "--prefix", r.prefix()}
			return r.targetArgs(a, workerSkewBase+i, start, false)
		}}
}

// workerSkewBase sets the workers' skews apart from the clients'.
const workerSkewBase = 5_000

// targetArgs appends to a the flags every process on the target takes:
// a skewed clock when asked for (not at the final read), the lease, the
// target's.
func (r *run) targetArgs(a []string, i, start int, final bool) []string {
	if !final && slices.Contains(r.o.Faults, "skew") {
		a = append(a, "--clock-skew", r.skew(i, start).String())
	}
	if r.o.Target == TargetServer || r.o.Target == TargetDistributed || slices.Contains(r.o.Faults, "expire") {
		// A short lease: a killed process's locks are resolved within
		// seconds, not the default 10s, so that reads do not stall on
		// them.
		a = append(a, "--session-ttl", expireTTL.String())
	}
	return append(append(a, r.dep.args...), r.o.ClientFlags...)
}

// worked reports whether the workload has workers (workload.Worked).
func (r *run) worked() bool {
	_, ok := mustChecked(r.o.Workload).(workload.Worked)
	return ok
}

// inClientWorkers reports whether the workload's workers run in the
// client: on an embedded store, which has one owner.
func (r *run) inClientWorkers() bool { return r.worked() && r.o.Target == TargetDir }

// expireTTL is the clients' session lease on the targets verify deploys
// with sessions, and under the expire fault.
const expireTTL = 2 * time.Second

// lockTTL is the clients' lock TTL (percolator.Options.LockTTL's default),
// which the skew fault's skews are measured in.
const lockTTL = 10 * time.Second

// skew is the clock skew of client i's start-th start: none at its first,
// then up to three lock TTLs either way, drawn from the run's seed.
func (r *run) skew(i, start int) time.Duration {
	if start == 0 {
		return 0
	}
	rng := rand.New(rand.NewPCG(r.o.Seed, uint64(i*10_000+start)))
	return time.Duration(rng.Int64N(int64(6*lockTTL))) - 3*lockTTL
}

func (r *run) startClients(ctx context.Context) error {
	if r.worked() && !r.inClientWorkers() {
		for i := range r.o.Workers {
			p := r.workerProc(i)
			if err := p.start(ctx); err != nil {
				return err
			}
			r.workers = append(r.workers, p)
		}
	}
	for i := range r.o.Clients {
		p := r.clientProc(i, false)
		if err := p.start(ctx); err != nil {
			return err
		}
		r.clients = append(r.clients, p)
	}
	return nil
}

// quiesce ends the faults: every process resumed, the deployment's and
// the workers restarted (they go on through the final read), the clients
// stopped.
func (r *run) quiesce(ctx context.Context) error {
	r.dep.heal()
	for _, p := range append(append(r.dep.all(), r.clients...), r.workers...) {
		p.signal(sigCont, 0)
	}
	if err := r.dep.ensureRunning(ctx); err != nil {
		return err
	}
	for _, p := range r.workers {
		if !p.running() {
			if err := p.start(ctx); err != nil {
				return err
			}
		}
	}
	var wg sync.WaitGroup
	for _, c := range r.clients {
		wg.Go(func() { c.stop(30 * time.Second) })
	}
	wg.Wait()
	return nil
}

// stopWorkers ends the worker processes.
func (r *run) stopWorkers() {
	var wg sync.WaitGroup
	for _, p := range r.workers {
		wg.Go(func() { p.stop(10 * time.Second) })
	}
	wg.Wait()
}

// finalRead runs the workload's final read in a client of its own, once
// nothing else runs.
func (r *run) finalRead(ctx context.Context) error {
	f, _ := mustChecked(r.o.Workload).Final()
	if f == "" {
		return nil
	}
	p := r.clientProc(r.o.Clients, true)
	if err := p.start(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	done := p.mu.done
	p.mu.Unlock()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		p.kill()
		return errors.New("verify: the final read did not end within 2 minutes")
	case <-ctx.Done():
		p.kill()
		return ctx.Err()
	}
	if err := p.exitErr(); err != nil {
		return fmt.Errorf("verify: the final read failed (%v):\n%s", err, lastLines(p.logPath(), 20))
	}
	return nil
}

// mustChecked is the checked workload name, known to exist (Validate).
func mustChecked(name string) workload.Checked {
	w, err := workload.NewChecked(name, workload.CheckedOptions{})
	if err != nil {
		panic(err)
	}
	return w
}

// merge reads every client's history and orders them into one.
func (r *run) merge() ([]history.Op, int, error) {
	files, err := filepath.Glob(filepath.Join(r.hist, "*.jsonl"))
	if err != nil {
		return nil, 0, err
	}
	var h []history.Op
	torn := 0
	for _, f := range files {
		ops, err := readHistory(f)
		if errors.Is(err, history.ErrTorn) {
			torn++
		} else if err != nil {
			return nil, 0, fmt.Errorf("verify: %s: %w", f, err)
		}
		h = append(h, ops...)
	}
	history.Sort(h)
	return h, torn, nil
}

func readHistory(path string) ([]history.Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return history.ReadAll(f)
}
