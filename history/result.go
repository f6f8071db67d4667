package history

import (
	"fmt"
	"sort"
	"strings"
)

// MaxExamples bounds the anomalies a Result keeps per kind; Counts has
// them all.
const MaxExamples = 8

// Anomaly is one anomaly found.
type Anomaly struct {
	// Kind names the anomaly: "G0", "G1a", "G1b", "G1c", "G-single",
	// "G-nonadjacent", "G2", a cycle's kind with "-realtime" when it needs
	// a real-time edge, "internal", "lost-update", "not-linearizable", ...
	// (doc.go lists each checker's).
	Kind string `json:"kind"`
	// Forbidden: forbidden under strong snapshot isolation. G2 (write
	// skew) is reported but allowed.
	Forbidden bool `json:"forbidden"`
	// Ops are the operations involved (their completions, or invocations
	// when there is none), a cycle's transactions in cycle order.
	Ops []Op `json:"ops"`
	// Explanation names the operations (T<index> is the operation whose
	// completion has that index) and says what is wrong.
	Explanation string `json:"explanation"`
}

// Result is a checker's verdict.
type Result struct {
	Checker string `json:"checker"`
	// Valid: no forbidden anomaly was found.
	Valid bool `json:"valid"`
	// OK, Fail and Info count operations (invocation and completion) by
	// outcome; an invocation without completion counts as info.
	OK   int `json:"ok"`
	Fail int `json:"fail"`
	Info int `json:"info"`
	// Counts are the anomalies found by kind, allowed ones included, and
	// what could not be checked ("unchecked-accounts").
	Counts map[string]int `json:"counts"`
	// Anomalies are examples, at most MaxExamples per kind.
	Anomalies []Anomaly `json:"anomalies"`
	// HTML is porcupine's visualization of a key that is not
	// linearizable (register only). Not in JSON: write it to its own file.
	HTML []byte `json:"-"`
}

// Summary is one line: the checker, the verdict, the operations by
// outcome and the anomalies by kind.
func (r Result) Summary() string {
	verdict := "valid"
	if !r.Valid {
		verdict = "INVALID"
	}
	s := fmt.Sprintf("%s: %s, %d ok, %d fail, %d info", r.Checker, verdict, r.OK, r.Fail, r.Info)
	kinds := make([]string, 0, len(r.Counts))
	for k := range r.Counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for i, k := range kinds {
		sep := ", "
		if i == 0 {
			sep = "; "
		}
		s += fmt.Sprintf("%s%s=%d", sep, k, r.Counts[k])
	}
	return s
}

// String is Summary.
func (r Result) String() string { return r.Summary() }

// report accumulates a Result.
type report struct{ r Result }

// newReport counts the pairs' outcomes.
func newReport(checker string, pairs []Pair) *report {
	rep := &report{r: Result{Checker: checker, Valid: true, Counts: map[string]int{}}}
	for _, p := range pairs {
		switch p.Outcome() {
		case OK:
			rep.r.OK++
		case Fail:
			rep.r.Fail++
		default:
			rep.r.Info++
		}
	}
	return rep
}

// add records an anomaly, keeping the first MaxExamples of its kind.
func (rep *report) add(a Anomaly) {
	if rep.r.Counts[a.Kind] < MaxExamples {
		rep.r.Anomalies = append(rep.r.Anomalies, a)
	}
	rep.r.Counts[a.Kind]++
	if a.Forbidden {
		rep.r.Valid = false
	}
}

// note counts something that is not an anomaly (what was left unchecked).
func (rep *report) note(kind string) { rep.r.Counts[kind]++ }

func (rep *report) result() Result { return rep.r }

// pairsOrReport pairs h; on a malformed history it returns a report
// holding one forbidden "malformed" anomaly: nothing can be checked.
func pairsOrReport(checker string, h []Op) ([]Pair, *report) {
	pairs, err := Pairs(h)
	if err != nil {
		rep := newReport(checker, nil)
		rep.add(Anomaly{Kind: "malformed", Forbidden: true, Explanation: err.Error()})
		return nil, rep
	}
	return pairs, nil
}

// last is the operation that stands for a pair in reports: its
// completion, or its invocation when it has none.
func (p Pair) last() Op {
	if p.Completion != nil {
		return *p.Completion
	}
	return p.Invoke
}

// name is how explanations call an operation: T and its event index.
func name(o Op) string { return fmt.Sprintf("T%d", o.Index) }

// names joins operations' names.
func names(ops ...Op) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = name(o)
	}
	return strings.Join(s, ", ")
}

// invokeTime and completeTime are a pair's interval; an operation
// without an ok or fail completion may take effect at any time after its
// invocation, so it completes at infinity.
func (p Pair) invokeTime() int64 { return p.Invoke.Time }

func (p Pair) completeTime() int64 {
	if o := p.Outcome(); o == OK || o == Fail {
		return p.Completion.Time
	}
	return infinity
}

const infinity = int64(^uint64(0) >> 1)

// mops are what an operation did: the completion's micro-operations for
// an ok operation (its reads filled in), the invocation's otherwise (an
// info completion may not know its reads).
func (p Pair) mops() []Mop {
	if p.Outcome() == OK {
		return p.Completion.Value
	}
	return p.Invoke.Value
}
