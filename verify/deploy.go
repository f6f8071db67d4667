package verify

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator/internal/faultproxy"
)

// deployment is what the clients run against: the target flags they are
// given and, where verify deployed it, the processes it started (the
// faultable ones in procs).
type deployment struct {
	args  []string // the clients' target flags
	env   []string // the clients' environment (the emulator's address)
	procs []*proc  // server or oracles: the nemesis may fault them
	fixed []*proc  // started but never faulted (devcluster: the emulator keeps its data in memory)
	// proxies stand between the clients and every network service they
	// use (server; etcd, the emulator and the oracles), for the network
	// faults; none on an embedded store.
	proxies []*faultproxy.Proxy
	fronts  []string // what each proxy stands in front of: server, etcd, bigtable, oracle
}

// proxy puts a fault proxy in front of addr and returns the address the
// clients dial instead.
func (d *deployment) proxy(addr, front string, seed uint64) (string, error) {
	p, err := faultproxy.NewWithOptions(addr, faultproxy.Options{Seed: seed + uint64(len(d.proxies))})
	if err != nil {
		return "", err
	}
	d.proxies = append(d.proxies, p)
	d.fronts = append(d.fronts, front)
	return p.Addr(), nil
}

// deploy deploys the target in base (its own processes' logs go to logs),
// or describes the existing deployment o names.
func deploy(ctx context.Context, o *Options, base, logs string) (*deployment, error) {
	switch {
	case o.Server != "":
		d := &deployment{}
		addr, err := d.proxy(o.Server, "server", o.Seed)
		if err != nil {
			return nil, err
		}
		args := []string{"--server", addr}
		if o.TokenFile != "" {
			args = append(args, "--token-file", o.TokenFile)
		}
		if o.TLSCA != "" {
			args = append(args, "--tls-ca", o.TLSCA)
		}
		d.args = args
		return d, nil
	case o.Bigtable != "":
		return &deployment{args: []string{"--bigtable", o.Bigtable, "--etcd", o.Etcd}}, nil
	}
	db := filepath.Join(base, "db")
	switch o.Target {
	case TargetDir:
		return &deployment{args: []string{"--dir", db}}, nil
	case TargetServer:
		return deployServer(ctx, o, db, logs)
	}
	return deployDistributed(ctx, o, base, logs)
}

func deployServer(ctx context.Context, o *Options, db, logs string) (*deployment, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	srv := &proc{role: "server", name: "server", bin: o.Binary, logs: logs, addr: addr, env: o.Env,
		args: func(int) []string { return []string{"serve", "--dir", db, "--listen", addr} }}
	if err := srv.start(ctx); err != nil {
		return nil, err
	}
	d := &deployment{procs: []*proc{srv}}
	front, err := d.proxy(addr, "server", o.Seed)
	if err != nil {
		d.stop()
		return nil, err
	}
	d.args = []string{"--server", front, "--retry-budget", "3s"}
	return d, nil
}

// deployDistributed starts a devcluster (the Bigtable emulator and one
// etcd member) and two oracle candidates.
func deployDistributed(ctx context.Context, o *Options, base, logs string) (*deployment, error) {
	dev := &proc{role: "devcluster", name: "devcluster", bin: o.Binary, logs: logs, env: o.Env,
		args: func(n int) []string { return []string{"devcluster", "--dir", filepath.Join(base, fmt.Sprintf("dev%d", n))} }}
	d := &deployment{fixed: []*proc{dev}}
	emu, table, etcd, err := startDevcluster(ctx, dev)
	if err != nil {
		return nil, err
	}
	emuFront, err := d.proxy(emu, "bigtable", o.Seed)
	if err != nil {
		d.stop()
		return nil, err
	}
	etcdFront, err := d.proxy(strings.TrimPrefix(etcd, "http://"), "etcd", o.Seed)
	if err != nil {
		d.stop()
		return nil, err
	}
	d.env = []string{"BIGTABLE_EMULATOR_HOST=" + emuFront}
	d.args = []string{"--bigtable", table, "--etcd", "http://" + etcdFront}
	for i := range 2 {
		addr, err := freeAddr()
		if err != nil {
			d.stop()
			return nil, err
		}
		front, err := d.proxy(addr, "oracle", o.Seed)
		if err != nil {
			d.stop()
			return nil, err
		}
		// The oracles reach etcd and the emulator directly; the clients
		// dial them through a proxy each (advertised in etcd).
		or := &proc{role: "oracle", name: fmt.Sprintf("oracle%d", i), bin: o.Binary, logs: logs, addr: addr,
			env: append(append([]string{}, o.Env...), "BIGTABLE_EMULATOR_HOST="+emu),
			args: func(int) []string {
				return []string{"oracle", "--etcd", etcd, "--bigtable", table, "--listen", addr, "--advertise", front, "--lease", "2s"}
			}}
		if err := or.start(ctx); err != nil {
			d.stop()
			return nil, err
		}
		d.procs = append(d.procs, or)
	}
	return d, nil
}

// startDevcluster starts devcluster and returns what it printed; a start
// that fails (a port taken between its choice and its use) is tried
// again, three times in all.
func startDevcluster(ctx context.Context, dev *proc) (emu, table, etcd string, err error) {
	for range 3 {
		if err = dev.start(ctx); err != nil {
			return "", "", "", err
		}
		if emu, table, etcd, err = devclusterFlags(ctx, dev); err == nil {
			return emu, table, etcd, nil
		}
		dev.stop(10 * time.Second)
	}
	return "", "", "", err
}

// devclusterFlags reads what devcluster printed: the emulator's address
// and the --bigtable and --etcd flags.
func devclusterFlags(ctx context.Context, dev *proc) (emu, table, etcd string, err error) {
	log := dev.logPath()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		emu, table, etcd = parseDevcluster(log)
		if emu != "" && table != "" && etcd != "" {
			return emu, table, etcd, nil
		}
		if !dev.running() {
			break
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return "", "", "", ctx.Err()
		}
	}
	return "", "", "", fmt.Errorf("verify: devcluster did not start:\n%s", lastLines(log, 20))
}

func parseDevcluster(log string) (emu, table, etcd string) {
	f, err := os.Open(log)
	if err != nil {
		return "", "", ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "export BIGTABLE_EMULATOR_HOST="); ok {
			emu = v
		}
		if strings.HasPrefix(line, "--bigtable ") {
			if f := strings.Fields(line); len(f) == 4 && f[2] == "--etcd" {
				table, etcd = f[1], f[3]
			}
		}
	}
	return emu, table, etcd
}

// all is every process of the deployment.
func (d *deployment) all() []*proc { return append(append([]*proc{}, d.procs...), d.fixed...) }

// ensureRunning restarts any faultable process the nemesis left down.
func (d *deployment) ensureRunning(ctx context.Context) error {
	for _, p := range d.procs {
		if !p.running() {
			if err := p.start(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// stop ends every process of the deployment and closes its proxies.
func (d *deployment) stop() {
	for _, p := range d.all() {
		p.stop(10 * time.Second)
	}
	for _, p := range d.proxies {
		_ = p.Close()
	}
}

// heal undoes every network fault.
func (d *deployment) heal() {
	for _, p := range d.proxies {
		p.SetBlackhole(false)
		_ = p.SetDelay(faultproxy.BothWays, faultproxy.Delay{})
	}
}
