package percolator_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
)

// TestOnePhaseDeployments: a transaction that writes one row commits in
// one call embedded and over a server, and in two with TwoPhaseOnly or
// over two rows; concurrent increments of one cell through one-phase
// commits lose none (each read-modify-write conflicts with the others).
func TestOnePhaseDeployments(t *testing.T) {
	srv := servertest.Start(t, server.Options{}, "")
	for _, c := range []struct {
		name string
		opts func() percolator.Options
	}{
		{"embedded", func() percolator.Options { return percolator.Options{Dir: t.TempDir()} }},
		{"server", func() percolator.Options { return percolator.Options{Server: srv.Addr} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			db := open(t, c.opts())
			if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("one", "v", []byte("1")) }); err != nil {
				t.Fatal(err)
			}
			if s := db.Stats(); s.OnePhase != 1 {
				t.Fatalf("stats after a one-row transaction: %+v; want it one-phase", s)
			}
			if err := db.Update(ctx, func(tx *percolator.Txn) error {
				return errors.Join(tx.Set("one", "v", []byte("2")), tx.Set("two", "v", []byte("2")))
			}); err != nil {
				t.Fatal(err)
			}
			if s := db.Stats(); s.OnePhase != 1 || s.Commits != 2 {
				t.Fatalf("stats after a two-row transaction: %+v; want it in two phases", s)
			}

			var wg sync.WaitGroup
			const workers, each = 4, 10
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						err := db.Update(ctx, func(tx *percolator.Txn) error {
							var n int64
							if v, err := tx.Get(ctx, "ctr", "v"); err == nil {
								n = atoi(v)
							}
							return tx.Set("ctr", "v", []byte(strconv.FormatInt(n+1, 10)))
						})
						if err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if got := get(t, db, "ctr"); got != strconv.Itoa(workers*each) {
				t.Fatalf("counter = %s after %d increments", got, workers*each)
			}
			if s := db.Stats(); s.OnePhase < 1+workers*each {
				t.Fatalf("stats: %+v; want every increment one-phase", s)
			}
		})
	}
}
