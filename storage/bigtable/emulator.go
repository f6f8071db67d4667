package bigtable

import (
	"fmt"

	"cloud.google.com/go/bigtable/bttest"
	"google.golang.org/grpc"
)

// Emulator is the Bigtable emulator (bttest) serving in this process: an
// in-memory Bigtable for tests and `percolator devcluster`. It keeps
// nothing across a restart and is not for production.
type Emulator struct {
	srv *bttest.Server
}

// StartEmulator starts the emulator on addr ("127.0.0.1:0" for any free
// port). interceptors, if any, see every call it serves (tests inject
// faults with them).
func StartEmulator(addr string, interceptors ...grpc.UnaryServerInterceptor) (*Emulator, error) {
	var opts []grpc.ServerOption
	if len(interceptors) > 0 {
		opts = append(opts, grpc.ChainUnaryInterceptor(interceptors...))
	}
	srv, err := bttest.NewServer(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("bigtable: start emulator: %w", err)
	}
	return &Emulator{srv: srv}, nil
}

// Addr is the emulator's address, the value of BIGTABLE_EMULATOR_HOST.
func (e *Emulator) Addr() string { return e.srv.Addr }

// Close stops the emulator.
func (e *Emulator) Close() { e.srv.Close() }
