package server_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/txn"
)

// TestLockIndexReads: random writes of the lock family (puts, exact and
// range deletes, row deletes, increments) through the server, then reads
// through it with random lock and write selectors: every answer equals the
// store's own, before and after a restart (which rebuilds the index from
// the store). The server drops lock selectors its index says select
// nothing; a wrong index shows as a missing lock.
func TestLockIndexReads(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	srv := servertest.Start(t, server.Options{Dir: dir}, "")
	st := servertest.Store(t, servertest.Dial(t, srv.Addr, rpc.DialOptions{}), remote.Options{})
	rows := []string{"a", "b", "c", "d"}
	quals := []string{"x", "y"}
	lock := txn.FamilyLock
	for range 400 {
		row := []byte(rows[rng.IntN(len(rows))])
		q := quals[rng.IntN(len(quals))]
		ts := uint64(1 + rng.IntN(20))
		var err error
		switch rng.IntN(7) {
		case 0, 1, 2:
			err = st.Mutate(ctx, row, storage.SetCell(lock, q, ts, []byte("l")), storage.SetCell(txn.FamilyWrite, q, ts+1, []byte("w")))
		case 3:
			err = st.Mutate(ctx, row, storage.DeleteCell(lock, q, ts))
		case 4:
			err = st.Mutate(ctx, row, storage.Mutation{Kind: storage.DeleteCells, Family: lock, Qualifier: q, Time: storage.TimeRange{Start: ts, End: ts + uint64(rng.IntN(8))}})
		case 5:
			if rng.IntN(4) == 0 {
				err = st.Mutate(ctx, row, storage.Mutation{Kind: storage.DeleteRow})
			}
		case 6:
			// The server's conditional writes read their predicates through
			// the index too: the branch taken is the store's.
			pred := storage.Filter{{Family: lock, Qualifier: q, Time: storage.TimeRange{Start: ts, End: ts + uint64(rng.IntN(4))}}}
			if rng.IntN(3) == 0 {
				pred[0].Qualifier, pred[0].AllQualifiers = "", true
			}
			want, rerr := srv.Store().ReadRow(ctx, row, pred)
			if rerr != nil {
				t.Fatal(rerr)
			}
			var matched bool
			matched, err = st.CheckAndMutate(ctx, row, pred,
				[]storage.Mutation{storage.DeleteCell(lock, q, ts)}, []storage.Mutation{storage.SetCell(lock, q, ts, []byte("c"))})
			if err == nil && matched != (len(want.Cells) > 0) {
				t.Fatalf("CheckAndMutate of %s on %+v: matched %v, but the store holds %v", row, pred, matched, want.Cells)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(srv *servertest.Server, st storage.Store) {
		t.Helper()
		for i := range 300 {
			row := []byte(rows[rng.IntN(len(rows))])
			start := uint64(rng.IntN(22))
			f := storage.Filter{
				{Family: lock, Qualifier: quals[rng.IntN(2)], Time: storage.TimeRange{Start: start, End: start + uint64(rng.IntN(10))}},
				{Family: txn.FamilyWrite, Qualifier: quals[rng.IntN(2)], Limit: 1},
			}
			if rng.IntN(3) == 0 {
				f[0].Qualifier, f[0].AllQualifiers = "", true
			}
			if rng.IntN(2) == 0 {
				f = f[:1]
			}
			got, err := st.ReadRow(ctx, row, f)
			if err != nil {
				t.Fatal(err)
			}
			want, err := srv.Store().ReadRow(ctx, row, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Cells) != 0 || len(want.Cells) != 0 {
				if !reflect.DeepEqual(got.Cells, want.Cells) {
					t.Fatalf("read %d of %s with %+v: server %v, store %v", i, row, f, fmt.Sprint(got.Cells), fmt.Sprint(want.Cells))
				}
			}
		}
	}
	// Scans of the lock family alone are answered from the index's rows.
	scans := func(srv *servertest.Server, st storage.Store) {
		t.Helper()
		collect := func(s storage.Store, start, end []byte, f storage.Filter, limit int) string {
			out := ""
			if err := s.Scan(ctx, start, end, f, limit, func(r storage.Row) bool {
				out += fmt.Sprintf("%s:%v ", r.Key, r.Cells)
				return true
			}); err != nil {
				t.Fatal(err)
			}
			return out
		}
		for i := range 200 {
			ts := uint64(rng.IntN(22))
			f := storage.Filter{{Family: lock, Qualifier: quals[rng.IntN(2)], Time: storage.TimeRange{Start: ts, End: ts + uint64(rng.IntN(10))}}}
			if rng.IntN(3) == 0 {
				f[0].Qualifier, f[0].AllQualifiers = "", true
			}
			if rng.IntN(3) == 0 {
				f = append(f, storage.Selector{Family: lock, Qualifier: quals[rng.IntN(2)]})
			}
			var start, end []byte
			if rng.IntN(2) == 0 {
				start = []byte(rows[rng.IntN(len(rows))])
			}
			if rng.IntN(2) == 0 {
				end = []byte(rows[rng.IntN(len(rows))] + "\x00")
				if string(end) < string(start) {
					start, end = end, start
				}
			}
			limit := rng.IntN(3)
			if got, want := collect(st, start, end, f, limit), collect(srv.Store(), start, end, f, limit); got != want {
				t.Fatalf("scan %d of [%q, %q) limit %d with %+v: server %s, store %s", i, start, end, limit, f, got, want)
			}
		}
	}
	check(srv, st)
	scans(srv, st)
	addr := srv.Addr
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	srv = servertest.Start(t, server.Options{Dir: dir}, addr)
	check(srv, servertest.Store(t, servertest.Dial(t, srv.Addr, rpc.DialOptions{}), remote.Options{}))
}
