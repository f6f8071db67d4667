package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator/storage/bigtable"
)

var (
	// ErrInvalidArgument: options out of range, or a figure the suite
	// does not have.
	ErrInvalidArgument = errors.New("bench: invalid argument")
	// ErrCheck: a figure found what it measured wrong (not a target
	// missed: a wrong result).
	ErrCheck = errors.New("bench: check failed")
)

// Suite is a set of figures measured on one kind of deployment.
type Suite string

// The suites.
const (
	Embedded Suite = "embedded" // stores under Options.Dir
	Server   Suite = "server"   // Options.Server
	Bigtable Suite = "bigtable" // Options.Bigtable or BigtableEmulator
)

// Options configures a run. The zero value measures the embedded suite
// with the defaults given a Dir and, for the corpus figures, a Corpus.
type Options struct {
	// Dir is the scratch directory: each figure makes its stores in it.
	Dir string
	// Duration is the time of one measurement (0: 3s).
	Duration time.Duration
	// Writers and Readers are the concurrent writers (0: 64) and readers
	// (0: 8); Keys the keys of the read figures (0: 10,000); ValueSize
	// the values' size in bytes (0: none, an empty value).
	Writers, Readers, Keys, ValueSize int
	// BankDuration is the bank figure's run, and each turn of a side in
	// the rivals and postgres figures (0: 5s).
	BankDuration time.Duration
	// GCDuration is the gc figure's bank run (0: 10 minutes); GCLifetime
	// its collector's lifetime (0: 30s), at most GCDuration/5; GCVersions
	// the versions of each account before the collection its scans
	// measure (0: 1,000; at least 2).
	GCDuration, GCLifetime time.Duration
	GCVersions             int
	// NotifyCells is the big table's cells (0: 1,000,000), NotifyDirty
	// the dirty cells to find (0: 1,000) and Rounds the rounds (0: 3) of
	// the notify figure.
	NotifyCells, NotifyDirty, Rounds int
	// Corpus is the directory of the observers and rerun figures' files:
	// copied with edits to IndexFiles files (0: 2,000), or as is for
	// rerun with CorpusAsIs. EditFraction is the fraction of the files a
	// rerun edits (0: 0.01).
	Corpus       string
	CorpusAsIs   bool
	IndexFiles   int
	EditFraction float64
	// Server is the percolator server of the Server suite.
	Server ServerTarget
	// Postgres is the PostgreSQL server (a libpq URL,
	// postgres://USER@HOST:PORT/DATABASE?sslmode=disable) the Server
	// suite's postgres figure measures the server against; "" skips that
	// figure. It needs Server.
	Postgres string
	// AsyncCommit makes the postgres figure's percolator side commit its
	// transfers asynchronously (percolator.Options.AsyncCommit).
	AsyncCommit bool
	// Bigtable is the table (PROJECT/INSTANCE/TABLE) of the Bigtable
	// suite; BigtableEmulator measures it on an emulator in this process.
	Bigtable         string
	BigtableEmulator bool
	// Log receives progress lines (nil: discarded), and Progress shows
	// the long setups (nil: not shown).
	Log      io.Writer
	Progress Progress
	// Command returns this program run with args, for the figures that
	// run it in processes of their own; nil, they fail.
	Command func(ctx context.Context, args ...string) *exec.Cmd
}

// ServerTarget is a percolator server: its address, its token (or the
// file holding it, which client processes are given) and the CA of its
// TLS certificate.
type ServerTarget struct {
	Addr, Token, TokenFile, CAFile string
}

// Progress shows how far a long phase got, a phase at a time: a bar on
// a terminal, say. Start begins a phase counting label, total of them
// (-1: not known as it starts; a total never changes within a phase);
// Set reports the count so far, and may be called concurrently; End ends
// the phase with the error that ended it (nil: it completed), so that a
// phase interrupted or failed is not shown complete.
type Progress interface {
	Start(label string, total int64)
	Set(done int64)
	End(err error)
}

