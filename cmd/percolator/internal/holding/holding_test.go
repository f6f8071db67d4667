package holding

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/lock"
)

// TestRun: the command runs with the lease's token and name, its status
// comes back, and the lease is released once it exited.
func TestRun(t *testing.T) {
	ctx := context.Background()
	db, err := percolator.Open(ctx, percolator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lk, err := lock.New(db.Store(), lock.Options{Holder: "test"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := lk.Acquire(ctx, "res", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command("sh", "-c", `echo "$PERCOLATOR_LOCK_NAME $PERCOLATOR_LOCK_TOKEN"; exit 3`)
	var out bytes.Buffer
	c.Stdout = &out
	err = Run(ctx, lk, l, c, io.Discard)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || strings.TrimSpace(out.String()) != "res 1" {
		t.Fatalf("Run: %v, output %q", err, out.String())
	}
	st, err := lk.Show(ctx, "res")
	if err != nil || st.Held {
		t.Fatalf("after the command: %+v, %v; want the lock released", st, err)
	}
}
