package txn_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	coordremote "github.com/seed-992972ee/percolator/coord/remote"
	oracleremote "github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/txn"
)

// TestSessionLostAborts: a client whose liveness session is gone (closed,
// so Check fails) does not reach its commit point: Commit returns
// ErrSessionLost, a conflict, and rolls back what it prewrote, leaving no
// lock, no data and no value (only rollback records).
func TestSessionLostAborts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := servertest.Start(t, server.Options{Logger: quiet}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	rs := servertest.Store(t, conn, remote.Options{})
	orc := oracleremote.NewClient(conn)
	sess, err := coordremote.Open(ctx, conn, coord.NewOwnerID(), time.Second, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	opts := txn.Options{Owner: sess.Owner(), Session: sess.Check, InlineSize: -1, Logger: quiet}
	c, err := txn.NewClient(ctx, rs, orc, sess, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = writeBoth(ctx, c, "v1")
	if !errors.Is(err, txn.ErrSessionLost) || !errors.Is(err, txn.ErrConflict) {
		t.Fatalf("Commit with a lost session: %v; want ErrSessionLost, a conflict", err)
	}
	if !strings.Contains(err.Error(), "closed") {
		t.Errorf("Commit's error %q does not say why the session is lost", err)
	}
	reader := newClient(t, rs, orc, txn.Options{Logger: quiet})
	for _, v := range nothingLeft(ctx, t, reader, rs) {
		t.Error(v)
	}
}

// nothingLeft looks for what is left of a transaction at p and s, which
// none committed: a lock or data (read raw first: a transactional read
// would resolve them), then a visible value.
func nothingLeft(ctx context.Context, t testing.TB, c *txn.Client, st storage.Store) []string {
	t.Helper()
	var found []string
	for _, row := range []string{"p", "s"} {
		for _, fam := range []string{txn.FamilyLock, txn.FamilyData} {
			r, err := st.ReadRow(ctx, []byte(row), storage.Filter{{Family: fam, AllQualifiers: true}})
			if err != nil {
				t.Fatalf("raw read of %s: %v", row, err)
			}
			if len(r.Cells) > 0 {
				found = append(found, row+": "+fam+" cells left")
			}
		}
	}
	tx, err := c.BeginReadOnly(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	for _, row := range []string{"p", "s"} {
		if v, err := tx.Get(ctx, row, "c"); !errors.Is(err, txn.ErrNotFound) {
			found = append(found, row+": value "+string(v)+" visible (err "+errString(err)+")")
		}
	}
	return found
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
