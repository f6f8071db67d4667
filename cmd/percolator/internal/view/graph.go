package view

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator/graph"
)

// Edges prints each neighbour on its own line: the other vertex (the
// target of an out-edge, the source of an in-edge: dir), then the
// properties in name order; or the edges as JSON.
func Edges(w io.Writer, es []graph.Edge, dir byte, jsonOut bool) error {
	if jsonOut {
		list := []edgeJSON{}
		for _, e := range es {
			list = append(list, edgeOf(e))
		}
		return JSON(w, list)
	}
	for _, e := range es {
		other := e.Tgt
		if dir == graph.In {
			other = e.Src
		}
		var props []string
		for _, k := range sortedKeys(e.Props) {
			if v := e.Props[k].String(); v != "" {
				props = append(props, k+"="+v)
			}
		}
		fmt.Fprintln(w, strings.TrimSpace(other+"\t"+strings.Join(props, " ")))
	}
	return nil
}

// MutateOutcome says what a mutation did, from what it found
// (graph.Result): a delete of an edge that is not there deleted nothing,
// which is not an error (the delete is still recorded at its version, so
// an older insert arriving later is dropped).
func MutateOutcome(m graph.Mutation, r graph.Result) string {
	edge := fmt.Sprintf("%s -%s-> %s", m.Src, m.Label, m.Tgt)
	switch {
	case r.Dropped:
		return "dropped: the edge holds a newer version"
	case m.Op == graph.Delete && !r.Existed:
		return "no edge " + edge + ": nothing deleted"
	case m.Op == graph.Delete:
		return "deleted " + edge
	case r.Existed:
		return "updated " + edge
	}
	return "inserted " + edge
}

// edgeJSON is an edge as `graph query --json` prints it: the vertices as
// user bytes, its version, and its properties as JSON numbers and
// strings.
type edgeJSON struct {
	Src   UserBytes      `json:"src"`
	Label string         `json:"label"`
	Tgt   UserBytes      `json:"tgt"`
	TS    int64          `json:"ts"`
	Props map[string]any `json:"props"`
}

func (e edgeJSON) MarshalJSON() ([]byte, error) { return marshalFlat(e) }

func edgeOf(e graph.Edge) edgeJSON {
	j := edgeJSON{Src: UserBytes(e.Src), Label: e.Label, Tgt: UserBytes(e.Tgt), TS: e.TS, Props: map[string]any{}}
	for k, v := range e.Props {
		switch v.Type {
		case graph.Int:
			j.Props[k] = v.I
		case graph.Float:
			j.Props[k] = v.F
		default:
			j.Props[k] = v.S
		}
	}
	return j
}

// Degree prints a vertex's degree: the number alone, or JSON with the
// vertex, the direction ("out" or "in") and the label.
func Degree(w io.Writer, label, vertex string, dir byte, n int64, jsonOut bool) error {
	if !jsonOut {
		_, err := fmt.Fprintln(w, n)
		return err
	}
	d := "out"
	if dir == graph.In {
		d = "in"
	}
	return JSON(w, degreeJSON{UserBytes(vertex), d, label, n})
}

type degreeJSON struct {
	Vertex    UserBytes `json:"vertex"`
	Direction string    `json:"direction"`
	Label     string    `json:"label"`
	Degree    int64     `json:"degree"`
}

func (d degreeJSON) MarshalJSON() ([]byte, error) { return marshalFlat(d) }

// GraphCheck prints what graph check found (graph.Report), as text or
// JSON; ok is whether no index or degree disagreed with the edges.
func GraphCheck(w io.Writer, rep graph.Report, jsonOut bool) error {
	if jsonOut {
		m := rep.Mismatches
		if m == nil {
			m = []string{}
		}
		return JSON(w, struct {
			Edges      int      `json:"edges"`
			Locked     int      `json:"locked"`
			Repaired   int      `json:"repaired"`
			Mismatches []string `json:"mismatches"`
			OK         bool     `json:"ok"`
		}{rep.Edges, rep.Locked, rep.Repaired, m, len(m) == 0})
	}
	fmt.Fprintf(w, "%d live edges checked against every index and degree; %d locked by live mutations (skipped), %d expired locks rolled forward\n", rep.Edges, rep.Locked, rep.Repaired)
	for _, m := range rep.Mismatches {
		fmt.Fprintln(w, "mismatch:", m)
	}
	if len(rep.Mismatches) == 0 {
		fmt.Fprintln(w, "ok")
	}
	return nil
}

// GraphLoad is what graph load did: the edges loaded from File into
// Label, of Consistency, in Elapsed.
type GraphLoad struct {
	Edges       int
	File        string
	Label       string
	Consistency string
	Elapsed     time.Duration
}

// Print prints the load's summary as text or JSON.
func (g GraphLoad) Print(w io.Writer, jsonOut bool) error {
	rate := float64(g.Edges) / g.Elapsed.Seconds()
	if jsonOut {
		return JSON(w, struct {
			Edges       int     `json:"edges"`
			File        string  `json:"file"`
			Label       string  `json:"label"`
			Consistency string  `json:"consistency"`
			ElapsedS    float64 `json:"elapsed_s"`
			EdgesPerS   float64 `json:"edges_per_s"`
		}{g.Edges, g.File, g.Label, g.Consistency, Seconds(g.Elapsed), rate})
	}
	_, err := fmt.Fprintf(w, "loaded %d edges from %s into label %s (%s) in %s: %.0f edges/s\n", g.Edges, filepath.Base(g.File), g.Label, g.Consistency, g.Elapsed.Round(time.Millisecond), rate)
	return err
}
