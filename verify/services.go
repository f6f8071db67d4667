package verify

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// The services of the distributed target, each run as a process of its
// own (percolator verify service) so that the nemesis can kill and
// restart etcd while the emulator, which keeps its data in memory, stays.
const (
	ServiceEtcd     = "etcd"     // one etcd member; its data in Dir, so a restart keeps it
	ServiceEmulator = "bigtable" // the Bigtable emulator with DevTable created
	// ServiceCrashable is a server whose store lives on Pebble's
	// crashable in-memory filesystem: SIGUSR1 cuts its power (what was
	// not synced is lost, in part or whole), and it restarts on what a
	// disk would have kept, on the same address.
	ServiceCrashable = "crashable-server"
)

// DevTable is the table the distributed target's emulator serves.
const DevTable = "verify/verify/percolator"

// ServiceOptions name one service process.
type ServiceOptions struct {
	Kind   string // ServiceEtcd or ServiceEmulator
	Dir    string // etcd's data
	Listen string // the client address
	Peer   string // etcd's peer address (the same at every restart)
}

// ServeService runs the service until ctx ends, writing a line to w once
// it serves.
func ServeService(ctx context.Context, o ServiceOptions, w io.Writer) error {
	switch o.Kind {
	case ServiceEtcd:
		m, err := etcd.StartEmbedded(ctx, etcd.EmbedOptions{Dir: o.Dir, ClientAddr: o.Listen, PeerAddr: o.Peer})
		if err != nil {
			return err
		}
		defer m.Close()
		fmt.Fprintln(w, "verify: etcd serving on", o.Listen)
		select {
		case <-ctx.Done():
			return nil
		case err := <-m.Err():
			return err
		}
	case ServiceEmulator:
		emu, err := bigtable.StartEmulator(o.Listen)
		if err != nil {
			return err
		}
		defer emu.Close()
		var bt bigtable.Options
		_ = bt.ParseTable(DevTable)
		bt.Emulator = emu.Addr()
		if err := bigtable.Init(ctx, bt); err != nil {
			return err
		}
		fmt.Fprintln(w, "verify: Bigtable emulator serving on", o.Listen)
		<-ctx.Done()
		return nil
	case ServiceCrashable:
		return serveCrashable(ctx, o.Listen, w)
	}
	return fmt.Errorf("%w: service %q", ErrInvalidArgument, o.Kind)
}

// serveCrashable serves a store on a crashable filesystem until ctx ends,
// cutting its power at each SIGUSR1.
func serveCrashable(ctx context.Context, addr string, w io.Writer) error {
	cuts := make(chan os.Signal, 1)
	signal.Notify(cuts, syscall.SIGUSR1)
	defer signal.Stop(cuts)
	fs := vfs.NewCrashableMem()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	for n := 0; ; n++ {
		srv, err := server.Open(ctx, server.Options{Dir: "/db", FS: fs, Logger: slog.New(slog.NewTextHandler(w, nil))})
		if err != nil {
			return fmt.Errorf("verify: opening the store after %d power cuts: %w", n, err)
		}
		l, err := listenAgain(ctx, addr)
		if err != nil {
			srv.Kill()
			return err
		}
		lis := &cutListener{Listener: l}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(lis) }()
		fmt.Fprintf(w, "verify: crashable server serving on %s (power cuts: %d)\n", addr, n)
		select {
		case <-ctx.Done():
			return srv.Shutdown(context.Background())
		case err := <-served:
			srv.Kill()
			return err
		case <-cuts:
		}
		// The power goes: no reply leaves after it (the connections are
		// reset before the disk is cloned), the disk keeps what was synced
		// and, at random, part of what was not; the memory is gone.
		lis.cut()
		cfg := vfs.CrashCloneCfg{}
		if pct := []int{0, 50, 100}[rng.IntN(3)]; pct > 0 {
			cfg = vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(rng.Uint64(), 1))}
		}
		clone := fs.CrashClone(cfg)
		srv.Kill()
		<-served
		fs = clone
	}
}

// cutListener remembers the connections it accepted, so that a power cut
// resets them all at once.
type cutListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
	done  bool
}

func (l *cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	l.conns = append(l.conns, c)
	return c, nil
}

// cut closes the listener and resets every connection: what a handler
// writes after this reaches no client.
func (l *cutListener) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	_ = l.Listener.Close()
	for _, c := range l.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST: bytes not yet sent are dropped
		}
		_ = c.Close()
	}
}

// listenAgain listens on addr, waiting while the port is still held by
// the listener before.
func listenAgain(ctx context.Context, addr string) (net.Listener, error) {
	for deadline := time.Now().Add(10 * time.Second); ; {
		lis, err := net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			return lis, err
		}
		if !sleep(ctx, 20*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
}
