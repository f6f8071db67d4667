package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/workload"
)

// Targets verify deploys itself.
const (
	TargetDir         = "dir"         // the embedded store, one client process at a time
	TargetServer      = "server"      // percolator serve and client processes
	TargetDistributed = "distributed" // a devcluster, two oracle candidates and client processes
)

// Faults are the nemeses verify knows: process faults (kill: SIGKILL and
// restart; pause: SIGSTOP, then SIGCONT) and network faults, through a
// fault proxy in front of every service the clients dial (cut: every
// connection closed; partition: connections held, no byte passing, then
// released; delay: up to 50ms added each way; drop: the next reply lost
// after the server applied the call), and powercut: the server's store on
// Pebble's crashable filesystem loses what it had not synced and the
// server restarts (--target server only; a kill then spares the server,
// whose store is in its memory); skew: a client restarted with its wall
// clock, by which lock TTLs are judged, off by up to three TTLs either
// way (an injected clock, not the system's); expire: a client paused past
// its liveness session's lease (clients then run with a 2s lease), so
// others resolve its locks and its commits must be refused.
var Faults = []string{"none", "kill", "pause", "cut", "partition", "delay", "drop", "powercut", "skew", "expire"}

// netFaults are the faults that need a network between the clients and
// the store.
var netFaults = []string{"cut", "partition", "delay", "drop"}

// NetFaults reports whether faults holds a network fault.
func NetFaults(faults []string) bool {
	for _, f := range faults {
		if slices.Contains(netFaults, f) {
			return true
		}
	}
	return false
}

// ErrInvalidArgument: the options are not usable; nothing was started.
var ErrInvalidArgument = errors.New("verify: invalid argument")

// errNotApplicable marks a fault a target cannot take (Validate): a
// matrix skips such cells.
var errNotApplicable = fmt.Errorf("%w: fault not applicable to the target", ErrInvalidArgument)

// ErrOutExists: Out already holds a run's files; verify writes a run to a
// directory of its own so two runs' histories never mix.
var ErrOutExists = errors.New("verify: output directory is not empty")

// Options are a run's.
type Options struct {
	Workload string        // one of workload.CheckedNames
	Faults   []string      // nemeses, combined: "kill" (the default), "pause", "none"
	Duration time.Duration // how long the workload runs under the nemesis
	// Target is the deployment verify starts itself (TargetDir,
	// TargetServer, TargetDistributed), in Dir or a temporary directory;
	// empty when Server or Bigtable name an existing deployment.
	Target string
	Dir    string
	// An existing deployment: verify faults only its own clients and
	// writes only under a row prefix of its own, which it removes at the
	// end through Open.
	Server, TokenFile, TLSCA string
	Bigtable, Etcd           string
	Open                     func(context.Context) (*percolator.DB, error)
	// ClientFlags are passed to every client process after the target's
	// (the target flags the user gave: --etcd-prefix, --session-ttl,
	// --retry-budget, --lock-ttl).
	ClientFlags []string
	// GCLifetime, if set, is the deployed server's garbage collection
	// lifetime (serve --gc-lifetime); the clients get theirs through
	// ClientFlags.
	GCLifetime time.Duration

	Clients int // client processes (TargetDir: 1)
	// Workers is how many worker processes run a workload's workers
	// (workload.Worked: the observer workload's observers) beside the
	// clients; on TargetDir they run in the client.
	Workers int
	Threads int // logical processes per client
	// Interval is the nemesis's mean time between faults.
	Interval time.Duration
	Seed     uint64
	// Out is the directory for history.jsonl, report.json, report.txt and
	// register.html; it must not exist or be empty.
	Out string
	// Binary is the percolator command that verify starts (its own
	// executable), and Env what it adds to their environment.
	Binary string
	Env    []string
	// Progress receives a line now and then; nil for none.
	Progress io.Writer
}

// EnsureDefaults fills in the zero fields.
func (o *Options) EnsureDefaults() {
	if len(o.Faults) == 0 {
		o.Faults = []string{"kill"}
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Target == "" && o.Server == "" && o.Bigtable == "" {
		o.Target = TargetDir
	}
	if o.Clients == 0 {
		o.Clients = 3
	}
	if o.Target == TargetDir {
		o.Clients = 1 // an embedded store has one owner
	}
	if o.Threads == 0 {
		o.Threads = 4
	}
	if o.Workers == 0 {
		o.Workers = 2
	}
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Validate checks the options a user gives (Out and Binary are checked
// by Run: a caller validates before making them).
func (o *Options) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	switch {
	case !slices.Contains(workload.CheckedNames, o.Workload):
		return bad("workload %q (one of %s)", o.Workload, strings.Join(workload.CheckedNames, ", "))
	case o.Duration <= 0 || o.Interval <= 0:
		return bad("duration and interval must be positive")
	case o.Clients < 1 || o.Threads < 1 || o.Workers < 1:
		return bad("clients, threads and workers must be at least 1")
	case o.Target != "" && (o.Server != "" || o.Bigtable != ""):
		return bad("a target to deploy excludes an existing deployment")
	case o.Target == "" && o.Open == nil:
		return bad("an existing deployment needs Open, to remove the run's rows")
	case o.Target != "" && !slices.Contains([]string{TargetDir, TargetServer, TargetDistributed}, o.Target):
		return bad("target %q (dir, server or distributed)", o.Target)
	case (o.Bigtable == "") != (o.Etcd == ""):
		return bad("bigtable and etcd go together")
	}
	for _, f := range o.Faults {
		if !slices.Contains(Faults, f) {
			return bad("fault %q (one of %s)", f, strings.Join(Faults, ", "))
		}
	}
	na := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", errNotApplicable, fmt.Sprintf(format, a...))
	}
	switch {
	case NetFaults(o.Faults) && o.Target == TargetDir:
		return na("network faults (%s) need a network: --target server or distributed, or --server", strings.Join(netFaults, ", "))
	case o.Workload == "lock" && o.Target == "":
		return bad("the lock workload leaves its locks' rows (a lock's fencing-token counter is never deleted): run it on a target verify deploys")
	case o.Workload == "graph" && o.Target == "":
		return bad("the graph workload leaves its label and edges (package graph deletes no label): run it on a target verify deploys")
	case o.Workload == "queue" && o.Target == "":
		return bad("the queue workload leaves its queue's rows (package queue deletes no queue): run it on a target verify deploys")
	case slices.Contains(o.Faults, "expire") && o.Target == TargetDir:
		return na("expire needs liveness sessions: --target server or distributed, or an existing deployment")
	case slices.Contains(o.Faults, "powercut") && o.Target != TargetServer:
		return na("powercut needs --target server (verify runs the server on a crashable filesystem)")
	case NetFaults(o.Faults) && o.Bigtable != "":
		return bad("network faults on an existing Bigtable deployment are not supported: use --target distributed")
	}
	return nil
}
