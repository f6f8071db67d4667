package etcd_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/oracle/etcd"
)

// leaderKey returns the election key of the current leader.
func leaderKey(t *testing.T, cli *clientv3.Client) string {
	t.Helper()
	resp, err := cli.Get(bg, etcd.DefaultOraclePrefix+"oracle/leader/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("the leader's election key: %v %v", resp, err)
	}
	return string(resp.Kvs[0].Key)
}

// waitNotLeading waits until n no longer leads.
func waitNotLeading(t *testing.T, n *oracleNode, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for n.cand.Leading() {
		if time.Now().After(deadline) {
			t.Fatalf("%s still leads %v after its election key was deleted", n.addr, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestOracleKeyDeletedStops: deleting the leader's election key while its
// lease lives (an operator, or etcd restored from a backup) ends its term
// — it hands out nothing more — and the standby that wins waits out the
// old lease before it hands out anything: under load from clients,
// timestamps stay strictly increasing in real time. (Before, the old
// leader went on handing out timestamps from its window, below the ones
// the new leader handed out meanwhile.)
func TestOracleKeyDeletedStops(t *testing.T) {
	m := etcdtest.Start(t)
	a := startNode(t, m, etcd.CandidateOptions{})
	waitLeading(t, 10*time.Second, a)
	b := startNode(t, m, etcd.CandidateOptions{})
	stop := make(chan struct{})
	calls, since := loadCounting(t, m, 2, stop)
	waitCalls(t, since, time.Time{}, 20)
	if _, err := a.cli.Delete(bg, leaderKey(t, a.cli)); err != nil {
		t.Fatal(err)
	}
	waitNotLeading(t, a, 10*time.Second)
	if _, err := a.cand.Allocate(bg, 1); err == nil {
		t.Fatal("the old leader handed out a timestamp after its key was deleted")
	}
	deleted := time.Now()
	waitLeading(t, 15*time.Second, b)
	waitCalls(t, since, deleted, 20)
	close(stop)
	cs := calls()
	if len(cs) == 0 {
		t.Fatal("no timestamps")
	}
	checkIncreasing(t, cs)
}

// TestOracleResumesAboveLostMark: a leader dies, and the mark in etcd is
// deleted, or replaced by an older one (as restoring etcd from a backup
// does): the next leader resumes above every timestamp handed out, from
// the mark's copy in the store. (Before, it resumed at
// what etcd held: 1 after a deletion.)
func TestOracleResumesAboveLostMark(t *testing.T) {
	for _, lose := range []string{"delete", "older"} {
		t.Run(lose, func(t *testing.T) {
			m := etcdtest.Start(t)
			a := startNode(t, m, etcd.CandidateOptions{Window: 1000})
			waitLeading(t, 10*time.Second, a)
			first, err := a.cand.Allocate(bg, 1)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := a.cli.Get(bg, etcd.MarkKey(etcd.DefaultOraclePrefix))
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("the mark: %v %v", resp, err)
			}
			backup := string(resp.Kvs[0].Value)
			var last uint64
			for range 5000 { // past several extensions of the window
				if last, err = a.cand.Allocate(bg, 1); err != nil {
					t.Fatal(err)
				}
			}
			a.cand.Crash() // after it, nothing of a's writes the mark again
			if lose == "delete" {
				_, err = a.cli.Delete(bg, etcd.MarkKey(etcd.DefaultOraclePrefix))
			} else {
				_, err = a.cli.Put(bg, etcd.MarkKey(etcd.DefaultOraclePrefix), backup)
			}
			if err != nil {
				t.Fatal(err)
			}
			b := startNode(t, m, etcd.CandidateOptions{Window: 1000})
			waitLeading(t, 15*time.Second, b)
			next, err := b.cand.Allocate(bg, 1)
			if err != nil {
				t.Fatal(err)
			}
			if next <= last {
				t.Fatalf("after the mark was lost (%s) the new leader resumed at %d, not above %d (first was %d)", lose, next, last, first)
			}
			if mirror, err := oracle.ReadMirror(bg, storeOf(m)); err != nil || mirror <= last {
				t.Fatalf("the mark's copy in the store: %d %v, want above %d", mirror, err, last)
			}
		})
	}
}

// TestOracleLostMarkUnderLoad: clients ask for timestamps throughout
// while the mark in etcd is deleted, or replaced by an older one, under a
// running leader that is then killed: every client sees timestamps
// strictly increasing in real time across the failover.
func TestOracleLostMarkUnderLoad(t *testing.T) {
	for _, lose := range []string{"delete", "older"} {
		t.Run(lose, func(t *testing.T) {
			m := etcdtest.Start(t)
			a := startNode(t, m, etcd.CandidateOptions{Window: 1000})
			waitLeading(t, 10*time.Second, a)
			resp, err := a.cli.Get(bg, etcd.MarkKey(etcd.DefaultOraclePrefix))
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("the mark: %v %v", resp, err)
			}
			backup := string(resp.Kvs[0].Value)
			b := startNode(t, m, etcd.CandidateOptions{Window: 1000})
			stop := make(chan struct{})
			calls, since := loadCounting(t, m, 2, stop)
			waitCalls(t, since, time.Time{}, 20)
			if lose == "delete" {
				_, err = a.cli.Delete(bg, etcd.MarkKey(etcd.DefaultOraclePrefix))
			} else {
				_, err = a.cli.Put(bg, etcd.MarkKey(etcd.DefaultOraclePrefix), backup)
			}
			if err != nil {
				t.Fatal(err)
			}
			crashed := time.Now()
			a.cand.Crash()
			waitLeading(t, 15*time.Second, b)
			waitCalls(t, since, crashed, 20)
			close(stop)
			cs := calls()
			if len(cs) == 0 {
				t.Fatal("no timestamps")
			}
			checkIncreasing(t, cs)
		})
	}
}
