package verifycmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
	"github.com/seed-992972ee/percolator/txn"
	"github.com/seed-992972ee/percolator/verify"
	"github.com/seed-992972ee/percolator/workload"
)

// Command is `verify`: a checked history of a workload under faults
// (package verify), its verdict printed; exit 1 on a forbidden anomaly.
func Command() *cobra.Command {
	var tg cli.Target
	var o verify.Options
	var faults string
	var cleanup, matrix, jsonOut bool
	var budget time.Duration
	c := &cobra.Command{
		Use:   "verify",
		Short: "check a deployment's transactions by a history recorded under faults",
		Long: `Run a checked workload in several client processes while a nemesis faults
them, record every operation (invoked, then ok, failed or unknown), then
check the history for what snapshot isolation forbids. With --target dir,
server or distributed verify deploys what it tests itself (in --dir or a
temporary directory) and faults every process it started; with --server or
--bigtable/--etcd it checks an existing deployment, faulting only its own
clients, writing only under a row prefix of its own (verify/RUN/), which it
removes at the end; --cleanup removes what killed runs left. The history,
report.json, report.txt and (for a register failure) register.html go to
--out. Exit 1 on any forbidden anomaly.`,
		Example: `  percolator verify --workload list-append --fault kill --duration 30s
  percolator verify --target server --workload bank --out /tmp/v1
  percolator verify --server 127.0.0.1:7420 --workload register --duration 1m
  percolator verify --server 127.0.0.1:7420 --cleanup`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o.Faults = strings.Split(faults, ",")
			if jsonOut && (cleanup || matrix) {
				return cli.Usagef("--json prints a run's verdict: not with --cleanup or --matrix")
			}
			if cleanup {
				return runVerifyCleanup(c, &tg)
			}
			if matrix {
				return runVerifyMatrix(c, &tg, o, budget)
			}
			return runVerify(c, &tg, o, jsonOut)
		},
	}
	fs := c.Flags()
	fs.StringVar(&o.Workload, "workload", "list-append", "the checked workload: "+strings.Join(workload.CheckedNames, ", "))
	fs.StringVar(&faults, "fault", "kill", "faults, comma-separated: kill (SIGKILL and restart), pause (SIGSTOP, then SIGCONT), cut, partition, delay, drop (the network, through a proxy), powercut (--target server), skew (a client restarted with its clock off by up to 3 lock TTLs), expire (a client paused past its session's lease), none")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "how long the workload runs under faults")
	fs.StringVar(&o.Target, "target", "", "deploy and test: dir (embedded store), server (percolator serve), distributed (Bigtable emulator, etcd, two oracles); default dir unless --server or --bigtable")
	fs.IntVar(&o.Clients, "clients", 3, "client processes (1 with --target dir)")
	fs.IntVar(&o.Threads, "threads", 4, "logical processes per client")
	fs.DurationVar(&o.Interval, "interval", time.Second, "mean time between faults")
	fs.Uint64Var(&o.Seed, "seed", 0, "seed of the workload's and the nemesis's choices (default: random)")
	fs.StringVar(&o.Out, "out", "", "directory for the history and the report, new or empty (default: a new temporary directory)")
	fs.BoolVar(&matrix, "matrix", false, "run every workload x fault x target (--workload, --fault and --target, when given, pick one of each) and print a table")
	fs.DurationVar(&budget, "budget", 10*time.Minute, "with --matrix: the wall time the cells' workloads share (each cell gets at least 2s, plus its start and check)")
	fs.BoolVar(&jsonOut, "json", false, "print the verdict as JSON (report.json in --out has the anomalies' examples)")
	fs.BoolVar(&cleanup, "cleanup", false, "remove the rows every earlier run left on the --server or --bigtable deployment, and exit")
	tg.Register(fs, "with --target: the directory verify deploys in (default: a temporary directory, removed at the end)")
	fs.IntVar(&o.Workers, "workers", 2, "worker processes of a workload with workers (observer), beside the clients (in the client with --target dir)")
	c.AddCommand(verifyClientCmd(), verifyWorkerCmd(), verifyServiceCmd())
	return c
}

// runVerify validates the flags, runs and prints the verdict.
func runVerify(c *cobra.Command, tg *cli.Target, o verify.Options, jsonOut bool) error {
	if err := verifyTarget(tg, &o); err != nil {
		return err
	}
	if err := checkVerify(o); err != nil {
		return err
	}
	if err := prepareVerify(&o); err != nil {
		return err
	}
	o.Progress = c.ErrOrStderr()
	fmt.Fprintf(c.ErrOrStderr(), "verify: %s under %s for %s, seed %d\n", o.Workload, strings.Join(o.Faults, ","), o.Duration, o.Seed)
	rep, err := verify.Run(c.Context(), o)
	if err != nil {
		return verifyErr(err)
	}
	if err := view.VerifyVerdict(c.OutOrStdout(), rep, jsonOut); err != nil {
		return err
	}
	if !rep.Valid() {
		return fmt.Errorf("%w: forbidden anomalies in the history (%s)", cli.ErrFailed, rep.Out)
	}
	return nil
}

