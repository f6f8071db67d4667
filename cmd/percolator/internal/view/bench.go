package view

import (
	"io"

	"github.com/seed-992972ee/percolator/bench"
)

// benchJSON is what `bench --json` prints: each figure's lines (as the
// text prints them) and targets, and the targets met and missed.
type benchJSON struct {
	Figures []benchFigureJSON `json:"figures"`
	Met     int               `json:"met"`
	Missed  int               `json:"missed"`
}

type benchFigureJSON struct {
	Figure  string            `json:"figure"`
	Lines   []string          `json:"lines"`
	Targets []benchTargetJSON `json:"targets"`
}

type benchTargetJSON struct {
	Name string `json:"name"`
	Met  bool   `json:"met"`
}

// BenchReports prints the figures a bench run reported, as JSON.
func BenchReports(w io.Writer, reports []bench.Report) error {
	j := benchJSON{Figures: []benchFigureJSON{}}
	for _, r := range reports {
		f := benchFigureJSON{Figure: r.Figure, Lines: r.Lines, Targets: []benchTargetJSON{}}
		if f.Lines == nil {
			f.Lines = []string{}
		}
		for _, t := range r.Targets {
			f.Targets = append(f.Targets, benchTargetJSON{t.Name, t.Met})
			if t.Met {
				j.Met++
			} else {
				j.Missed++
			}
		}
		j.Figures = append(j.Figures, f)
	}
	return JSON(w, j)
}
