package server_test

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
)

// A server on a directory it creates keeps what it acknowledged through a
// power cut: the directory entries that name the store are synced, not
// only the store's own files (a crash used to take the whole new store
// back, nonce table included).
func TestPowerCutOnAFreshDirectory(t *testing.T) {
	fs := vfs.NewCrashableMem()
	srv := servertest.Start(t, server.Options{FS: fs, Dir: "/srv/db"}, "")
	st := servertest.Store(t, servertest.Dial(t, srv.Addr, rpc.DialOptions{}), remote.Options{})
	ctx := context.Background()
	if n, err := st.Increment(ctx, []byte("r"), "c", "n", 7); err != nil || n != 7 {
		t.Fatalf("Increment = %d, %v", n, err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	srv.Kill()
	srv = servertest.Start(t, server.Options{FS: crashed, Dir: "/srv/db"}, "")
	r, err := srv.Store().ReadRow(ctx, []byte("r"), storage.Filter{{Family: "c", Qualifier: "n"}})
	if err != nil || len(r.Cells) != 1 {
		t.Fatalf("after a power cut the acknowledged counter reads %v, %v", r.Cells, err)
	}
}
