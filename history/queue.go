package history

import (
	"fmt"
	"sort"
)

// QueueOptions are the queue's.
type QueueOptions struct {
	// MaxDeliveries is how many times an item is delivered before it is a
	// dead letter.
	MaxDeliveries int
}

// CheckQueue checks a work queue: Push operations of one item (its value
// in Arg); Take operations (the value delivered in Arg, its delivery
// count in Read[0], its lease in Lease, Expect 1 when its ack was
// acknowledged); and a final read of Drain (every item left, taken and
// acked) and Dead (the dead letters). Forbidden:
//
//   - "lost": acknowledged pushes whose items were never acked, drained
//     or dead-lettered, more of them than the takes that ended unknown
//     before saying what they took (each of which may have acked one);
//   - "unexpected": a delivery of an item never pushed, or only by a
//     failed push;
//   - "overlap": two deliveries of one item whose leases were valid at
//     once (two workers acting on it together);
//   - "over-delivered": a delivery counted past MaxDeliveries.
//
// An item delivered more than once is counted ("redelivered"): delivery
// is at least once.
func CheckQueue(h []Op, o QueueOptions) Result {
	pairs, bad := pairsOrReport("queue", h)
	if bad != nil {
		return bad.result()
	}
	rep := newReport("queue", pairs)
	q := newQueueState(pairs)
	q.checkPushes(rep)
	q.checkDeliveries(rep, o)
	return rep.result()
}

// queueState is what the history says of each item.
type queueState struct {
	pushed map[int64]Pair   // by value: its push (ok or not)
	okPush map[int64]bool   // pushed by an acknowledged push
	done   map[int64]bool   // acked, drained or dead
	takes  map[int64][]take // deliveries, by value
	final  bool             // a final read was made
	// unseen counts takes that ended unknown before learning what they
	// took (a kill mid-take): each may have taken and acked an item.
	unseen int
}

// take is one delivery.
type take struct {
	op    Op
	count int64
	l     Lease
}

func newQueueState(pairs []Pair) *queueState {
	q := &queueState{pushed: map[int64]Pair{}, okPush: map[int64]bool{}, done: map[int64]bool{}, takes: map[int64][]take{}}
	for _, p := range pairs {
		for _, m := range p.last().Value {
			q.record(p, m)
		}
	}
	return q
}

func (q *queueState) record(p Pair, m Mop) {
	switch m.F {
	case Push:
		q.pushed[m.Arg] = p
		if p.Outcome() == OK {
			q.okPush[m.Arg] = true
		}
	case Take:
		switch {
		case m.Lease != nil && p.Completion != nil:
			t := take{op: *p.Completion, l: *m.Lease}
			if len(m.Read) > 0 {
				t.count = m.Read[0]
			}
			q.takes[m.Arg] = append(q.takes[m.Arg], t)
			// Acked, or maybe acked: its ack's reply was lost.
			if m.Expect == 1 || p.Outcome() == Info {
				q.done[m.Arg] = true
			}
		case p.Outcome() == Info:
			q.unseen++
		}
	case Drain: // every value read was acked, whatever the drain's end
		if p.Completion != nil {
			for _, v := range m.Read {
				q.done[v] = true
				q.takes[v] = append(q.takes[v], take{op: *p.Completion})
			}
		}
	case Dead:
		if p.Outcome() == OK {
			q.final = true
			for _, v := range m.Read {
				q.done[v] = true
			}
		}
	}
}

func (q *queueState) checkPushes(rep *report) {
	if !q.final {
		rep.note("unchecked-no-final-read")
		return
	}
	var missing []int64
	for _, v := range sortedValues(q.okPush) {
		if !q.done[v] {
			missing = append(missing, v)
		}
	}
	if len(missing) <= q.unseen {
		// Each may have been taken and acked by a take that never learnt
		// (or never said) which item it took.
		if len(missing) > 0 {
			rep.r.Counts["maybe-taken-unseen"] += len(missing)
		}
		return
	}
	for _, v := range missing {
		p := q.pushed[v]
		rep.add(Anomaly{Kind: "lost", Forbidden: true, Ops: []Op{p.last()},
			Explanation: fmt.Sprintf("%s pushed %d and it was acknowledged; no ack, drain or dead letter has it, and %d items are missing so, more than the %d takes that ended unknown before saying what they took", name(p.last()), v, len(missing), q.unseen)})
	}
}

func (q *queueState) checkDeliveries(rep *report, o QueueOptions) {
	for _, v := range sortedValues(q.takes) {
		ts := q.takes[v]
		p, ok := q.pushed[v]
		if !ok || p.Outcome() == Fail {
			rep.add(Anomaly{Kind: "unexpected", Forbidden: true, Ops: []Op{ts[0].op},
				Explanation: fmt.Sprintf("%s was delivered %d, which no push that could have happened pushed", name(ts[0].op), v)})
		}
		if len(ts) > 1 {
			rep.r.Counts["redelivered"]++
		}
		for _, t := range ts {
			if o.MaxDeliveries > 0 && t.count > int64(o.MaxDeliveries) {
				rep.add(Anomaly{Kind: "over-delivered", Forbidden: true, Ops: []Op{t.op},
					Explanation: fmt.Sprintf("%s was delivery %d of %d, past the %d before it is a dead letter", name(t.op), t.count, v, o.MaxDeliveries)})
			}
		}
		checkOverlaps(rep, v, ts)
	}
}

// checkOverlaps finds two deliveries of value v whose leases were valid
// at once.
func checkOverlaps(rep *report, v int64, ts []take) {
	valid := heldInOrder(ts, func(t take) Lease { return t.l }) // a drain's take holds no lease
	for i := 1; i < len(valid); i++ {
		a, b := valid[i-1], valid[i]
		if b.l.Granted < a.l.End() {
			rep.add(Anomaly{Kind: "overlap", Forbidden: true, Ops: []Op{a.op, b.op},
				Explanation: fmt.Sprintf("%s still held %d under its lease %s after %s was delivered it", name(a.op), v, fmtNanos(a.l.End()-b.l.Granted), name(b.op))})
		}
	}
}

func sortedValues[V any](m map[int64]V) []int64 {
	vs := make([]int64, 0, len(m))
	for v := range m {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	return vs
}
