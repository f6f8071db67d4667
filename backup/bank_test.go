package backup

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/workload"
)

// TestBackupDuringBank: a backup taken, in pages of a few cells, while
// transfers between the accounts commit is one snapshot: restored into a
// fresh store, the balances sum to what the bank opened with.
func TestBackupDuringBank(t *testing.T) {
	for _, backend := range []string{"memory", "pebble"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			var opts percolator.Options
			if backend == "pebble" {
				opts.Dir = t.TempDir()
			}
			db := open(t, opts)
			const accounts, initial = 40, 100
			started := make(chan struct{}, 1)
			bank := workload.BankOptions{Accounts: accounts, Initial: initial, Workers: 6, Duration: 20 * time.Second,
				OnCommit: func(string) {
					select {
					case started <- struct{}{}:
					default:
					}
				}}
			bctx, stop := context.WithCancel(ctx)
			defer stop()
			done := make(chan error, 1)
			go func() { _, err := workload.RunBank(bctx, db, bank); done <- err }()
			<-started
			var pages int
			var buf bytes.Buffer
			before := db.Stats().Commits
			s, err := Write(ctx, db, &buf, Options{PageCells: 3, beforePage: func(int, uint64) {
				pages++
				awaitCommit(t, db) // a transfer commits between any two pages
			}})
			during := db.Stats().Commits - before
			stop()
			if berr := <-done; berr != nil {
				t.Fatal(berr)
			}
			if err != nil {
				t.Fatal(err)
			}
			to := open(t, percolator.Options{})
			if _, err := Restore(ctx, to, bytes.NewReader(buf.Bytes()), RestoreOptions{}); err != nil {
				t.Fatal(err)
			}
			a, err := workload.AuditBank(ctx, to)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Check(accounts, initial); err != nil {
				t.Fatalf("the restored bank: %v", err)
			}
			t.Logf("%d cells in %d pages while %d transfers committed", s.Cells, pages, during)
		})
	}
}

// awaitCommit waits until db commits a transaction.
func awaitCommit(t testing.TB, db *percolator.DB) {
	t.Helper()
	n := db.Stats().Commits
	for deadline := time.Now().Add(10 * time.Second); db.Stats().Commits == n; time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatal("no transfer committed in 10s")
		}
	}
}
