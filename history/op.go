package history

import (
	"fmt"
	"sort"
)

// Type is what an event of a history says of its operation.
type Type string

const (
	// Invoke: the process is about to perform the operation.
	Invoke Type = "invoke"
	// OK: the operation happened, with the values the event carries.
	OK Type = "ok"
	// Fail: the operation certainly did not happen (nothing of it is
	// visible to anyone, ever).
	Fail Type = "fail"
	// Info: the outcome is unknown (a lost reply, a killed process): the
	// operation may or may not have happened, or may happen later.
	Info Type = "info"
)

// Micro-operation functions (Mop.F).
const (
	Append   = "append"   // list-append: append Arg to the list at Key
	Read     = "r"        // read Key: Read is its value (a list, or [] / [x] for a register)
	Write    = "w"        // write Arg to Key
	CAS      = "cas"      // compare-and-set Key from Expect to Arg
	Add      = "add"      // set: add Arg to the set at Key
	Transfer = "transfer" // bank: move Arg from account Key to account To
	Hold     = "hold"     // lock: acquire the lock Key, act, release; Lease says what was held
	Push     = "push"     // queue: push Arg to the queue Key
	Take     = "take"     // queue: pop an item of Key under a lease (Lease), act, then ack (Expect 1) or not
	Drain    = "drain"    // queue: the final take of every item left (Read), acked
	Dead     = "dead"     // queue: the dead letters (Read)
	Insert   = "insert"   // graph: insert the edge Key at version Arg (its property v = Arg)
	Remove   = "delete"   // graph: delete the edge Key at version Arg
	EdgeRead = "edge"     // graph: the edge Key after the run: [] absent, [version, v] present
	Checked  = "check"    // graph: the graph's own check after the run: Read[0] mismatches
	// Processed is observer's final read of what the observer's runs
	// appended for Key: Read, one value per committed run.
	Processed = "processed"
)

// Mop is one micro-operation of an operation. An operation of a
// transactional workload is a list of them (Jepsen's [[:append k v]
// [:r k nil]]); a single-key operation is a list of one.
type Mop struct {
	F      string `json:"f"`
	Key    string `json:"k"`
	To     string `json:"to,omitempty"`     // Transfer's destination account
	Arg    int64  `json:"v,omitempty"`      // Append, Write, Add, Transfer's amount, CAS's new value
	Expect int64  `json:"expect,omitempty"` // CAS's expected value
	// Read is a read's result, nil while unknown (an invocation, or a
	// completion that did not learn it): a list for list-append and set
	// reads (in order), [] for a key absent, [x] for a register holding x.
	// Never omitted: JSON null and [] differ.
	Read []int64 `json:"read"`
	// Lease is a Hold's lease, once its grant is known (an unknown Hold
	// may carry it too: the grant was learnt, the release was not).
	Lease *Lease `json:"lease,omitempty"`
}

// Lease is what a lock holder knew of its lease, its times on
// CLOCK_MONOTONIC: when it learnt of the grant, when it stopped acting
// (sent its release; 0 if it never did), and its deadline, after which
// it may not act whatever happens.
type Lease struct {
	Token    uint64 `json:"token"`
	Granted  int64  `json:"granted"`
	Released int64  `json:"released,omitempty"`
	Deadline int64  `json:"deadline"`
}

// End is when the holder stopped holding: its release or its deadline,
// the earlier.
func (l Lease) End() int64 {
	if l.Released > 0 && l.Released < l.Deadline {
		return l.Released
	}
	return l.Deadline
}

// Op is one event of a history. An invocation and its completion (ok,
// fail or info) share Process, F and, for the completion, carry the values
// learnt (reads filled in).
//
// Invariant: in a well-formed history each process has at most one
// operation outstanding; a process whose operation ended info performs no
// other (a client takes a fresh process id after one).
type Op struct {
	Index   int    `json:"index"`   // position in the history, from 0
	Process int    `json:"process"` // logical process (one thread of one client)
	Type    Type   `json:"type"`
	F       string `json:"f"`    // "txn", "read", "write", "cas", "add", "transfer", ...
	Time    int64  `json:"time"` // CLOCK_MONOTONIC, nanoseconds: comparable across processes of one machine
	Value   []Mop  `json:"value"`
	Error   string `json:"error,omitempty"`  // why it failed or is unknown
	Client  int    `json:"client,omitempty"` // which client process recorded it (for reports)
}

// String renders an operation compactly for reports.
func (o Op) String() string {
	return fmt.Sprintf("%d p%d %s %s %v", o.Index, o.Process, o.Type, o.F, mopsString(o.Value))
}

func mopsString(ms []Mop) string {
	s := "["
	for i, m := range ms {
		if i > 0 {
			s += " "
		}
		s += m.String()
	}
	return s + "]"
}

// String renders a micro-operation as Jepsen writes it.
func (m Mop) String() string {
	switch m.F {
	case Read:
		if m.Read == nil {
			return fmt.Sprintf("[r %s nil]", m.Key)
		}
		return fmt.Sprintf("[r %s %v]", m.Key, m.Read)
	case Transfer:
		return fmt.Sprintf("[transfer %s->%s %d]", m.Key, m.To, m.Arg)
	case CAS:
		return fmt.Sprintf("[cas %s %d->%d]", m.Key, m.Expect, m.Arg)
	default:
		return fmt.Sprintf("[%s %s %d]", m.F, m.Key, m.Arg)
	}
}

// Sort orders events by Time (ties keep their order) and renumbers
// Index; histories recorded by several processes are merged with it.
func Sort(h []Op) {
	sort.SliceStable(h, func(i, j int) bool { return h[i].Time < h[j].Time })
	for i := range h {
		h[i].Index = i
	}
}

// Pair is one operation: its invocation and its completion. Completion
// is nil when the history ends before it (treated as info).
type Pair struct {
	Invoke     Op
	Completion *Op
}

// Outcome is the pair's type: the completion's, or Info when there is none.
func (p Pair) Outcome() Type {
	if p.Completion == nil {
		return Info
	}
	return p.Completion.Type
}

// Pairs matches each invocation with its process's next completion, in
// history order. A completion without an invocation is an error, and so
// is a second invocation while one is outstanding.
func Pairs(h []Op) ([]Pair, error) {
	var out []Pair
	open := map[int]int{} // process -> index in out
	for _, o := range h {
		switch o.Type {
		case Invoke:
			if i, ok := open[o.Process]; ok {
				return nil, fmt.Errorf("history: process %d invoked %q at index %d while %d was outstanding", o.Process, o.F, o.Index, out[i].Invoke.Index)
			}
			open[o.Process] = len(out)
			out = append(out, Pair{Invoke: o})
		case OK, Fail, Info:
			i, ok := open[o.Process]
			if !ok {
				return nil, fmt.Errorf("history: %s at index %d of process %d has no invocation", o.Type, o.Index, o.Process)
			}
			c := o
			out[i].Completion = &c
			delete(open, o.Process)
		default:
			return nil, fmt.Errorf("history: event %d has type %q", o.Index, o.Type)
		}
	}
	return out, nil
}