// EnsureDefaults sets the zero fields that have defaults.
func (o *Options) EnsureDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Writers, 64)
	def(&o.Readers, 8)
	def(&o.Keys, 10_000)
	def(&o.NotifyCells, 1_000_000)
	def(&o.NotifyDirty, 1000)
	def(&o.Rounds, 3)
	def(&o.IndexFiles, 2000)
	def(&o.GCVersions, 1000)
	if o.Duration == 0 {
		o.Duration = 3 * time.Second
	}
	if o.BankDuration == 0 {
		o.BankDuration = 5 * time.Second
	}
	if o.GCDuration == 0 {
		o.GCDuration = 10 * time.Minute
	}
	if o.GCLifetime == 0 {
		o.GCLifetime = 30 * time.Second
	}
	if o.EditFraction == 0 {
		o.EditFraction = 0.01
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Progress == nil {
		o.Progress = noProgress{}
	}
}

// Validate checks the options as given (EnsureDefaults first, to take
// the defaults): an error wrapping ErrInvalidArgument names the field.
func (o *Options) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, a...)...)
	}
	switch {
	case o.NotifyDirty < 1 || o.NotifyCells < o.NotifyDirty || o.Rounds < 1 || o.IndexFiles < 1:
		return bad("need 1 <= NotifyDirty <= NotifyCells, Rounds >= 1 and IndexFiles >= 1")
	case o.Duration <= 0 || o.BankDuration <= 0 || o.Writers < 1 || o.Readers < 1 || o.Keys < 1 || o.ValueSize < 0:
		return bad("need Duration, BankDuration > 0, Writers, Readers, Keys >= 1 and ValueSize >= 0")
	case o.GCDuration <= 0 || o.GCLifetime <= 0 || o.GCVersions < 2:
		return bad("need GCDuration, GCLifetime > 0 and GCVersions >= 2")
	case o.EditFraction <= 0 || o.EditFraction > 1:
		return bad("EditFraction %g not in (0, 1]", o.EditFraction)
	case o.Server.Addr != "" && (o.BigtableEmulator || o.Bigtable != ""), o.BigtableEmulator && o.Bigtable != "":
		return bad("Server, Bigtable and BigtableEmulator exclude each other")
	case o.Postgres != "" && o.Server.Addr == "":
		return bad("Postgres needs Server (the server to measure against PostgreSQL)")
	case o.Postgres != "" && CheckPostgresURL(o.Postgres) != nil:
		return bad("Postgres: %v", CheckPostgresURL(o.Postgres))
	case o.Bigtable != "":
		var bo bigtable.Options
		if err := bo.ParseTable(o.Bigtable); err != nil {
			return bad("Bigtable: %v", err)
		}
	}
	return nil
}

// Suite is the suite the options measure.
func (o *Options) Suite() Suite {
	switch {
	case o.Server.Addr != "":
		return Server
	case o.Bigtable != "" || o.BigtableEmulator:
		return Bigtable
	}
	return Embedded
}

// Report is what one figure measured: its lines, in order, and each of
// its targets, met or missed (also marked in its lines).
type Report struct {
	Figure  string
	Lines   []string
	Targets []Target
}

// Target is one target of a figure and whether the run met it.
type Target struct {
	Name string
	Met  bool
}

func (r *Report) printf(format string, a ...any) {
	r.Lines = append(r.Lines, fmt.Sprintf(format, a...))
}

// mark records the target name as met (ok) or missed, and returns the
// word the figure's line says it with.
func (r *Report) mark(name string, ok bool) string {
	r.Targets = append(r.Targets, Target{Name: name, Met: ok})
	if ok {
		return "met"
	}
	return "MISSED"
}

// shown is a figure's value as its line prints it: rounded to a number of
// decimals, and the value of that text, which its verdict compares. So a
// printed value that satisfies the printed target is met and one that
// does not is missed, whatever the digits not printed ("0.25x" against
// ">= 0.25x" is met even when the ratio was 0.2496).
type shown struct {
	text string
	v    float64 // Invariant: the value text parses to.
}

