//go:build unix

package main

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
)

// TestDeadClientLocksResolvedAtSessionExpiry: a `bank --server
// --session-ttl 3s` process is stopped while it holds locks and killed
// with SIGKILL; a reader of one of its locked cells must find it dead by
// its session (expired 3s after its last renewal) and resolve the lock,
// not wait for the lock's own TTL (10s).
func TestDeadClientLocksResolvedAtSessionExpiry(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocesses")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, addr := t.TempDir(), freeAddr(t)
	serveProc(t, dir, addr)
	const accounts = 10
	a := startBankProc(t, "A", []string{"--server", addr, "--session-ttl", "3s"}, accounts)
	a.waitAcks(t, 1, 30*time.Second)
	db, err := percolator.Open(ctx, percolator.Options{Server: addr, Logger: discardLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pid := a.cmd.Process.Pid
	held := a.stopHoldingPid(ctx, t, db, pid)
	a.signal(t, syscall.SIGKILL)
	killed := time.Now()
	<-a.done
	_ = a.cmd.Wait()
	l := held[0]
	err = db.View(ctx, func(tx *percolator.Txn) error {
		_, err := tx.Get(ctx, string(l.Row), l.Column)
		return err
	})
	waited := time.Since(killed)
	if err != nil {
		t.Fatalf("reading %s/%s of the killed process: %v", l.Row, l.Column, err)
	}
	t.Logf("the read of %s/%s, locked by the killed process, returned %v after the kill (lock TTL %v)",
		l.Row, l.Column, waited.Round(time.Millisecond), time.Duration(l.Lock.TTLMS)*time.Millisecond)
	// The dead process's session expires at most 3s after the kill (its
	// last renewal was before it), and the server sweeps it within 100ms;
	// its lock, written just before the stop, expires about 10s after it.
	// 8s leaves 5s to a loaded machine past the session's expiry, while a
	// read that waited for the lock's TTL could not return before 9.9s or
	// so: the bound separates the two mechanisms, it does not time the
	// machine.
	if waited >= 8*time.Second {
		t.Fatalf("the read waited %v after the kill: the lock was resolved by its TTL, not by the owner's expired 3s session", waited.Round(time.Millisecond))
	}
}

// stopHoldingPid is stopHolding for a process whose owner ID names its
// pid (coord.NewOwnerID: host/pid/random): it stops the process at a
// moment it holds a lock, and returns its locks read while it is
// stopped.
func (p *bankProc) stopHoldingPid(ctx context.Context, t *testing.T, db *percolator.DB, pid int) []percolator.LockInfo {
	t.Helper()
	mark := "/" + strconv.Itoa(pid) + "/"
	for try := 1; try <= 100; try++ {
		p.signal(t, syscall.SIGSTOP)
		waitStopped(t, pid)
		locks, err := db.Locks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var held []percolator.LockInfo
		for _, l := range locks {
			if strings.Contains(l.Lock.Owner, mark) {
				held = append(held, l)
			}
		}
		if len(held) > 0 {
			return held
		}
		p.signal(t, syscall.SIGCONT)
		time.Sleep(time.Duration(20+try) * time.Millisecond)
	}
	t.Fatalf("bank %s held no lock at any of 100 stops", p.name)
	return nil
}
