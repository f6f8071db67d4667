package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/seed-992972ee/percolator"
)

// TestGCKilledMidPass: `percolator gc` killed (SIGKILL) in the middle of
// its pass, right after it reported its first batch of rows, leaves every
// value readable; the next `gc` finishes the interrupted pass from the row
// it had reached (it says so, and visits fewer rows than the store holds),
// and a dry run after it finds nothing left to remove.
func TestGCKilledMidPass(t *testing.T) {
	t.Parallel() // it waits on a process of its own: another test may run meanwhile
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "db")
	const rows, perTxn = 4_000, 2_000
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir, DisableGC: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"old", "new"} {
		for first := 0; first < rows; first += perTxn {
			if err := db.Update(ctx, func(tx *percolator.Txn) error {
				for i := first; i < first+perTxn; i++ {
					if err := tx.Set(fmt.Sprintf("r%05d", i), "v", []byte(v)); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	cmd := command("gc", "--dir", dir, "--gc-lifetime", "50ms")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.HasPrefix(sc.Text(), "collecting:") {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("gc was not killed mid-pass (%v); it wrote:\n%s", err, strings.Join(seen, "\n"))
	}

	var resumed, dry struct {
		Resumed  bool `json:"resumed"`
		Rows     int  `json:"rows_visited"`
		Versions int  `json:"versions_removed"`
	}
	out, _ := mustRun(t, 0, "gc", "--dir", dir, "--gc-lifetime", "50ms", "--json")
	if err := json.Unmarshal([]byte(out), &resumed); err != nil || !resumed.Resumed || resumed.Rows == 0 || resumed.Rows >= rows || resumed.Versions == 0 {
		t.Fatalf("the gc after the kill: %+v, %v; want it to resume the interrupted pass\n%s", resumed, err, out)
	}
	out, _ = mustRun(t, 0, "gc", "--dir", dir, "--gc-lifetime", "50ms", "--dry-run", "--json")
	if err := json.Unmarshal([]byte(out), &dry); err != nil || dry.Versions != 0 {
		t.Fatalf("a dry run after the resumed pass: %+v, %v; want nothing left to remove\n%s", dry, err, out)
	}

	db, err = percolator.Open(ctx, percolator.Options{Dir: dir, DisableGC: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(ctx, func(tx *percolator.Txn) error {
		for i := range rows {
			row := fmt.Sprintf("r%05d", i)
			if v, err := tx.Get(ctx, row, "v"); err != nil || string(v) != "new" {
				return fmt.Errorf("%s reads %q, %v; want new", row, v, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
