package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRivalsFigure: the rivals figure, with short turns, prints a line
// for each side with its rate and total, the ratio to the best rival and
// its two targets, and every total is unchanged (a smoke test: the
// rates themselves are not judged here).
func TestRivalsFigure(t *testing.T) {
	var reports []Report
	opts := Options{Dir: t.TempDir(), BankDuration: 300 * time.Millisecond}
	if err := Run(context.Background(), opts, []string{"rivals"}, func(r Report) { reports = append(reports, r) }); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 {
		t.Fatalf("reports %+v", reports)
	}
	r := reports[0]
	all := strings.Join(r.Lines, "\n")
	for _, want := range []string{"rivals:  percolator embedded", "rivals:  badger", "rivals:  bbolt", "rivals:  etcd",
		"percolator/badger ", "percolator/bbolt ", "percolator/etcd ", "percolator vs the best rival ("} {
		if !strings.Contains(all, want) {
			t.Errorf("report lacks %q:\n%s", want, all)
		}
	}
	if n := strings.Count(all, "; total unchanged"); n != 4 {
		t.Errorf("%d sides with their total unchanged, want 4:\n%s", n, all)
	}
	names := []string{"rivals: percolator >= 1.0x the best rival", "rivals: every side's total unchanged"}
	if len(r.Targets) != 2 || r.Targets[0].Name != names[0] || r.Targets[1].Name != names[1] || !r.Targets[1].Met {
		t.Errorf("targets %+v, want %q with the totals met", r.Targets, names)
	}
	if !slices.Contains(Figures(Embedded), "rivals") {
		t.Errorf("no rivals figure among %q", Figures(Embedded))
	}
}

// TestTurnOrder: the sides run forward in even turns and backward in odd
// ones.
func TestTurnOrder(t *testing.T) {
	if got := turnOrder(4, 0); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("turn 0: %v", got)
	}
	if got := turnOrder(4, 1); !slices.Equal(got, []int{3, 2, 1, 0}) {
		t.Errorf("turn 1: %v", got)
	}
}