// show rounds v to decimals, as %.<decimals>f prints it. NaN (a ratio of
// two zero rates) is neither at least nor at most any target: missed.
func show(v float64, decimals int) shown {
	text := strconv.FormatFloat(v, 'f', decimals, 64)
	rounded, _ := strconv.ParseFloat(text, 64) // NaN and ±Inf parse back as themselves
	return shown{text: text, v: rounded}
}

func (s shown) String() string { return s.text }

// atLeast and atMost are the verdicts of the targets ">= t" and "<= t".
func (s shown) atLeast(t float64) bool { return s.v >= t }
func (s shown) atMost(t float64) bool  { return s.v <= t }

// figure is one measurement of a suite.
type figure struct {
	name   string
	run    func(context.Context, *runner, *Report) error
	corpus bool // it reads Options.Corpus
}

func suiteFigures(s Suite) []figure {
	switch s {
	case Server:
		return []figure{{"oracle", serverOracle, false}, {"reads", serverReads, false}, {"writes", serverWrites, false}, {"async", serverAsync, false}, {"nonces", serverNonces, false},
			{"postgres", postgresFigure, false}, {"readlocks", serverReadLocks, false}, {"gc", gcFigure, false}}
	case Bigtable:
		return []figure{{"rpcs", bigtableRPCs, false}, {"reads", bigtableReads, false}, {"writes", bigtableWrites, false}, {"notify", bigtableNotify, false}, {"gc", gcFigure, false}}
	}
	return []figure{
		{"oracle", embeddedOracle, false}, {"writes", embeddedWrites, false}, {"async", embeddedAsync, false}, {"reads", embeddedReads, false}, {"bank", embeddedBank, false},
		{"readlocks", embeddedReadLocks, false}, {"rivals", rivalsFigure, false},
		{"notify", notify, false}, {"observers", observers, true}, {"rerun", rerun, true},
		{"graph", graphFigure, false}, {"lock", lockFigure, false}, {"queue", queueFigure, false},
		{"gc", gcFigure, false},
	}
}

// Figures names the figures of a suite, in the order Run runs them.
func Figures(s Suite) []string {
	var names []string
	for _, f := range suiteFigures(s) {
		names = append(names, f.name)
	}
	return names
}

// NeedsCorpus reports whether any of the named figures of the suite
// reads Options.Corpus.
func NeedsCorpus(s Suite, names []string) bool {
	for _, f := range suiteFigures(s) {
		if f.corpus && slices.Contains(names, f.name) {
			return true
		}
	}
	return false
}

// runner is one run of figures: the options and what the figures share.
type runner struct {
	opts   Options
	btOpts bigtable.Options // the Bigtable suite's table
	// labels numbers the graph figure's labels, one per measurement.
	labels atomic.Int64
}

// Run measures the named figures of the options' suite (every one if
// names is empty), in the suite's order, one at a time, and hands each
// one's report to report as it ends. It stops at the first figure that
// fails, with its error.
func Run(ctx context.Context, opts Options, names []string, report func(Report)) error {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return err
	}
	suite := opts.Suite()
	for _, n := range names {
		if !slices.Contains(Figures(suite), n) {
			return fmt.Errorf("%w: no figure %q in the %s suite", ErrInvalidArgument, n, suite)
		}
	}
	b := &runner{opts: opts}
	if opts.BigtableEmulator {
		_ = b.btOpts.ParseTable("bench/bench/percolator")
	} else if opts.Bigtable != "" {
		_ = b.btOpts.ParseTable(opts.Bigtable)
	}
	for _, f := range suiteFigures(suite) {
		if len(names) > 0 && !slices.Contains(names, f.name) {
			continue
		}
		r := Report{Figure: f.name}
		err := f.run(ctx, b, &r)
		report(r)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

// command runs this program with args (Options.Command).
func (b *runner) command(ctx context.Context, args ...string) (*exec.Cmd, error) {
	if b.opts.Command == nil {
		return nil, errors.New("bench: no command to run this program with (Options.Command)")
	}
	return b.opts.Command(ctx, args...), nil
}

type noProgress struct{}

func (noProgress) Start(string, int64) {}
func (noProgress) Set(int64)           {}
func (noProgress) End(error)           {}
