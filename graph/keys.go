package graph

import (
	"encoding/binary"
	"math"
)

// Row keys. Every row of the graph lies under "graph/"; variable-length
// parts are escaped (0x00 → 0x00 0xff) and terminated (0x00 0x01), so a
// part never runs into the next and byte order is the parts' order.
const (
	Family    = "graph" // every cell of the graph
	rowPrefix = "graph/"
)

// Directions of an index edge or a degree: from the source (out-edges) or
// to the target (in-edges).
const (
	Out = 'o'
	In  = 'i'
)

func appendPart(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			b = append(b, 0, 0xff)
		} else {
			b = append(b, s[i])
		}
	}
	return append(b, 0, 1)
}

// readPart decodes one escaped part from b, returning it and the rest.
func readPart(b []byte) (string, []byte, bool) {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			out = append(out, b[i])
			continue
		}
		if i+1 >= len(b) {
			return "", nil, false
		}
		switch b[i+1] {
		case 0xff:
			out = append(out, 0)
			i++
		case 1:
			return string(out), b[i+2:], true
		default:
			return "", nil, false
		}
	}
	return "", nil, false
}

// appendValue appends v so that byte order is value order within a type.
func appendValue(b []byte, v Value) []byte {
	switch v.Type {
	case Int:
		return binary.BigEndian.AppendUint64(b, uint64(v.I)^(1<<63))
	case Float:
		bits := math.Float64bits(v.F)
		if v.F == 0 {
			bits = 0 // -0 sorts with 0
		}
		if bits&(1<<63) != 0 {
			bits = ^bits
		} else {
			bits |= 1 << 63
		}
		return binary.BigEndian.AppendUint64(b, bits)
	}
	return appendPart(b, v.S)
}

func labelRow(label string) []byte { return appendPart([]byte(rowPrefix+"l/"), label) }

func snapshotRow(label, src, tgt string) []byte {
	return appendPart(appendPart(appendPart([]byte(rowPrefix+"s/"), label), src), tgt)
}

// indexPrefix is the start of the rows of one vertex's edges in one index
// and direction.
func indexPrefix(label, index string, dir byte, vertex string) []byte {
	b := appendPart(appendPart([]byte(rowPrefix+"i/"), label), index)
	return appendPart(append(b, dir), vertex)
}

// indexRow is the row of one edge in one index: the prefix, the index's
// property values, then the other vertex. A missing property sorts first.
func indexRow(label string, ix *Index, dir byte, vertex, other string, props Props) []byte {
	b := indexPrefix(label, ix.Name, dir, vertex)
	for _, p := range ix.Props {
		if v, ok := props[p]; ok {
			b = appendValue(append(b, 1), v)
		} else {
			b = append(b, 0)
		}
	}
	return appendPart(b, other)
}

func degreeRow(label string, dir byte, vertex string) []byte {
	return appendPart(append(appendPart([]byte(rowPrefix+"d/"), label), dir), vertex)
}

// Qualifiers of the graph's cells.
const (
	qualLabel    = "def" // a label's definition (labelRow)
	qualSnapshot = "s"   // the snapshot edge: its version is the cell's timestamp
	qualEdge     = "e"   // an index edge present, at the mutation version that wrote it
	qualGone     = "x"   // an index edge deleted, at the mutation version that deleted it
	qualCount    = "n"   // a degree row's count, at its own increasing version
	presencePref = "p/"  // a degree row's presence cell of one edge: p/<other vertex>
)
