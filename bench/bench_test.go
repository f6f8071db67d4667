package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
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

// TestShownVerdict: a target's verdict is computed from the value as its
// line prints it, rounded: a value that rounds onto the target is met,
// one just past the rounding boundary is missed, and the printed text is
// what %.Nf prints.
func TestShownVerdict(t *testing.T) {
	for _, c := range []struct {
		v        float64
		decimals int
		target   float64
		text     string
		atLeast  bool // the verdict of ">= target"
		atMost   bool // the verdict of "<= target"
	}{
		{0.25, 2, 0.25, "0.25", true, true},                    // exactly at the target
		{0.2450001, 2, 0.25, "0.25", true, true},               // just above the rounding boundary: printed 0.25
		{0.2449999, 2, 0.25, "0.24", false, true},              // just below it: printed 0.24
		{0.2549999, 2, 0.25, "0.25", true, true},               // just below the next boundary: still 0.25
		{0.2550001, 2, 0.25, "0.26", true, false},              // just above it: 0.26
		{0.996, 2, 1, "1.00", true, true},                      // "1.00x" against ">= 1x"
		{1_999_999.5, 0, 2_000_000, "2000000", true, true},     // a rate, whole numbers
		{1_999_999.4999, 0, 2_000_000, "1999999", false, true}, // just below its boundary
		{0.030049, 4, 0.03, "0.0300", true, true},              // the rerun's four decimals
		{0.030051, 4, 0.03, "0.0301", true, false},             // just above
		{0.125, 2, 0.13, "0.12", false, true},                  // an exact binary tie rounds to even, as printed
		{math.NaN(), 2, 0.25, "NaN", false, false},             // two zero rates: missed either way
		{math.Inf(1), 2, 0.25, "+Inf", true, false},            // a zero reference
	} {
		s := show(c.v, c.decimals)
		if got := fmt.Sprintf("%.*f", c.decimals, c.v); s.String() != got || s.String() != c.text {
			t.Errorf("show(%v, %d) prints %q, want %q (as %%.%df prints it: %q)", c.v, c.decimals, s, c.text, c.decimals, got)
		}
		if s.atLeast(c.target) != c.atLeast || s.atMost(c.target) != c.atMost {
			t.Errorf("%v printed %s: >= %v %v, <= %v %v; want %v, %v", c.v, s, c.target, s.atLeast(c.target), c.target, s.atMost(c.target), c.atLeast, c.atMost)
		}
	}
}

// TestRerunVerdicts: the rerun figure's verdicts agree with its printed
// ratio (four decimals) and its printed times (whole milliseconds).
func TestRerunVerdicts(t *testing.T) {
	first := 10 * time.Second // no-change limit: max(0.01x = 100ms, 300ms) = 300ms
	for _, c := range []struct {
		edit, none time.Duration
		want       []bool // edits (twice), no change
		lines      []string
	}{
		{300*time.Millisecond + 400*time.Microsecond, 300*time.Millisecond + 400*time.Microsecond, []bool{true, true, true}, []string{
			"= 0.0300x the first run (target <= 0.03x: met)", "no change: 300ms = 0.0300x the first run (target <= max(0.01x, 300ms) = 300ms: met)"}},
		{300*time.Millisecond + 600*time.Microsecond, 300*time.Millisecond + 600*time.Microsecond, []bool{false, false, false}, []string{
			"= 0.0301x the first run (target <= 0.03x: MISSED)", "no change: 301ms = 0.0301x the first run (target <= max(0.01x, 300ms) = 300ms: MISSED)"}},
	} {
		var r Report
		printRerun(&r, 100, 1, first, [2]time.Duration{c.edit, c.edit}, c.none)
		var got []bool
		for _, tg := range r.Targets {
			got = append(got, tg.Met)
		}
		text := strings.Join(r.Lines, "\n")
		if !slices.Equal(got, c.want) || !strings.Contains(text, c.lines[0]) || !strings.Contains(text, c.lines[1]) {
			t.Errorf("edit %s, none %s: verdicts %v, want %v; lines:\n%s", c.edit, c.none, got, c.want, strings.Join(r.Lines, "\n"))
		}
	}
}

