package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
	"github.com/seed-992972ee/percolator/internal/userstore"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// TestGraphCLI: load part of the shipped Debian graph, then query (in
// index order: by kind, then package), degree, insert, delete and check,
// on an embedded directory; check exits 1 on a corrupted index; bad
// command lines exit 2.
func TestGraphCLI(t *testing.T) {
	t.Parallel() // its own directories only, and no bound on the machine's speed: another test may run meanwhile
	db := t.TempDir() + "/db"
	out, _ := mustRun(t, 0, "graph", "load", "--dir", db, "--limit", "1500")
	if !strings.Contains(out, "loaded 1500 edges from debian-deps.tsv.gz into label depends (strong)") {
		t.Fatalf("load: %s", out)
	}
	out, _ = mustRun(t, 0, "graph", "query", "--dir", db, "--in", "libc6")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 50 {
		t.Fatalf("reverse dependencies of libc6: %d lines:\n%s", len(lines), out)
	}
	var order []string
	for _, l := range lines {
		f := strings.Fields(l)
		kind := f[len(f)-1]
		order = append(order, kind+" "+f[0])
	}
	if !slices.IsSorted(order) {
		t.Fatalf("reverse dependencies of libc6 not in index order (kind, then package):\n%s", out)
	}
	deg, _ := mustRun(t, 0, "graph", "degree", "--dir", db, "--in", "libc6")
	if n, _ := strconv.Atoi(strings.TrimSpace(deg)); n != len(lines) {
		t.Fatalf("degree --in libc6 = %s, query listed %d", deg, len(lines))
	}
	page, _ := mustRun(t, 0, "graph", "query", "--dir", db, "--in", "libc6", "--offset", "2", "--limit", "3")
	if got := strings.Split(strings.TrimSpace(page), "\n"); !slices.Equal(got, lines[2:5]) {
		t.Fatalf("offset 2 limit 3: %q, want %q", got, lines[2:5])
	}
	mustRun(t, 0, "graph", "insert", "--dir", db, "mytool", "libc6", "kind=Depends", "constraint=>= 2.36")
	mustRun(t, 0, "graph", "delete", "--dir", db, lines[0][:strings.IndexByte(lines[0], '\t')], "libc6")
	deg, _ = mustRun(t, 0, "graph", "degree", "--dir", db, "--in", "libc6")
	if n, _ := strconv.Atoi(strings.TrimSpace(deg)); n != len(lines) {
		t.Fatalf("after one insert and one delete: degree %s, want %d", deg, len(lines))
	}
	out, _ = mustRun(t, 0, "graph", "check", "--dir", db)
	if !strings.Contains(out, "ok") {
		t.Fatalf("check: %s", out)
	}
	// A stray index edge: check names it and exits 1.
	pdb, err := percolator.Open(context.Background(), percolator.Options{Dir: db})
	if err != nil {
		t.Fatal(err)
	}
	row := []byte("graph/i/depends\x00\x01by_kind\x00\x01ilibc6\x00\x01\x01Depends\x00\x01ghost\x00\x01")
	if err := userstore.Raw(pdb.Store()).Mutate(context.Background(), row, storage.SetCell("graph", "e", 1, []byte(`{"ts":1}`))); err != nil {
		t.Fatal(err)
	}
	pdb.Close()
	out, _ = mustRun(t, 1, "graph", "check", "--dir", db)
	if !strings.Contains(out, "mismatch") || !strings.Contains(out, "ghost") {
		t.Fatalf("check of a corrupted index: %s", out)
	}

	for _, args := range [][]string{
		{"graph"},
		{"graph", "nope", "--dir", db},
		{"graph", "query", "--dir", db},
		{"graph", "query", "--dir", db, "--in", "a", "--out", "b"},
		{"graph", "query", "--dir", db, "--in", "a", "--limit", "-1"},
		{"graph", "insert", "--dir", db, "onlysrc"},
		{"graph", "insert", "--dir", db, "a", "b", "noequals"},
		{"graph", "load", "--dir", db, "--consistency", "eventual"},
		{"graph", "degree", "--in", "a"},
		{"graph", "load", "--dir", db, "--limit", "1", "--consistency", "weak"}, // depends is strong
	} {
		if _, errOut, code := runCLI(t, args...); code != 2 {
			t.Errorf("percolator %q: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
	for _, args := range [][]string{
		{"graph", "query", "--dir", db, "--in", "libc6", "--label", "nope"},
		{"graph", "insert", "--dir", db, "a", "b", "color=red"},
		{"graph", "load", "--dir", db, t.TempDir() + "/missing.tsv"},
	} {
		if _, errOut, code := runCLI(t, args...); code != 1 || errOut == "" {
			t.Errorf("percolator %q: exit %d, want 1 with a message (%s)", args, code, errOut)
		}
	}
}

// TestGraphCLIServer: the same commands on a server (another process),
// txn consistency.
func TestGraphCLIServer(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocess")
	}
	addr := freeAddr(t)
	serveProc(t, t.TempDir(), addr)
	mustRun(t, 0, "graph", "load", "--server", addr, "--limit", "300", "--consistency", "txn")
	out, _ := mustRun(t, 0, "graph", "query", "--server", addr, "--in", "libc6", "--limit", "3")
	if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != 3 {
		t.Fatalf("query --limit 3 on the server: %q", out)
	}
	mustRun(t, 0, "graph", "check", "--server", addr)
}

// TestGraphCLIBigtable: the same commands on Bigtable (the emulator) and
// etcd, with an elected oracle process.
func TestGraphCLIBigtable(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess")
	}
	tg := bigtableTarget(t, "test/test/graph")
	mustRun(t, 0, append([]string{"graph", "load", "--limit", "300"}, tg...)...)
	out, _ := mustRun(t, 0, append([]string{"graph", "query", "--in", "libc6", "--limit", "3"}, tg...)...)
	if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != 3 {
		t.Fatalf("query --limit 3 on Bigtable: %q", out)
	}
	mustRun(t, 0, append([]string{"graph", "check"}, tg...)...)
}

// bigtableTarget starts the Bigtable emulator with table made, one etcd
// member and an elected oracle process, and returns the flags that reach
// them.
func bigtableTarget(t *testing.T, table string) []string {
	t.Helper()
	emu, err := bigtable.StartEmulator("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	t.Setenv("BIGTABLE_EMULATOR_HOST", emu.Addr())
	var bopts bigtable.Options
	if err := bopts.ParseTable(table); err != nil {
		t.Fatal(err)
	}
	if err := bigtable.Init(context.Background(), bopts); err != nil {
		t.Fatal(err)
	}
	m := etcdtest.Start(t)
	o := startOracleProc(t, m, oracleLease, "--bigtable", table)
	waitLeader(t, etcdtest.Client(t, m), 20*time.Second, o)
	return []string{"--bigtable", table, "--etcd", strings.Join(m.Endpoints(), ",")}
}

// TestGraphMutateMessages: insert and delete say what they did, in words:
// "inserted" a new edge, "updated" an existing one, "deleted" a live edge;
// a delete of an edge that is not there says so and exits 0 (deleting
// nothing is not an error), for every consistency.
func TestGraphMutateMessages(t *testing.T) {
	t.Parallel() // its own directories only, and no bound on the machine's speed: another test may run meanwhile
	db := t.TempDir() + "/db"
	for _, c := range []string{"strong", "weak", "txn"} {
		l := "l" + c
		mustRun(t, 0, "graph", "load", "--dir", db, "--label", l, "--consistency", c, "--limit", "1")
		for _, step := range []struct {
			args []string
			want string
		}{
			{[]string{"insert", "a", "b", "kind=Depends"}, "inserted a -" + l + "-> b"},
			{[]string{"insert", "a", "b", "kind=Recommends"}, "updated a -" + l + "-> b"},
			{[]string{"delete", "a", "b"}, "deleted a -" + l + "-> b"},
			{[]string{"delete", "a", "b"}, "no edge a -" + l + "-> b: nothing deleted"},
			{[]string{"delete", "x", "y"}, "no edge x -" + l + "-> y: nothing deleted"},
			{[]string{"insert", "a", "b"}, "inserted a -" + l + "-> b"},
		} {
			args := append([]string{"graph", step.args[0], "--dir", db, "--label", l}, step.args[1:]...)
			out, _ := mustRun(t, 0, args...)
			if strings.TrimSpace(out) != step.want {
				t.Errorf("%s: percolator %q printed %q, want %q", c, args, out, step.want)
			}
		}
	}
}