// runVerifyMatrix runs the matrix and prints its table; exit 1 if a cell
// found a forbidden anomaly or could not run.
func runVerifyMatrix(c *cobra.Command, tg *cli.Target, o verify.Options, budget time.Duration) error {
	if tg.Server != "" || tg.Bigtable != "" || tg.Dir != "" {
		return cli.Usagef("--matrix deploys every target itself: no --dir, --server or --bigtable")
	}
	if budget <= 0 {
		return cli.Usagef("--budget must be positive")
	}
	m := verify.MatrixOptions{Budget: budget, Base: o}
	if c.Flags().Changed("workload") {
		m.Workloads = []string{o.Workload}
	}
	if c.Flags().Changed("fault") {
		m.Faults = [][]string{o.Faults}
	}
	if o.Target != "" {
		m.Targets = []string{o.Target}
	}
	if o.Duration <= 0 || o.Interval <= 0 || o.Clients < 1 || o.Threads < 1 || o.Workers < 1 {
		return cli.Usagef("--interval must be positive, --clients, --threads and --workers at least 1")
	}
	if err := m.Validate(); err != nil {
		return verifyErr(err)
	}
	if err := prepareVerify(&m.Base); err != nil {
		return err
	}
	m.Out, m.Base.Progress = m.Base.Out, nil
	cells, err := verify.RunMatrix(c.Context(), m, c.ErrOrStderr())
	table := verify.Table(cells)
	fmt.Fprint(c.OutOrStdout(), table)
	if werr := os.WriteFile(filepath.Join(m.Out, "matrix.md"), []byte(table), 0o644); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	for _, cell := range cells {
		if cell.Report == nil || cell.Forbidden() > 0 {
			return fmt.Errorf("%w: a cell found forbidden anomalies or could not run (%s)", cli.ErrFailed, m.Out)
		}
	}
	return nil
}

// checkVerify refuses bad options before anything is made (the flags
// have no zero defaults to fall back on).
func checkVerify(o verify.Options) error {
	if o.Duration <= 0 || o.Interval <= 0 || o.Clients < 1 || o.Threads < 1 || o.Workers < 1 {
		return cli.Usagef("--duration and --interval must be positive, --clients, --threads and --workers at least 1")
	}
	o.EnsureDefaults()
	return verifyErr(o.Validate())
}

// prepareVerify fills in what the command knows: the binary, a seed and
// an output directory.
func prepareVerify(o *verify.Options) error {
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	o.Binary = bin
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.Out == "" {
		o.Out, err = os.MkdirTemp("", "percolator-verify-out-")
	}
	return err
}

// verifyTarget moves the target flags into o: --dir is where a deployed
// target lives; --server or --bigtable name an existing deployment.
func verifyTarget(tg *cli.Target, o *verify.Options) error {
	o.ClientFlags = clientFlags(tg)
	if tg.GCLifetime != txn.DefaultGCLifetime {
		o.GCLifetime = tg.GCLifetime
	}
	if tg.Server == "" && tg.Bigtable == "" {
		o.Dir = tg.Dir
		return nil
	}
	if o.Target != "" || tg.Dir != "" {
		return cli.Usagef("--target and --dir deploy a target; --server and --bigtable name an existing one")
	}
	if err := tg.Validate(); err != nil {
		return err
	}
	o.Server, o.TokenFile, o.TLSCA, o.Bigtable, o.Etcd = tg.Server, tg.TokenFile, tg.TLSCA, tg.Bigtable, tg.Etcd
	o.Open = func(ctx context.Context) (*percolator.DB, error) { return tg.Open(ctx, false) }
	return nil
}

// clientFlags are the target flags given that every client process takes
// as they are.
func clientFlags(tg *cli.Target) []string {
	var f []string
	add := func(name, v string, set bool) {
		if set {
			f = append(f, name, v)
		}
	}
	add("--etcd-prefix", tg.EtcdPrefix, tg.EtcdPrefix != "")
	add("--session-ttl", tg.SessionTTL.String(), tg.SessionTTL != 0)
	add("--retry-budget", tg.RetryBudget.String(), tg.RetryBudget != 0)
	add("--lock-ttl", tg.LockTTL.String(), tg.LockTTL != 0)
	if tg.ReadThroughLocks {
		f = append(f, "--read-through-locks")
	}
	if tg.TwoPhaseOnly {
		f = append(f, "--two-phase-only")
	}
	if tg.AsyncCommit {
		f = append(f, "--async-commit")
	}
	add("--gc-lifetime", tg.GCLifetime.String(), tg.GCLifetime != txn.DefaultGCLifetime)
	return f
}

