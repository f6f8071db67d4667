package remote_test

import (
	"testing"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

// TestConformance runs the storage conformance suite over a server.
func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		srv := servertest.Start(t, server.Options{}, "")
		return servertest.Store(t, servertest.Dial(t, srv.Addr, rpc.DialOptions{}), remote.Options{})
	})
}
