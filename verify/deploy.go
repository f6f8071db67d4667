package verify

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
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
		args: func(int) []string {
			a := []string{"serve", "--dir", db, "--listen", addr}
			if o.GCLifetime != 0 {
				a = append(a, "--gc-lifetime", o.GCLifetime.String())
			}
			return a
		}}
	if slices.Contains(o.Faults, "powercut") {
		// Its store is in its memory: a kill would lose it whole.
		srv = service(o, logs, ServiceOptions{Kind: ServiceCrashable, Listen: addr})
		srv.role, srv.crashable = "server", true
	}
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

// deployDistributed starts the Bigtable emulator, one etcd member and two
// oracle candidates, each a process of its own; the nemesis may kill or
// pause etcd and the oracles, never the emulator (its data is in memory).
func deployDistributed(ctx context.Context, o *Options, base, logs string) (*deployment, error) {
	var addrs [5]string // emulator, etcd client, etcd peer, two oracles
	for i := range addrs {
		a, err := freeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	emu, etcd := addrs[0], addrs[1]
	d := &deployment{}
	d.fixed = []*proc{service(o, logs, ServiceOptions{Kind: ServiceEmulator, Listen: emu})}
	d.procs = []*proc{service(o, logs, ServiceOptions{Kind: ServiceEtcd, Dir: filepath.Join(base, "etcd"), Listen: etcd, Peer: addrs[2]})}
	for _, p := range d.all() {
		if err := p.start(ctx); err != nil {
			d.stop()
			return nil, err
		}
	}
	if err := d.proxyDistributed(o, emu, etcd); err != nil {
		d.stop()
		return nil, err
	}
	for i, addr := range addrs[3:] {
		if err := d.startOracle(ctx, o, logs, i, addr, emu, etcd); err != nil {
			d.stop()
			return nil, err
		}
	}
	return d, nil
}

// service is a process of verify service.
func service(o *Options, logs string, s ServiceOptions) *proc {
	return &proc{role: s.Kind, name: s.Kind, bin: o.Binary, logs: logs, addr: s.Listen, env: o.Env,
		args: func(int) []string {
			return []string{"verify", "service", "--kind", s.Kind, "--dir", s.Dir, "--listen", s.Listen, "--peer", s.Peer}
		}}
}

// proxyDistributed puts the clients' view of the emulator and etcd behind
// proxies.
func (d *deployment) proxyDistributed(o *Options, emu, etcd string) error {
	emuFront, err := d.proxy(emu, "bigtable", o.Seed)
	if err != nil {
		return err
	}
	etcdFront, err := d.proxy(etcd, "etcd", o.Seed)
	if err != nil {
		return err
	}
	d.env = []string{"BIGTABLE_EMULATOR_HOST=" + emuFront}
	d.args = []string{"--bigtable", DevTable, "--etcd", "http://" + etcdFront}
	return nil
}

// startOracle starts oracle candidate i on addr. The oracles reach etcd
// and the emulator directly; the clients dial each through a proxy, whose
// address the oracle advertises in etcd.
func (d *deployment) startOracle(ctx context.Context, o *Options, logs string, i int, addr, emu, etcd string) error {
	front, err := d.proxy(addr, "oracle", o.Seed)
	if err != nil {
		return err
	}
	or := &proc{role: "oracle", name: fmt.Sprintf("oracle%d", i), bin: o.Binary, logs: logs, addr: addr,
		env: append(append([]string{}, o.Env...), "BIGTABLE_EMULATOR_HOST="+emu),
		args: func(int) []string {
			return []string{"oracle", "--etcd", "http://" + etcd, "--bigtable", DevTable, "--listen", addr, "--advertise", front, "--lease", "2s"}
		}}
	d.procs = append(d.procs, or)
	return or.start(ctx)
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

// stop ends every process of the deployment at once (SIGTERM, SIGKILL
// after a few seconds: what they hold is no longer needed) and closes its
// proxies.
func (d *deployment) stop() {
	var wg sync.WaitGroup
	for _, p := range d.all() {
		wg.Go(func() { p.stop(3 * time.Second) })
	}
	wg.Wait()
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
