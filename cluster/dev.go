package cluster

import (
	"context"
	"path/filepath"

	"github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// DevTable is the table StartDev creates.
const DevTable = "dev/dev/percolator"

// DevOptions configures StartDev.
type DevOptions struct {
	// Dir holds etcd's data (in Dir/etcd). Required.
	Dir string
	// BigtableAddr is the emulator's address; default 127.0.0.1:0.
	BigtableAddr string
	// EtcdAddr is etcd's client address; default a free port on
	// 127.0.0.1.
	EtcdAddr string
}

// Dev is a deployment on one machine for trying and testing: the
// Bigtable emulator (its data in memory) with DevTable created, and one
// etcd member.
type Dev struct {
	emu    *bigtable.Emulator
	member *etcd.Embedded
}

// StartDev starts the emulator and the etcd member, and creates
// DevTable. Close stops both.
func StartDev(ctx context.Context, o DevOptions) (*Dev, error) {
	if o.BigtableAddr == "" {
		o.BigtableAddr = "127.0.0.1:0"
	}
	emu, err := bigtable.StartEmulator(o.BigtableAddr)
	if err != nil {
		return nil, err
	}
	member, err := etcd.StartEmbedded(ctx, etcd.EmbedOptions{Dir: filepath.Join(o.Dir, "etcd"), ClientAddr: o.EtcdAddr})
	if err != nil {
		emu.Close()
		return nil, err
	}
	d := &Dev{emu: emu, member: member}
	if err := bigtable.Init(ctx, d.Bigtable()); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// EmulatorAddr is the emulator's address, for BIGTABLE_EMULATOR_HOST.
func (d *Dev) EmulatorAddr() string { return d.emu.Addr() }

// Bigtable is DevTable on the emulator.
func (d *Dev) Bigtable() bigtable.Options {
	var o bigtable.Options
	_ = o.ParseTable(DevTable)
	o.Emulator = d.emu.Addr()
	return o
}

// Endpoints are etcd's client endpoints.
func (d *Dev) Endpoints() []string { return d.member.Endpoints() }

// Err reports a failure of the etcd member.
func (d *Dev) Err() <-chan error { return d.member.Err() }

// Close stops etcd, then the emulator.
func (d *Dev) Close() {
	d.member.Close()
	d.emu.Close()
}
