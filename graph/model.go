package graph

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// Errors. Bad input wraps ErrInvalidArgument and writes nothing.
var (
	ErrInvalidArgument = errors.New("graph: invalid argument")
	// ErrUnknownLabel: no label of that name is stored.
	ErrUnknownLabel = errors.New("graph: unknown label")
	// ErrLocked: the edge stayed locked by live mutations through every
	// retry (Options.MaxRetries).
	ErrLocked = errors.New("graph: edge locked by another mutation")
)

// Limits on input.
const (
	MaxNameSize     = 128     // label, index and property names
	MaxVertexSize   = 512     // vertex ids
	MaxValueSize    = 8 << 10 // a property's value
	MaxProps        = 64      // properties per label
	MaxIndexes      = 8       // indices per label
	MaxIndexColumns = 4       // properties per index
)

// Consistency of a label's mutations.
type Consistency string

const (
	// Strong: S2Graph's protocol — the snapshot edge locked by
	// compare-and-set, the index edges and degree rewritten, the lock
	// released with the merged snapshot (doc.go).
	Strong Consistency = "strong"
	// Weak: snapshot, index edges and degree written in one batch without
	// a lock, as S2Graph's weak labels (doc.go says what can go wrong).
	Weak Consistency = "weak"
	// Txn: every operation is one percolator transaction (snapshot,
	// index edges and degrees in one commit); needs Options.DB.
	Txn Consistency = "txn"
)

// Type is a property's type.
type Type string

const (
	Int    Type = "int"
	Float  Type = "float"
	String Type = "string"
)

// Index orders a label's edges of one vertex by the listed properties
// (then by the other vertex): a query reads one contiguous range of it.
type Index struct {
	Name  string   `json:"name"`
	Props []string `json:"props"`
}

// Label is a kind of edge: its properties' types, its indices and its
// consistency. Labels are stored, so every process sees them.
type Label struct {
	Name        string          `json:"name"`
	Props       map[string]Type `json:"props"`
	Indexes     []Index         `json:"indexes"`
	Consistency Consistency     `json:"consistency"`
}

func validName(what, s string) error {
	// Names are stored in JSON, whose strings are UTF-8: another process
	// would read other bytes back as U+FFFD, and so another name.
	if s == "" || len(s) > MaxNameSize || strings.ContainsAny(s, "\x00/") || !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s %q is empty, longer than %d bytes, not UTF-8, or contains NUL or /", ErrInvalidArgument, what, s, MaxNameSize)
	}
	return nil
}

// Validate checks the label.
func (l *Label) Validate() error {
	if err := validName("label name", l.Name); err != nil {
		return err
	}
	switch l.Consistency {
	case Strong, Weak, Txn:
	default:
		return fmt.Errorf("%w: label %s: consistency %q is not strong, weak or txn", ErrInvalidArgument, l.Name, l.Consistency)
	}
	if len(l.Props) > MaxProps {
		return fmt.Errorf("%w: label %s: %d properties, at most %d", ErrInvalidArgument, l.Name, len(l.Props), MaxProps)
	}
	for p, t := range l.Props {
		if err := validName("property name", p); err != nil {
			return err
		}
		switch t {
		case Int, Float, String:
		default:
			return fmt.Errorf("%w: label %s: property %s has type %q (int, float or string)", ErrInvalidArgument, l.Name, p, t)
		}
	}
	if len(l.Indexes) > MaxIndexes {
		return fmt.Errorf("%w: label %s: %d indices, at most %d", ErrInvalidArgument, l.Name, len(l.Indexes), MaxIndexes)
	}
	names := map[string]bool{}
	orders := map[string]bool{}
	for _, ix := range l.Indexes {
		if err := validName("index name", ix.Name); err != nil {
			return err
		}
		if names[ix.Name] {
			return fmt.Errorf("%w: label %s: index %s defined twice", ErrInvalidArgument, l.Name, ix.Name)
		}
		names[ix.Name] = true
		if len(ix.Props) == 0 || len(ix.Props) > MaxIndexColumns {
			return fmt.Errorf("%w: label %s: index %s orders by %d properties (1 to %d)", ErrInvalidArgument, l.Name, ix.Name, len(ix.Props), MaxIndexColumns)
		}
		for i, p := range ix.Props {
			if _, ok := l.Props[p]; !ok {
				return fmt.Errorf("%w: label %s: index %s orders by %s, which the label does not declare", ErrInvalidArgument, l.Name, ix.Name, p)
			}
			if slices.Contains(ix.Props[:i], p) {
				return fmt.Errorf("%w: label %s: index %s lists %s twice", ErrInvalidArgument, l.Name, ix.Name, p)
			}
		}
		order := strings.Join(ix.Props, "\x00")
		if orders[order] {
			return fmt.Errorf("%w: label %s: index %s duplicates another index's order (%s)", ErrInvalidArgument, l.Name, ix.Name, strings.Join(ix.Props, ", "))
		}
		orders[order] = true
	}
	return nil
}

