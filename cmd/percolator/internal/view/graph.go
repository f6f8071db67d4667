package view

import (
	"fmt"
	"io"
	"strings"

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
