package percolator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
)

// The doctors of the write-skew example: each is on call ("on") or not.
var doctors = []string{"alice", "bob"}

// writeSkewStores are the DBs the write-skew tests run on: embedded
// Pebble in a directory, and in memory.
var writeSkewStores = []string{"pebble", "memory"}

// openStore opens a DB of one of writeSkewStores.
func openStore(t *testing.T, store string) *percolator.DB {
	if store == "memory" {
		return open(t, percolator.Options{})
	}
	return open(t, percolator.Options{Dir: t.TempDir()})
}

// putOnCall sets every doctor on call.
func putOnCall(t *testing.T, db *percolator.DB) {
	t.Helper()
	err := db.Update(context.Background(), func(tx *percolator.Txn) error {
		for _, d := range doctors {
			if err := tx.Set(d, "oncall", []byte("on")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// onCall returns the doctors on call in a fresh snapshot.
func onCall(t *testing.T, db *percolator.DB) []string {
	t.Helper()
	var on []string
	err := db.View(context.Background(), func(tx *percolator.Txn) error {
		for _, d := range doctors {
			v, err := tx.Get(context.Background(), d, "oncall")
			if err != nil {
				return err
			}
			if string(v) == "on" {
				on = append(on, d)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return on
}

// readOnCall reads every doctor's cell in tx, with GetForUpdate if
// forUpdate, and returns the doctors on call.
func readOnCall(ctx context.Context, tx *percolator.Txn, forUpdate bool) (map[string]bool, error) {
	on := map[string]bool{}
	for _, d := range doctors {
		read := tx.Get
		if forUpdate {
			read = tx.GetForUpdate
		}
		v, err := read(ctx, d, "oncall")
		if err != nil {
			return nil, err
		}
		on[d] = string(v) == "on"
	}
	return on, nil
}

// goOffCall takes me off call in tx if another doctor is on call, as on
// reads.
func goOffCall(tx *percolator.Txn, me string, on map[string]bool) error {
	for d, isOn := range on {
		if d != me && isOn {
			return tx.Set(me, "oncall", []byte("off"))
		}
	}
	return nil
}

// TestWriteSkew: two doctors on call each begin, read both cells, and
// go off call because the other is on; then both commit. With Get both
// commit and nobody is on call (snapshot isolation's write skew); with
// GetForUpdate the second commit fails with ErrConflict and the other
// doctor stays on call.
func TestWriteSkew(t *testing.T) {
	for _, store := range writeSkewStores {
		for _, forUpdate := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/forUpdate=%v", store, forUpdate), func(t *testing.T) {
				ctx := context.Background()
				db := openStore(t, store)
				putOnCall(t, db)
				var txs []*percolator.Txn
				for range doctors {
					tx, err := db.Begin(ctx)
					if err != nil {
						t.Fatal(err)
					}
					txs = append(txs, tx)
				}
				reads := make([]map[string]bool, len(txs))
				for i, tx := range txs {
					var err error
					if reads[i], err = readOnCall(ctx, tx, forUpdate); err != nil {
						t.Fatal(err)
					}
				}
				for i, tx := range txs {
					if err := goOffCall(tx, doctors[i], reads[i]); err != nil {
						t.Fatal(err)
					}
				}
				first, second := txs[0].Commit(ctx), txs[1].Commit(ctx)
				on := onCall(t, db)
				if !forUpdate {
					if first != nil || second != nil || len(on) != 0 {
						t.Fatalf("with Get: commits %v, %v and %v on call; want both committed and nobody on call (write skew)", first, second, on)
					}
					return
				}
				var ce *percolator.ConflictError
				if first != nil || !errors.Is(second, percolator.ErrConflict) || !errors.As(second, &ce) {
					t.Fatalf("with GetForUpdate: commits %v, %v; want the first committed, the second ErrConflict", first, second)
				}
				if !strings.HasPrefix(second.Error(), "percolator: ") {
					t.Errorf("the conflict says %q; want the API's prefix", second)
				}
				if len(on) != 1 || on[0] != "bob" {
					t.Fatalf("with GetForUpdate: %v on call; want bob, whose transaction failed", on)
				}
			})
		}
	}
}

// TestWriteSkewConcurrent: rounds of every doctor's Update at once, each
// reading both cells with GetForUpdate and going off call if the other is
// on; the first attempts all read before any writes, so they overlap and
// conflict, and Update retries the losers. After every round at least one
// doctor is on call, and exactly one is.
func TestWriteSkewConcurrent(t *testing.T) {
	for _, store := range writeSkewStores {
		t.Run(store, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db := openStore(t, store)
			const rounds = 20
			conflicts := 0
			for round := range rounds {
				putOnCall(t, db)
				var arrived, wg sync.WaitGroup
				arrived.Add(len(doctors))
				errs := make([]error, len(doctors))
				attempts := make([]int, len(doctors))
				for i, me := range doctors {
					wg.Go(func() {
						errs[i] = db.Update(ctx, func(tx *percolator.Txn) error {
							attempts[i]++
							on, err := readOnCall(ctx, tx, true)
							if attempts[i] == 1 {
								// Every first attempt has read before any writes:
								// no lock is taken before Commit.
								arrived.Done()
								arrived.Wait()
							}
							if err != nil {
								return err
							}
							return goOffCall(tx, me, on)
						})
					})
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if on := onCall(t, db); len(on) != 1 {
					t.Fatalf("round %d: %v on call; want exactly one (at least one, and one went off)", round, on)
				}
				for _, n := range attempts {
					conflicts += n - 1
				}
			}
			if conflicts < rounds {
				t.Fatalf("%d retries in %d rounds: the transactions did not overlap", conflicts, rounds)
			}
		})
	}
}

// TestGetForUpdateAPI: GetForUpdate reads as Get does (ErrNotFound for an
// absent cell, the transaction's own write), and is refused in View with
// ErrReadOnly, as Set is.
func TestGetForUpdateAPI(t *testing.T) {
	ctx := context.Background()
	db := open(t, percolator.Options{})
	putOnCall(t, db)
	err := db.Update(ctx, func(tx *percolator.Txn) error {
		if v, err := tx.GetForUpdate(ctx, "alice", "oncall"); err != nil || string(v) != "on" {
			t.Errorf("GetForUpdate = %q, %v", v, err)
		}
		if _, err := tx.GetForUpdate(ctx, "nobody", "oncall"); !errors.Is(err, percolator.ErrNotFound) {
			t.Errorf("an absent cell: %v; want ErrNotFound", err)
		}
		if err := tx.Set("bob", "oncall", []byte("off")); err != nil {
			return err
		}
		if v, err := tx.GetForUpdate(ctx, "bob", "oncall"); err != nil || string(v) != "off" {
			t.Errorf("GetForUpdate of an own write = %q, %v", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if on := onCall(t, db); len(on) != 1 || on[0] != "alice" {
		t.Fatalf("%v on call; want alice (GetForUpdate changes no value)", on)
	}
	err = db.View(ctx, func(tx *percolator.Txn) error {
		_, err := tx.GetForUpdate(ctx, "alice", "oncall")
		return err
	})
	if !errors.Is(err, percolator.ErrReadOnly) || !strings.HasPrefix(err.Error(), "percolator: ") {
		t.Fatalf("GetForUpdate in View: %v; want ErrReadOnly", err)
	}
}
