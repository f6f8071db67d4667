package verify

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	"github.com/seed-992972ee/percolator/internal/faultproxy"
)

const (
	sigCont = syscall.SIGCONT
	sigStop = syscall.SIGSTOP
)

// nemesis injects faults until Duration has passed: every Interval on
// average it picks one of the faults asked for and a victim among the
// clients and the processes of the deployment verify started (never an
// existing deployment's), and faults it.
func (r *run) nemesis(ctx context.Context) {
	r.faults = map[string]int{}
	rng := rand.New(rand.NewPCG(r.o.Seed, 7))
	deadline := time.Now().Add(r.o.Duration)
	var kinds []string
	for _, f := range r.o.Faults {
		if f != "none" {
			kinds = append(kinds, f)
		}
	}
	for {
		wait := time.Duration(float64(r.o.Interval) * (0.5 + rng.Float64()))
		if left := time.Until(deadline); left < wait {
			sleep(ctx, left)
			return
		}
		if !sleep(ctx, wait) {
			return
		}
		if len(kinds) == 0 {
			continue
		}
		r.fault(ctx, rng, kinds[rng.IntN(len(kinds))])
		fmt.Fprintf(r.o.Progress, "verify: %4.0fs  %s\n", r.o.Duration.Seconds()-time.Until(deadline).Seconds(), r.faultsString())
	}
}

// fault injects one fault of kind.
func (r *run) fault(ctx context.Context, rng *rand.Rand, kind string) {
	if NetFaults([]string{kind}) {
		r.netFault(ctx, rng, kind)
		return
	}
	if kind == "powercut" {
		r.powerCut(ctx)
		return
	}
	victims := append(append([]*proc{}, r.clients...), r.workers...)
	for _, p := range r.dep.procs {
		if kind == "pause" || kind == "kill" && !p.crashable {
			victims = append(victims, p)
		}
	}
	v := victims[rng.IntN(len(victims))]
	r.faults[kind+" "+v.role]++
	switch kind {
	case "kill", "skew": // a client's restart draws a new skew
		v.kill()
		sleep(ctx, time.Duration(rng.Int64N(int64(300*time.Millisecond))))
		if err := v.start(ctx); err != nil {
			fmt.Fprintf(r.o.Progress, "verify: restarting %s: %v\n", v.name, err)
		}
	case "pause":
		v.signal(sigStop, 0)
		sleep(ctx, time.Duration(float64(r.o.Interval)*rng.Float64()))
		v.signal(sigCont, 0)
	case "expire": // past the lease: the session is gone when it wakes
		v.signal(sigStop, 0)
		sleep(ctx, expireTTL+time.Duration(rng.Int64N(int64(2*expireTTL))))
		v.signal(sigCont, 0)
	}
}

// powerCut cuts the power of the crashable server and waits until it
// serves again.
func (r *run) powerCut(ctx context.Context) {
	for _, p := range r.dep.procs {
		if p.crashable {
			r.faults["powercut server"]++
			p.signal(syscall.SIGUSR1, 0)
			sleep(ctx, 100*time.Millisecond)
			p.mu.Lock()
			done := p.mu.done
			p.mu.Unlock()
			if err := waitAccepts(ctx, p.addr, done, p.name); err != nil {
				fmt.Fprintf(r.o.Progress, "verify: %s after a power cut: %v\n", p.name, err)
			}
		}
	}
}

// netFault injects a network fault on the connections to one of the
// services the clients dial.
func (r *run) netFault(ctx context.Context, rng *rand.Rand, kind string) {
	i := rng.IntN(len(r.dep.proxies))
	p := r.dep.proxies[i]
	r.faults[kind+" "+r.dep.fronts[i]]++
	hold := time.Duration(float64(r.o.Interval) * rng.Float64())
	switch kind {
	case "cut":
		p.Cut()
	case "drop":
		_ = p.DropNextResponse()
	case "partition":
		p.SetBlackhole(true)
		sleep(ctx, hold)
		p.SetBlackhole(false)
	case "delay":
		_ = p.SetDelay(faultproxy.BothWays, faultproxy.Uniform(0, 50*time.Millisecond))
		sleep(ctx, hold)
		_ = p.SetDelay(faultproxy.BothWays, faultproxy.Delay{})
	}
}

func (r *run) faultsString() string {
	s := ""
	for _, k := range slices.Sorted(maps.Keys(r.faults)) {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%s %d", k, r.faults[k])
	}
	if s == "" {
		return "no faults yet"
	}
	return s
}
