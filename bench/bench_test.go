package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestQueueFigure: the queue figure, with few items in flight, reports a
// row for both sides at both counts, its three summary lines and its two
// targets (a smoke test: the figures themselves are not judged here).
func TestQueueFigure(t *testing.T) {
	opts := Options{Dir: t.TempDir(), Duration: 300 * time.Millisecond, ValueSize: 100}
	opts.EnsureDefaults()
	b := &runner{opts: opts}
	var r Report
	if err := b.queueInFlight(context.Background(), &r, 100, 2000); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(strings.Fields(strings.Join(r.Lines, "\n")), " ")
	for _, want := range []string{"queue 100 ", "scan 100 ", "queue 2000 ", "scan 2000 ",
		"keys visited per Pop, 2000 vs 100 in flight", "pop+ack items/s, 2000 vs 100", "pop+ack at 2000 in flight"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, strings.Join(r.Lines, "\n"))
		}
	}
	if len(r.Targets) != 2 {
		t.Errorf("targets %+v, want 2", r.Targets)
	}
	if !slices.Contains(Figures(Embedded), "queue") {
		t.Errorf("no queue figure among %q", Figures(Embedded))
	}
}

// TestRunReports: Run hands each figure's report over as it ends, in the
// suite's order, with its targets; an unknown figure or bad options are
// ErrInvalidArgument and run nothing.
func TestRunReports(t *testing.T) {
	ctx := context.Background()
	var reports []Report
	opts := Options{Dir: t.TempDir(), Duration: 100 * time.Millisecond, Writers: 4, Readers: 2, Keys: 100}
	if err := Run(ctx, opts, []string{"writes", "oracle"}, func(r Report) { reports = append(reports, r) }); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 2 || reports[0].Figure != "oracle" || reports[1].Figure != "writes" ||
		len(reports[0].Targets) != 1 || !strings.HasPrefix(reports[1].Lines[0], "writes:  ") {
		t.Fatalf("reports %+v", reports)
	}
	for _, c := range []struct {
		opts  Options
		names []string
	}{
		{opts, []string{"nope"}},
		{Options{Dir: opts.Dir, Server: ServerTarget{Addr: "127.0.0.1:1"}}, []string{"bank"}},
		{Options{Dir: opts.Dir, EditFraction: 2}, nil},
		{Options{Dir: opts.Dir, Bigtable: "p/i/t", BigtableEmulator: true}, nil},
	} {
		err := Run(ctx, c.opts, c.names, func(r Report) { t.Errorf("%+v %q ran %s", c.opts, c.names, r.Figure) })
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Run(%+v, %q) = %v", c.opts, c.names, err)
		}
	}
}

// TestPrepareDir: a scratch directory is new, empty or made by bench; a
// temporary one is removed by its cleanup; any other is refused and
// nothing in it deleted.
func TestPrepareDir(t *testing.T) {
	tmp, cleanup, err := PrepareDir("")
	if err != nil {
		t.Fatal(err)
	}
	cleanup()
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary directory %s left: %v", tmp, err)
	}
	dir := filepath.Join(t.TempDir(), "new")
	if _, _, err := PrepareDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "store"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := PrepareDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "store")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a directory bench made was not emptied: %v", err)
	}
	mine := t.TempDir()
	if err := os.WriteFile(filepath.Join(mine, "precious"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := PrepareDir(mine); !errors.Is(err, ErrNotScratch) {
		t.Fatalf("PrepareDir of a directory bench did not make: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mine, "precious")); err != nil {
		t.Fatal(err)
	}
}
