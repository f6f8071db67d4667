package view

import (
	"bytes"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator/graph"
)

// TestPathText: printable UTF-8 prints as is; invalid UTF-8 and control
// bytes are escaped, so every path prints on one line.
func TestPathText(t *testing.T) {
	for in, want := range map[string]string{"a/b c": "a/b c", "a\nb": `"a\nb"`, "\xff": `"\xff"`} {
		if got := Path(in); got != want {
			t.Errorf("Path(%q) = %s, want %s", in, got, want)
		}
	}
	if got := Text("x\ty\xff"); got != `x\ty\xff` {
		t.Errorf("Text: %s", got)
	}
}

// TestFormatValueCut: a long value is cut at ShortValue bytes, on a rune
// boundary, saying its length; Full shows it whole.
func TestFormatValueCut(t *testing.T) {
	long := strings.Repeat("é", ShortValue)
	got := formatValue("col", []byte(long), false)
	if !strings.HasSuffix(got, "... (120 bytes; --full)") || len(got) > ShortValue+len("... (120 bytes; --full)") {
		t.Fatalf("cut value: %s", got)
	}
	if got := formatValue("col", []byte(long), true); got != `"`+long+`"` {
		t.Fatalf("full value: %s", got)
	}
}

// TestEdges: the other vertex of each edge, then its properties in name
// order; an empty list is [] in JSON.
func TestEdges(t *testing.T) {
	es := []graph.Edge{{Src: "a", Tgt: "b", Props: graph.Props{"z": graph.StringValue("1"), "k": graph.IntValue(2)}}}
	var b bytes.Buffer
	if err := Edges(&b, es, graph.In, false); err != nil || b.String() != "a\tk=2 z=1\n" {
		t.Fatalf("in-edges: %q, %v", b.String(), err)
	}
	b.Reset()
	if err := Edges(&b, nil, graph.Out, true); err != nil || b.String() != "[]\n" {
		t.Fatalf("no edges as JSON: %q, %v", b.String(), err)
	}
	m := graph.Mutation{Op: graph.Delete, Label: "l", Src: "a", Tgt: "b"}
	if got := MutateOutcome(m, graph.Result{}); got != "no edge a -l-> b: nothing deleted" {
		t.Fatalf("a delete of nothing: %s", got)
	}
}