// TestGCFigure: the gc figure on the embedded suite, a short run with few
// versions, reports its three measurements with their four targets and
// finds nothing wrong (a smoke test: its ratios are not judged here).
func TestGCFigure(t *testing.T) {
	opts := Options{Dir: t.TempDir(), GCDuration: 3 * time.Second, GCVersions: 20, Writers: 8}
	var reports []Report
	if err := Run(context.Background(), opts, []string{"gc"}, func(r Report) { reports = append(reports, r) }); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 {
		t.Fatalf("reports %+v", reports)
	}
	r := reports[0]
	text := strings.Join(r.Lines, "\n")
	if len(r.Lines) != 3 || len(r.Targets) != 4 {
		t.Fatalf("%d lines, targets %+v, want 3 lines and 4 targets:\n%s", len(r.Lines), r.Targets, text)
	}
	for i, prefix := range []string{"gc space: ", "gc cost:  ", "gc scans: "} {
		if !strings.HasPrefix(r.Lines[i], prefix) {
			t.Errorf("line %d does not begin with %q:\n%s", i, prefix, text)
		}
	}
	t.Log("\n" + text)
}

// TestBigtableReadCells: the reads figure's count of what a read returns,
// on the emulator with a few cells of each kind: a line and a target per
// kind, every target met (counts, not rates: they do not depend on the
// machine's speed).
func TestBigtableReadCells(t *testing.T) {
	opts := Options{Dir: t.TempDir(), BigtableEmulator: true, ValueSize: 100}
	opts.EnsureDefaults()
	b := &runner{opts: opts}
	_ = b.btOpts.ParseTable("bench/bench/percolator")
	var r Report
	if err := b.bigtableReadCells(context.Background(), &r, 4); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(r.Lines, "\n")
	t.Log("\n" + text)
	if len(r.Lines) != 3 || len(r.Targets) != 3 {
		t.Fatalf("%d lines, targets %+v, want 3 and 3:\n%s", len(r.Lines), r.Targets, text)
	}
	for _, tg := range r.Targets {
		if !tg.Met {
			t.Errorf("target %q missed:\n%s", tg.Name, text)
		}
	}
}

// TestAsyncFigure: the async figure commits on both sides, the async
// side asynchronously (it fails otherwise), and prints each side's
// latencies and their comparison; embedded it has no target.
func TestAsyncFigure(t *testing.T) {
	var reports []Report
	opts := Options{Dir: t.TempDir(), Duration: 200 * time.Millisecond}
	if err := Run(context.Background(), opts, []string{"async"}, func(r Report) { reports = append(reports, r) }); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(reports[0].Lines, "\n")
	for _, want := range []string{"two-phase commits of 2 rows", "async     commits of 2 rows", "commit p50 async / two-phase = "} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if len(reports[0].Targets) != 0 {
		t.Errorf("targets %+v embedded, want none", reports[0].Targets)
	}
}

// TestReadLocksFigure: the readlocks figure runs its four turns on the
// embedded store and prints each, its target's ratio and the two ratios
// beside it, the last over reads of accounts no writer writes (a smoke
// test: the figures themselves are not judged here).
func TestReadLocksFigure(t *testing.T) {
	var reports []Report
	opts := Options{Dir: t.TempDir(), BankDuration: 200 * time.Millisecond}
	if err := Run(context.Background(), opts, []string{"readlocks"}, func(r Report) { reports = append(reports, r) }); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(reports[0].Lines, "\n")
	for _, want := range []string{"readlocks: waiting ", "readlocks: pushing ", "readlocks: read-only ", "readlocks: apart ",
		"reads at a fresh snapshot of accounts no writer writes p50 ", "waiting / pushing = ",
		"waiting at a fresh snapshot / in read-only transactions = ", "waiting at a fresh snapshot / of accounts no writer writes = "} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if len(reports[0].Targets) != 1 {
		t.Errorf("targets %+v, want 1", reports[0].Targets)
	}
}