func (l *Label) index(name string) (*Index, bool) {
	for i := range l.Indexes {
		if l.Indexes[i].Name == name {
			return &l.Indexes[i], true
		}
	}
	return nil, false
}

// Value is a property value: an int, a float or a string.
type Value struct {
	Type Type    `json:"t"`
	I    int64   `json:"i,omitempty"`
	F    float64 `json:"f,omitempty"`
	S    string  `json:"s,omitempty"`
}

// IntValue, FloatValue and StringValue make values.
func IntValue(i int64) Value     { return Value{Type: Int, I: i} }
func FloatValue(f float64) Value { return Value{Type: Float, F: f} }
func StringValue(s string) Value { return Value{Type: String, S: s} }

func (v Value) String() string {
	switch v.Type {
	case Int:
		return fmt.Sprint(v.I)
	case Float:
		return fmt.Sprint(v.F)
	}
	return v.S
}

// MarshalJSON keeps a value's zero fields (omitempty would drop 0 and "").
func (v Value) MarshalJSON() ([]byte, error) {
	switch v.Type {
	case Int:
		return json.Marshal(struct {
			T Type  `json:"t"`
			I int64 `json:"i"`
		}{v.Type, v.I})
	case Float:
		return json.Marshal(struct {
			T Type    `json:"t"`
			F float64 `json:"f"`
		}{v.Type, v.F})
	}
	if !utf8.ValidString(v.S) {
		// JSON strings are UTF-8: other bytes would come back as U+FFFD.
		return json.Marshal(struct {
			T Type   `json:"t"`
			B []byte `json:"b"`
		}{v.Type, []byte(v.S)})
	}
	return json.Marshal(struct {
		T Type   `json:"t"`
		S string `json:"s"`
	}{v.Type, v.S})
}

// UnmarshalJSON reads what MarshalJSON writes: a string that is not UTF-8
// is in "b", as base64.
func (v *Value) UnmarshalJSON(b []byte) error {
	type plain Value
	var w struct {
		plain
		B []byte `json:"b"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*v = Value(w.plain)
	if w.B != nil {
		v.S = string(w.B)
	}
	return nil
}

// Props are an edge's properties by name.
type Props map[string]Value

// check validates props against the label's declared types.
func (l *Label) check(props Props) error {
	for name, v := range props {
		t, ok := l.Props[name]
		if !ok {
			return fmt.Errorf("%w: label %s has no property %s", ErrInvalidArgument, l.Name, name)
		}
		if v.Type != t {
			return fmt.Errorf("%w: property %s of label %s is %s, not %s", ErrInvalidArgument, name, l.Name, t, v.Type)
		}
		switch {
		case t == String && len(v.S) > MaxValueSize:
			return fmt.Errorf("%w: property %s: %d bytes, at most %d", ErrInvalidArgument, name, len(v.S), MaxValueSize)
		case t == Float && (math.IsNaN(v.F) || math.IsInf(v.F, 0)):
			return fmt.Errorf("%w: property %s: %v is not a finite number", ErrInvalidArgument, name, v.F)
		}
	}
	return nil
}

func validVertex(v string) error {
	if v == "" || len(v) > MaxVertexSize {
		return fmt.Errorf("%w: vertex id %q is empty or longer than %d bytes", ErrInvalidArgument, v, MaxVertexSize)
	}
	return nil
}

// Op is what a mutation does to an edge.
type Op uint8

const (
	// Insert sets the edge's properties (live again if it was deleted).
	Insert Op = iota + 1
	// Update merges the properties into the edge's, property by property,
	// the newer timestamp winning.
	Update
	// Delete deletes the edge.
	Delete
	// Increment adds each (numeric) property's value to the edge's.
	Increment
)

func (o Op) String() string {
	switch o {
	case Insert:
		return "insert"
	case Update:
		return "update"
	case Delete:
		return "delete"
	case Increment:
		return "increment"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Mutation is one change to one edge (Src, Label, Tgt) at version TS (a
// timestamp the caller chooses, e.g. microseconds; later wins).
type Mutation struct {
	Op    Op
	Label string
	Src   string
	Tgt   string
	TS    int64
	Props Props
	// ID identifies the request: a mutation re-sent with the same ID after
	// an unknown outcome is applied once. 0: Mutate draws one.
	ID uint64
}

// Edge is an edge as a query returns it.
type Edge struct {
	Src, Label, Tgt string
	TS              int64 // its newest version
	Props           Props
}
