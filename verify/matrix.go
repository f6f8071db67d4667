package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seed-992972ee/percolator/workload"
)

// MatrixOptions are a matrix's: every workload × fault × target, each
// cell a Run of Budget divided among the cells (at least MinCell).
type MatrixOptions struct {
	Workloads []string   // default: every checked workload
	Faults    [][]string // default: kill; pause; kill and pause
	Targets   []string   // default: dir, server, distributed
	// Budget is the wall time the cells' workloads share; each cell also
	// spends its deployment's start and the check.
	Budget  time.Duration
	MinCell time.Duration // default 2s
	// Base is what every cell starts from (Binary, Env, Clients, Threads,
	// Seed); its Workload, Faults, Target and Duration are the cell's.
	Base Options
	// Out is the matrix's directory: a directory per cell under it.
	Out string
}

// Cell is one cell's outcome.
type Cell struct {
	Workload string  `json:"workload"`
	Faults   string  `json:"faults"`
	Target   string  `json:"target"`
	Report   *Report `json:"report,omitempty"`
	Err      string  `json:"error,omitempty"` // the run could not be made
}

// Forbidden is how many forbidden anomalies the cell found.
func (c Cell) Forbidden() int {
	if c.Report == nil {
		return 0
	}
	n := 0
	for kind, k := range c.Report.Result.Counts {
		if forbiddenKind(c.Report, kind) {
			n += k
		}
	}
	return n
}

func forbiddenKind(r *Report, kind string) bool {
	for _, a := range r.Result.Anomalies {
		if a.Kind == kind {
			return a.Forbidden
		}
	}
	return false
}

// ensureDefaults fills in the matrix's axes.
func (m *MatrixOptions) ensureDefaults() {
	if len(m.Workloads) == 0 {
		m.Workloads = workload.CheckedNames
	}
	if len(m.Faults) == 0 {
		m.Faults = [][]string{{"kill"}, {"pause"}, {"cut", "partition", "delay", "drop"}, {"powercut"}, {"skew", "expire"},
			{"kill", "pause", "cut", "drop"}}
	}
	if len(m.Targets) == 0 {
		m.Targets = []string{TargetDir, TargetServer, TargetDistributed}
	}
	if m.MinCell == 0 {
		m.MinCell = 2 * time.Second
	}
}

// Validate checks the axes: every name known, and at least one cell that
// a target can take.
func (m *MatrixOptions) Validate() error {
	m.ensureDefaults()
	for _, f := range m.Faults {
		for _, tg := range m.Targets {
			for _, wl := range m.Workloads {
				o := Options{Workload: wl, Faults: f, Target: tg, Duration: 1, Interval: 1, Clients: 1, Threads: 1, Workers: 1}
				if err := o.Validate(); err != nil && !errors.Is(err, errNotApplicable) {
					return err
				}
			}
			if applies(f, tg) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: no target of the matrix takes these faults", ErrInvalidArgument)
}

// applies reports whether faults can be injected on target: an embedded
// store has no network and no sessions, and only the server target runs
// on a crashable filesystem.
func applies(faults []string, target string) bool {
	o := Options{Workload: workload.CheckedNames[0], Faults: faults, Target: target, Duration: 1, Interval: 1, Clients: 1, Threads: 1, Workers: 1}
	return o.Validate() == nil
}

// RunMatrix runs every cell in turn, printing each cell's line to w as
// it ends, and returns the cells. A cell that could not run is recorded
// with its error and the matrix goes on.
func RunMatrix(ctx context.Context, m MatrixOptions, w io.Writer) ([]Cell, error) {
	m.ensureDefaults()
	n := 0
	for _, f := range m.Faults {
		for _, tg := range m.Targets {
			if applies(f, tg) {
				n += len(m.Workloads)
			}
		}
	}
	per := max((m.Budget / time.Duration(n)).Truncate(100*time.Millisecond), m.MinCell)
	fmt.Fprintf(w, "verify matrix: %d cells of %s each\n", n, per)
	var cells []Cell
	for _, wl := range m.Workloads {
		for _, f := range m.Faults {
			for _, tg := range m.Targets {
				if ctx.Err() != nil {
					return cells, ctx.Err()
				}
				if !applies(f, tg) {
					continue
				}
				c := runCell(ctx, m, wl, f, tg, per)
				cells = append(cells, c)
				fmt.Fprintln(w, c.line())
			}
		}
	}
	return cells, nil
}

func runCell(ctx context.Context, m MatrixOptions, wl string, faults []string, tg string, d time.Duration) Cell {
	o := m.Base
	o.Workload, o.Faults, o.Target, o.Duration = wl, faults, tg, d
	o.Server, o.Bigtable, o.Etcd, o.Dir = "", "", "", ""
	o.Out = filepath.Join(m.Out, fmt.Sprintf("%s-%s-%s", wl, strings.Join(faults, "+"), tg))
	c := Cell{Workload: wl, Faults: strings.Join(faults, "+"), Target: tg}
	rep, err := Run(ctx, o)
	if err != nil {
		c.Err = err.Error()
	}
	c.Report = rep
	return c
}

func (c Cell) line() string {
	if c.Report == nil {
		return fmt.Sprintf("%-12s %-11s %-12s ERROR %s", c.Workload, c.Faults, c.Target, c.Err)
	}
	r := c.Report.Result
	return fmt.Sprintf("%-12s %-11s %-12s ok %6d  unknown %4d  forbidden %d  G2 %d", c.Workload, c.Faults, c.Target, r.OK, r.Info, c.Forbidden(), r.Counts["G2"])
}

// Table renders the cells as an aligned table (Markdown), for the
// README and docs/verify.md.
func Table(cells []Cell) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "| workload\t| faults\t| target\t| ok\t| failed\t| unknown\t| faults injected\t| forbidden\t| G2 (allowed)\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|")
	for _, c := range cells {
		if c.Report == nil {
			fmt.Fprintf(tw, "| %s\t| %s\t| %s\t| error: %s\t|\t|\t|\t|\t|\t|\n", c.Workload, c.Faults, c.Target, c.Err)
			continue
		}
		r := c.Report.Result
		injected := 0
		for _, k := range c.Report.Faults {
			injected += k
		}
		fmt.Fprintf(tw, "| %s\t| %s\t| %s\t| %d\t| %d\t| %d\t| %d\t| %d\t| %d\t|\n", c.Workload, c.Faults, c.Target, r.OK, r.Fail, r.Info, injected, c.Forbidden(), r.Counts["G2"])
	}
	_ = tw.Flush()
	return b.String()
}
