package server_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator/oracle"
	oracleremote "github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
)

// epochLock and epochPut are the epoch tests' lock predicate and writes.
var epochLock = storage.Filter{{Family: "lock", Qualifier: "c"}}

func epochPut(fam, v string) []storage.Mutation {
	return []storage.Mutation{storage.SetCell(fam, "c", 1, []byte(v))}
}

// TestEpochs: a server's prewrite calls are answered with its epoch,
// which every start raises (a power cut included: the raise is durable
// before serving); a commit point carrying an older epoch is refused with
// storage.ErrEpochChanged and changes nothing, while one carrying the
// current epoch applies its check and, when it matched, the rows after
// it, in one write.
func TestEpochs(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	srv := servertest.Start(t, server.Options{FS: fs, Dir: "/db"}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	st := servertest.Store(t, conn, remote.Options{})
	lock, put := epochLock, epochPut
	matched, e1, err := st.CheckAndMutateRowsDeferred(ctx, []storage.RowCheck{
		{Row: []byte("p"), Predicate: lock, IfFalse: put("lock", "l")},
		{Row: []byte("s"), Predicate: lock, IfFalse: put("lock", "l")},
	})
	if err != nil || len(matched) != 2 || matched[0] || matched[1] || e1 == 0 {
		t.Fatalf("prewrites: %v, epoch %d, %v", matched, e1, err)
	}
	again, e, err := st.CheckAndMutateRowsDeferred(ctx, []storage.RowCheck{
		{Row: []byte("p"), Predicate: lock, IfFalse: put("lock", "other")},
		{Row: []byte("q"), Predicate: lock, IfFalse: put("lock", "l")},
	})
	if err != nil || !again[0] || again[1] || e != e1 {
		t.Fatalf("second call: %v, epoch %d (was %d), %v; want p blocked, q applied, the same epoch", again, e, e1, err)
	}

	crashed := fs.CrashClone(vfs.CrashCloneCfg{}) // what was synced, no more
	srv.Kill()
	srv = servertest.Start(t, server.Options{FS: crashed, Dir: "/db"}, srv.Addr)
	conn = servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	st = servertest.Store(t, conn, remote.Options{})
	// The unsynced prewrites went with the power: they are made again, in
	// the new run.
	matched, e2, err := st.CheckAndMutateRowsDeferred(ctx, []storage.RowCheck{
		{Row: []byte("p"), Predicate: lock, IfFalse: put("lock", "l")},
		{Row: []byte("s"), Predicate: lock, IfFalse: put("lock", "l")},
	})
	if err != nil || matched[0] || matched[1] || e2 <= e1 {
		t.Fatalf("prewrites after a power cut: %v, epoch %d (was %d), %v; want both applied and the epoch raised", matched, e2, e1, err)
	}

	commit := storage.RowCheck{Row: []byte("p"), Predicate: lock, IfTrue: put("write", "w")}
	then := []storage.RowMutation{{Row: []byte("s"), Mutations: put("write", "w")}}
	if _, err := st.CheckAndMutateInEpoch(ctx, e1, commit, then); !errors.Is(err, storage.ErrEpochChanged) {
		t.Fatalf("commit in the old epoch: %v; want storage.ErrEpochChanged", err)
	}
	for _, row := range []string{"p", "s"} {
		r, err := srv.Store().ReadRow(ctx, []byte(row), storage.Filter{{Family: "write", AllQualifiers: true}})
		if err != nil || len(r.Cells) != 0 {
			t.Fatalf("%s after the refused commit: %v, %v; want nothing written", row, r.Cells, err)
		}
	}
	// The commit in the current epoch finds p's lock.
	ok, err := st.CheckAndMutateInEpoch(ctx, e2, commit, then)
	if err != nil || !ok {
		t.Fatalf("commit in the current epoch: %v, %v", ok, err)
	}
	for _, row := range []string{"p", "s"} {
		r, err := srv.Store().ReadRow(ctx, []byte(row), storage.Filter{{Family: "write", AllQualifiers: true}})
		if err != nil || len(r.Cells) != 1 {
			t.Fatalf("%s after the commit: %v, %v; want its write", row, r.Cells, err)
		}
	}
	// A check that does not match applies neither branch's rows after it.
	miss := storage.RowCheck{Row: []byte("q2"), Predicate: lock, IfTrue: put("write", "w")}
	if ok, err := st.CheckAndMutateInEpoch(ctx, e2, miss, []storage.RowMutation{{Row: []byte("t"), Mutations: put("write", "w")}}); err != nil || ok {
		t.Fatalf("commit without a lock: %v, %v", ok, err)
	}
	if r, err := srv.Store().ReadRow(ctx, []byte("t"), storage.Filter{{Family: "write", AllQualifiers: true}}); err != nil || len(r.Cells) != 0 {
		t.Fatalf("t after an unmatched check: %v, %v; want nothing", r.Cells, err)
	}
}

// serverWithOracle starts a server and returns its store and oracle, as
// a client sees them.
func serverWithOracle(t *testing.T) (*servertest.Server, *remote.Store, *oracle.Client) {
	srv := servertest.Start(t, server.Options{}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	return srv, servertest.Store(t, conn, remote.Options{}), oracleremote.NewClient(conn)
}

// TestCommitInEpoch: a commit point whose timestamp the server takes
// applies, when its check matched, its if_true, the rows after it and
// the stamped records in one write, the records at a timestamp above
// every one the oracle handed out before the call and below every one
// after it; a check that does not match applies nothing and takes no
// timestamp; a call of an older epoch applies nothing.
func TestCommitInEpoch(t *testing.T) {
	ctx := context.Background()
	srv, st, orc := serverWithOracle(t)
	lock, put := epochLock, epochPut
	_, epoch, err := st.CheckAndMutateRowsDeferred(ctx, []storage.RowCheck{
		{Row: []byte("p"), Predicate: lock, IfFalse: put("lock", "l")},
		{Row: []byte("s"), Predicate: lock, IfFalse: put("lock", "l")},
	})
	if err != nil {
		t.Fatal(err)
	}
	unlock := []storage.Mutation{storage.DeleteCell("lock", "c", 1)}
	check := storage.RowCheck{Row: []byte("p"), Predicate: lock, IfTrue: unlock}
	then := []storage.RowMutation{{Row: []byte("s"), Mutations: unlock}}
	stamped := []storage.RowMutation{{Row: []byte("p"), Mutations: put("write", "wp")}, {Row: []byte("s"), Mutations: put("write", "ws")}}

	if _, _, err := st.CommitInEpoch(ctx, epoch+1, check, then, stamped, nil); !errors.Is(err, storage.ErrEpochChanged) {
		t.Fatalf("a commit of another epoch: %v; want storage.ErrEpochChanged", err)
	}
	before, err := orc.Timestamp(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ts, ok, err := st.CommitInEpoch(ctx, epoch, check, then, stamped, nil)
	if err != nil || !ok {
		t.Fatalf("commit: %d, %v, %v", ts, ok, err)
	}
	after, err := orc.Timestamp(ctx)
	if err != nil || ts <= before || ts >= after {
		t.Fatalf("the commit's timestamp %d, want between %d and %d (%v)", ts, before, after, err)
	}
	for _, row := range []string{"p", "s"} {
		r, err := srv.Store().ReadRow(ctx, []byte(row), storage.Filter{{Family: "write", AllQualifiers: true}, {Family: "lock", AllQualifiers: true}})
		if err != nil || len(r.Cells) != 1 || r.Cells[0].Family != "write" || r.Cells[0].TS != ts || string(r.Cells[0].Value) != "w"+row {
			t.Fatalf("%s after the commit: %v, %v; want its record at %d and no lock", row, r.Cells, err, ts)
		}
	}
	// A copy finds the lock gone: nothing applied, no timestamp.
	ts2, ok, err := st.CommitInEpoch(ctx, epoch, check, then, stamped, nil)
	if err != nil || ok || ts2 != 0 {
		t.Fatalf("a copy of the commit: %d, %v, %v; want not matched, 0", ts2, ok, err)
	}
	r, err := srv.Store().ReadRow(ctx, []byte("s"), storage.Filter{{Family: "write", AllQualifiers: true}})
	if err != nil || len(r.Cells) != 1 {
		t.Fatalf("s after the copy: %v, %v; want the one record", r.Cells, err)
	}
	// Bad input changes nothing.
	stray := []storage.RowMutation{{Row: []byte("elsewhere"), Mutations: put("write", "x")}}
	if _, _, err := st.CommitInEpoch(ctx, epoch, check, then, stray, nil); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("a stamped row the call does not write: %v; want ErrInvalidArgument", err)
	}
}

// TestReadRowsFresh: one call takes a timestamp from the server's
// oracle, above every one handed out before it and below every one
// after, and reads each row below it: a version at or above it is not
// returned, whatever the filter asked.
func TestReadRowsFresh(t *testing.T) {
	ctx := context.Background()
	_, st, orc := serverWithOracle(t)
	before, err := orc.Timestamp(ctx)
	if err != nil {
		t.Fatal(err)
	}
	far := before + 1<<40 // a version no timestamp of this test reaches
	for _, r := range []string{"a", "b"} {
		if err := st.Mutate(ctx, []byte(r), storage.SetCell("f", "x", before, []byte(r+"-old")), storage.SetCell("f", "x", far, []byte(r+"-far"))); err != nil {
			t.Fatal(err)
		}
	}
	ts, rows, err := st.ReadRowsFresh(ctx, []storage.RowRead{
		{Row: []byte("b"), Filter: storage.Filter{{Family: "f", Qualifier: "x"}}},
		{Row: []byte("a"), Filter: storage.Filter{{Family: "f", Qualifier: "x", Time: storage.From(far)}}},
		{Row: []byte("none"), Filter: storage.Filter{{Family: "f", AllQualifiers: true}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	after, err := orc.Timestamp(ctx)
	if err != nil || ts <= before || ts >= after {
		t.Fatalf("the read's timestamp %d, want between %d and %d (%v)", ts, before, after, err)
	}
	if len(rows) != 3 || len(rows[0].Cells) != 1 || string(rows[0].Cells[0].Value) != "b-old" || len(rows[1].Cells) != 0 || len(rows[2].Cells) != 0 {
		t.Fatalf("rows read below %d: %v; want b's old version only", ts, rows)
	}
	if _, _, err := st.ReadRowsFresh(ctx, nil); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("a fresh read of no rows: %v; want ErrInvalidArgument", err)
	}
}

// TestReadRows: one call reads several rows, each through its filter, in
// order; a row read twice is answered twice.
func TestReadRows(t *testing.T) {
	ctx := context.Background()
	srv := servertest.Start(t, server.Options{}, "")
	st := servertest.Store(t, servertest.Dial(t, srv.Addr, rpc.DialOptions{}), remote.Options{})
	for _, r := range []string{"a", "b"} {
		if err := st.Mutate(ctx, []byte(r), storage.SetCell("f", "x", 1, []byte(r+"x")), storage.SetCell("f", "y", 1, []byte(r+"y"))); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := st.ReadRows(ctx, []storage.RowRead{
		{Row: []byte("b"), Filter: storage.Filter{{Family: "f", Qualifier: "y"}}},
		{Row: []byte("none"), Filter: storage.Filter{{Family: "f", AllQualifiers: true}}},
		{Row: []byte("a"), Filter: storage.Filter{{Family: "f", AllQualifiers: true}}},
		{Row: []byte("b"), Filter: storage.Filter{{Family: "f", Qualifier: "x"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, r := range rows {
		s := string(r.Key) + ":"
		for _, c := range r.Cells {
			s += string(c.Value) + ","
		}
		got = append(got, s)
	}
	want := []string{"b:by,", "none:", "a:ax,ay,", "b:bx,"}
	if len(got) != len(want) {
		t.Fatalf("ReadRows = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ReadRows = %q, want %q", got, want)
		}
	}
	if _, err := st.ReadRows(ctx, []storage.RowRead{{Row: nil}}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("ReadRows of an empty row: %v, want ErrInvalidArgument", err)
	}
}
