package verify

import (
	"context"
	"fmt"
	"io"

	"github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// The services of the distributed target, each run as a process of its
// own (percolator verify service) so that the nemesis can kill and
// restart etcd while the emulator, which keeps its data in memory, stays.
const (
	ServiceEtcd     = "etcd"     // one etcd member; its data in Dir, so a restart keeps it
	ServiceEmulator = "bigtable" // the Bigtable emulator with DevTable created
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
	}
	return fmt.Errorf("%w: service %q", ErrInvalidArgument, o.Kind)
}
