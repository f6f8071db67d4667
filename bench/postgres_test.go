package bench

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
)

// TestLatencyPercentile: nearest rank, the smallest latency at least p%
// of them are at or under.
func TestLatencyPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var d []time.Duration
		for _, n := range ns {
			d = append(d, time.Duration(n)*time.Millisecond)
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted: 100..1
	}
	for _, c := range []struct {
		lat  []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 50, 7 * time.Millisecond},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(3, 1, 2), 50, 2 * time.Millisecond},
		{ms(4, 1, 3, 2), 50, 2 * time.Millisecond}, // rank 2 of 4, not the mean of the middle two
		{ms(hundred...), 50, 50 * time.Millisecond},
		{ms(hundred...), 99, 99 * time.Millisecond},
		{ms(hundred...), 100, 100 * time.Millisecond},
		{ms(append(hundred, 1000)...), 99, 100 * time.Millisecond}, // rank ceil(0.99 x 101) = 100
	} {
		if got := latencyPercentile(slices.Clone(c.lat), c.p); got != c.want {
			t.Errorf("p%v of %v = %v, want %v", c.p, c.lat, got, c.want)
		}
	}
}

// TestPostgresOptions: the postgres figure needs a server and a libpq
// URL, refused before anything runs otherwise; without a URL it is
// skipped with a line saying why, no target and no error.
func TestPostgresOptions(t *testing.T) {
	if !slices.Contains(Figures(Server), "postgres") {
		t.Fatalf("no postgres figure among %q", Figures(Server))
	}
	srv := ServerTarget{Addr: "127.0.0.1:1"} // never dialed
	for _, c := range []struct {
		opts Options
		ok   bool
	}{
		{Options{Server: srv, Postgres: "postgres://bench@127.0.0.1:5432/bench?sslmode=disable"}, true},
		{Options{Server: srv, Postgres: "postgresql://bench:secret@localhost/bench"}, true},
		{Options{Postgres: "postgres://bench@127.0.0.1:5432/bench"}, false}, // no server
		{Options{Server: srv, Postgres: "mysql://bench@127.0.0.1/bench"}, false},
		{Options{Server: srv, Postgres: "host=127.0.0.1 user=bench"}, false}, // a DSN, not a URL
		{Options{Server: srv, Postgres: "postgres://bench@127.0.0.1:99999999/bench"}, false},
	} {
		o := c.opts
		o.Dir = t.TempDir()
		o.EnsureDefaults()
		if err := o.Validate(); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalidArgument)) {
			t.Errorf("Validate(Postgres %q, Server %q) = %v, want ok %v", c.opts.Postgres, c.opts.Server.Addr, err, c.ok)
		}
	}
	var reports []Report
	err := Run(context.Background(), Options{Dir: t.TempDir(), Server: srv}, []string{"postgres"}, func(r Report) { reports = append(reports, r) })
	if err != nil || len(reports) != 1 || len(reports[0].Targets) != 0 || len(reports[0].Lines) != 1 ||
		!strings.Contains(reports[0].Lines[0], "skipped") || !strings.Contains(reports[0].Lines[0], "--postgres") {
		t.Fatalf("without Postgres: %v, %+v", err, reports)
	}
}

// turnOf is a measurement of commits transfers in a second, each taking
// lat.
func turnOf(commits int, lat time.Duration) *bankTurn {
	t := &bankTurn{elapsed: time.Second}
	for range commits {
		t.latencies = append(t.latencies, lat)
	}
	return t
}

// TestPostgresVerdicts: the figure's verdicts agree with its printed
// values, rounded: a ratio that prints as the target meets it, one a
// hundredth past does not.
func TestPostgresVerdicts(t *testing.T) {
	pg := turnOf(10_000, 1000*time.Microsecond)
	for _, c := range []struct {
		many, few  *bankTurn
		rpcs       int // over pgRPCTransfers
		syncs      uint64
		want       []bool
		wantInText []string
	}{
		{turnOf(9_951, 0), turnOf(6_951, 1504*time.Microsecond), 5 * pgRPCTransfers, pgRPCTransfers, []bool{true, true, true, true, true}, []string{
			"ratio 1.00x (target >= 1.0x: met)", "ratio 0.70x (target >= 0.7x: met)", "ratio 1.50x (target <= 1.5x: met)", "= 5.00 (target <= 5: met)",
			": 1.00 (target <= 1, the commit point's: met)"}},
		{turnOf(9_949, 0), turnOf(6_949, 1506*time.Microsecond), 5*pgRPCTransfers + 2, pgRPCTransfers + 2, []bool{false, false, false, false, false}, []string{
			"ratio 0.99x (target >= 1.0x: MISSED)", "ratio 0.69x (target >= 0.7x: MISSED)", "ratio 1.51x (target <= 1.5x: MISSED)", "= 5.01 (target <= 5: MISSED)",
			": 1.01 (target <= 1, the commit point's: MISSED)"}},
	} {
		var r Report
		rpcs := map[string]int{"ReadRow": 2 * pgRPCTransfers, "CheckAndMutate": c.rpcs - 2*pgRPCTransfers}
		printPostgres(&r, [2]*bankTurn{c.many, pg}, [2]*bankTurn{c.few, pg}, [2]float64{1, 2}, rpcs, c.syncs)
		var got []bool
		for _, tg := range r.Targets {
			got = append(got, tg.Met)
		}
		text := strings.Join(r.Lines, "\n")
		if !slices.Equal(got, c.want) {
			t.Errorf("verdicts %v, want %v:\n%s", got, c.want, text)
		}
		for _, w := range c.wantInText {
			if !strings.Contains(text, w) {
				t.Errorf("lines lack %q:\n%s", w, text)
			}
		}
	}
}

// TestPostgresFigure runs the whole figure, turns of a second, against
// the PostgreSQL server at $PERCOLATOR_TEST_POSTGRES and a server in
// this process: its lines and targets are there, and no snapshot is
// wrong (the figures themselves are not judged here).
func TestPostgresFigure(t *testing.T) {
	url := os.Getenv("PERCOLATOR_TEST_POSTGRES")
	if url == "" {
		t.Skip("PERCOLATOR_TEST_POSTGRES is not set: give it a PostgreSQL URL (postgres://USER@HOST:PORT/DATABASE?sslmode=disable) to run the postgres figure against")
	}
	srv := servertest.Start(t, server.Options{}, "")
	opts := Options{Dir: t.TempDir(), Server: ServerTarget{Addr: srv.Addr}, Postgres: url, BankDuration: time.Second}
	var reports []Report
	if err := Run(context.Background(), opts, []string{"postgres"}, func(r Report) { reports = append(reports, r) }); err != nil {
		t.Fatal(err)
	}
	r := reports[0]
	text := strings.Join(r.Lines, "\n")
	t.Log("\n" + text)
	if len(r.Lines) != 8 || len(r.Targets) != 5 {
		t.Fatalf("%d lines, targets %+v, want 8 lines and 5 targets", len(r.Lines), r.Targets)
	}
	for _, w := range []string{"transfers at 64 workers", "transfers at 16 workers", "p50", "snapshots of every balance", "point reads at 8 clients", "RPCs per committed 2-row transfer", "synced writes per committed 2-row transfer", "wrong totals 0 vs 0"} {
		if !strings.Contains(text, w) {
			t.Errorf("lines lack %q", w)
		}
	}
}
