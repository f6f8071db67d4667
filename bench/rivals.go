package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/workload"
)

// The rivals figure: percolator embedded against the embedded stores a
// user would pick instead (rivals_sides.go), on the same bank: pgAccounts
// accounts opened with pgInitial each, rivalWorkers workers each moving
// 1 to 10 between two random accounts (read both, write both back),
// retrying conflicts with db.Update's back-off, every commit durable on
// every side. The sides run pgTurns turns of BankDuration each, all in
// one order and then in the reverse one, so that a noisy machine's drift
// hits them alike. No auditor runs beside the transfers; each side's
// total is checked once the turns end, and a wrong one fails the figure.

// rivalWorkers is the transfer workers on each side.
const rivalWorkers = 64

// rival is one side of the rivals figure.
type rival struct {
	name string // short, for the ratio ("badger")
	what string // the store and its settings, as the lines print them
	side bankSide
}

// rivalsFigure: see the comment at the top of this file.
func rivalsFigure(ctx context.Context, b *runner, r *Report) error {
	sides, closeAll, err := openRivals(ctx, b.opts.Dir)
	if err != nil {
		return err
	}
	defer closeAll()
	turns, err := b.rivalTurns(ctx, sides)
	if err != nil {
		return err
	}
	audits := make([]workload.BankAudit, len(sides))
	for i, s := range sides {
		if audits[i], err = s.side.audit(ctx); err != nil {
			return fmt.Errorf("%s: audit: %w", s.name, err)
		}
	}
	r.printf("rivals:  bank of %s accounts opened with %s each, %d workers, every commit durable; %d turns of %s each side, alternating",
		group(pgAccounts), group(pgInitial), rivalWorkers, pgTurns, b.opts.BankDuration)
	if wrong := printRivals(r, sides, turns, audits); wrong != "" {
		return fmt.Errorf("%w: wrong total on %s", ErrCheck, wrong)
	}
	return nil
}

// openRivals opens every side, percolator's first, each with its bank;
// what it returns closes them all.
func openRivals(ctx context.Context, dir string) ([]rival, func(), error) {
	var cl closers
	fail := func(err error) ([]rival, func(), error) {
		cl.closeAll()
		return nil, nil, err
	}
	db, err := percolator.Open(ctx, percolator.Options{Dir: filepath.Join(dir, "rivals-percolator")})
	if err != nil {
		return fail(err)
	}
	cl.add(func() { _ = db.Close() })
	pb := newServerBank(db)
	if err := pb.open(ctx); err != nil {
		return fail(err)
	}
	bg, err := openBadgerBank(dir, &cl)
	if err != nil {
		return fail(fmt.Errorf("badger: %w", err))
	}
	bb, err := openBoltBank(dir, &cl)
	if err != nil {
		return fail(fmt.Errorf("bbolt: %w", err))
	}
	et, err := openEtcdBank(ctx, dir, &cl)
	if err != nil {
		return fail(fmt.Errorf("etcd: %w", err))
	}
	return []rival{
		{"percolator", "percolator embedded (db.Update)", pb},
		{"badger", withVersion("badger", "github.com/dgraph-io/badger/v4") + " (SyncWrites, db.Update)", bg},
		{"bbolt", withVersion("bbolt", "go.etcd.io/bbolt") + " (fsync on commit, db.Update)", bb},
		{"etcd", withVersion("etcd", "go.etcd.io/etcd/server/v3") + " STM (in-process member, serializable snapshot)", et},
	}, cl.closeAll, nil
}

// withVersion is name and the version of the module at path this
// program was built with, or name alone if the program does not say (a
// test binary does not).
func withVersion(name, path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == path {
				return name + " " + m.Version
			}
		}
	}
	return name
}

// turnOrder is the order of the sides in turn t: forward in even turns,
// backward in odd ones.
func turnOrder(sides, t int) []int {
	order := make([]int, sides)
	for i := range order {
		order[i] = i
	}
	if t%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// rivalTurns runs pgTurns turns of each side and returns each side's
// sum, in the order of sides.
func (b *runner) rivalTurns(ctx context.Context, sides []rival) ([]*bankTurn, error) {
	sum := make([]*bankTurn, len(sides))
	for i := range sum {
		sum[i] = &bankTurn{}
	}
	d := b.opts.BankDuration
	end := b.timed(ctx, "rivals: seconds measured", time.Duration(pgTurns*len(sides))*d)
	for t := range pgTurns {
		for _, i := range turnOrder(len(sides), t) {
			turn, err := runBankTurn(ctx, sides[i].side, rivalWorkers, 0, d)
			if err == nil {
				err = ctx.Err()
			}
			if err != nil {
				end(err)
				return nil, fmt.Errorf("%s: %w", sides[i].name, err)
			}
			sum[i].add(turn)
		}
	}
	end(nil)
	return sum, nil
}

// printRivals prints a line per side (percolator's first, at index 0)
// and the target against the best rival, and returns the names of the
// sides whose total is wrong ("" if none).
func printRivals(r *Report, sides []rival, turns []*bankTurn, audits []workload.BankAudit) (wrong string) {
	want := workload.BankAudit{Total: pgAccounts * pgInitial, Accounts: pgAccounts}
	var bad []string
	best, width := 1, 0
	for _, s := range sides {
		width = max(width, len(s.what))
	}
	for i, s := range sides {
		total := "unchanged"
		if audits[i] != want {
			total = fmt.Sprintf("WRONG: %d over %d accounts, want %d", audits[i].Total, audits[i].Accounts, want.Total)
			bad = append(bad, s.name)
		}
		ratio := ""
		if i > 0 {
			ratio = fmt.Sprintf(": percolator/%s %.2fx", s.name, turns[0].perSec()/turns[i].perSec())
			if turns[i].perSec() > turns[best].perSec() {
				best = i
			}
		}
		r.printf("rivals:  %-*s %6.0f transfers/s%s; conflicts retried %d; total %s",
			width, s.what, turns[i].perSec(), ratio, turns[i].conflicts, total)
	}
	ratio := show(turns[0].perSec()/turns[best].perSec(), 2)
	r.printf("rivals:  percolator vs the best rival (%s): ratio %sx (target >= 1.0x: %s)",
		sides[best].name, ratio, r.mark("rivals: percolator >= 1.0x the best rival", ratio.atLeast(1.0)))
	r.printf("rivals:  every side's total unchanged (must be: %s)", r.mark("rivals: every side's total unchanged", len(bad) == 0))
	return strings.Join(bad, ", ")
}