// verifyErr makes bad options a usage error.
func verifyErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, verify.ErrInvalidArgument) || errors.Is(err, verify.ErrOutExists) {
		return cli.Usagef("%s", strings.TrimPrefix(strings.TrimPrefix(err.Error(), "verify: invalid argument: "), "verify: "))
	}
	return err
}

// runVerifyCleanup removes every run's rows from an existing deployment.
func runVerifyCleanup(c *cobra.Command, tg *cli.Target) error {
	if tg.Server == "" && tg.Bigtable == "" {
		return cli.Usagef("--cleanup needs --server or --bigtable: a deployment verify did not deploy")
	}
	if err := tg.Validate(); err != nil {
		return err
	}
	n, err := verify.Remove(c.Context(), func(ctx context.Context) (*percolator.DB, error) { return tg.Open(ctx, false) }, verify.RowPrefix)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.OutOrStdout(), "verify: removed %d cells under %q\n", n, verify.RowPrefix)
	return nil
}

// child is the target of a process a run starts (client or worker): the
// target flags, and a wall clock skewed by --clock-skew.
type child struct {
	tg   cli.Target
	skew time.Duration
}

func (ch *child) register(fs *pflag.FlagSet, who string) {
	fs.DurationVar(&ch.skew, "clock-skew", 0, "how far this "+who+"'s wall clock (the one lock TTLs are judged by) is off")
	ch.tg.Register(fs, "database directory")
}

// open validates the target and returns how to open its DB.
func (ch *child) open() (func(context.Context) (*percolator.DB, error), error) {
	if err := ch.tg.Validate(); err != nil {
		return nil, err
	}
	if skew := ch.skew; skew != 0 {
		ch.tg.Now = func() time.Time { return time.Now().Add(skew) }
	}
	ch.tg.RunGC = true // on Bigtable, the run's processes collect (one at a time)
	return func(ctx context.Context) (*percolator.DB, error) { return ch.tg.Open(ctx, true) }, nil
}

// verifyClientCmd is `verify client` (hidden): one client process of a
// verify run.
func verifyClientCmd() *cobra.Command {
	var ch child
	var o verify.ClientOptions
	c := &cobra.Command{
		Use:    "client",
		Short:  "one client process of percolator verify",
		Hidden: true,
		Args:   cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) (err error) {
			if o.Open, err = ch.open(); err != nil {
				return err
			}
			return verify.RunClient(c.Context(), o)
		},
	}
	fs := c.Flags()
	fs.StringVar(&o.Workload, "workload", "", "the checked workload")
	fs.StringVar(&o.Prefix, "prefix", "", "the run's row prefix")
	fs.StringVar(&o.History, "history", "", "the file events are appended to")
	fs.IntVar(&o.ProcessBase, "process-base", 0, "the first process id")
	fs.IntVar(&o.Threads, "threads", 4, "logical processes")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed")
	fs.BoolVar(&o.Final, "final", false, "perform the final read once and exit")
	fs.BoolVar(&o.Workers, "workers", false, "run the workload's workers in this process too")
	fs.DurationVar(&o.OpTimeout, "op-timeout", 10*time.Second, "bound of each operation (one that runs out is unknown)")
	ch.register(fs, "client")
	return c
}

// verifyWorkerCmd is `verify worker` (hidden): one worker process of a
// verify run, running its workload's workers (the observers).
func verifyWorkerCmd() *cobra.Command {
	var ch child
	var o verify.WorkerOptions
	c := &cobra.Command{
		Use:    "worker",
		Short:  "one worker process of percolator verify",
		Hidden: true,
		Args:   cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) (err error) {
			if o.Open, err = ch.open(); err != nil {
				return err
			}
			return verify.RunWorker(c.Context(), o)
		},
	}
	fs := c.Flags()
	fs.StringVar(&o.Workload, "workload", "", "the checked workload")
	fs.StringVar(&o.Prefix, "prefix", "", "the run's row prefix")
	fs.DurationVar(&o.OpTimeout, "op-timeout", 10*time.Second, "bound of opening the database")
	ch.register(fs, "worker")
	return c
}

// verifyServiceCmd is `verify service` (hidden): etcd or the Bigtable
// emulator as a process of its own, for the distributed target.
func verifyServiceCmd() *cobra.Command {
	var o verify.ServiceOptions
	c := &cobra.Command{
		Use:    "service",
		Short:  "a service of percolator verify's distributed target",
		Hidden: true,
		Args:   cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return verify.ServeService(c.Context(), o, c.ErrOrStderr())
		},
	}
	fs := c.Flags()
	fs.StringVar(&o.Kind, "kind", "", "etcd or bigtable")
	fs.StringVar(&o.Dir, "dir", "", "etcd's data directory")
	fs.StringVar(&o.Listen, "listen", "", "client address")
	fs.StringVar(&o.Peer, "peer", "", "etcd's peer address")
	return c
}
