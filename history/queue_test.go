package history

import "testing"

func qop(p int, f string, inv, done int64, typ Type, m Mop) []Op {
	in := m
	in.Read, in.Lease, in.Expect = nil, nil, 0
	return []Op{
		{Process: p, Type: Invoke, F: f, Time: inv, Value: []Mop{in}},
		{Process: p, Type: typ, F: f, Time: done, Value: []Mop{m}},
	}
}

func push(p int, v int64, t int64, typ Type) []Op {
	return qop(p, "push", t, t+1, typ, Mop{F: Push, Key: "q", Arg: v})
}

func takeOp(p int, v, count int64, granted, released, deadline int64, acked bool) []Op {
	m := Mop{F: Take, Key: "q", Arg: v, Read: []int64{count}, Lease: &Lease{Granted: granted, Released: released, Deadline: deadline}}
	if acked {
		m.Expect = 1
	}
	return qop(p, "take", granted-1, max(released, granted)+1, OK, m)
}

func final(p int, t int64, drained, dead []int64) []Op {
	return []Op{
		{Process: p, Type: Invoke, F: "final", Time: t, Value: []Mop{{F: Drain, Key: "q"}, {F: Dead, Key: "q"}}},
		{Process: p, Type: OK, F: "final", Time: t + 1, Value: []Mop{{F: Drain, Key: "q", Read: drained}, {F: Dead, Key: "q", Read: dead}}},
	}
}

func TestCheckQueueValid(t *testing.T) {
	h := lockHistory(
		push(1, 1, 0, OK), push(1, 2, 10, OK), push(1, 3, 20, OK), push(1, 4, 30, Info), push(1, 5, 40, Fail),
		takeOp(2, 1, 1, 50, 60, 100, true),
		// 2 is delivered, its worker dies (no ack), its lease ends, and
		// it is delivered again after.
		takeOp(3, 2, 1, 50, 0, 120, false),
		takeOp(4, 2, 2, 130, 140, 200, true),
		final(9, 1000, []int64{3}, nil),
	)
	r := CheckQueue(h, QueueOptions{MaxDeliveries: 5})
	if !r.Valid || r.Counts["redelivered"] != 1 {
		t.Fatalf("%s %+v", r.Summary(), r.Anomalies)
	}
}

func TestCheckQueueAnomalies(t *testing.T) {
	for _, c := range []struct {
		kind string
		h    []Op
	}{
		{"lost", lockHistory(push(1, 1, 0, OK), push(1, 2, 5, OK), takeOp(2, 1, 1, 50, 60, 100, true), final(9, 1000, nil, nil))},
		{"unexpected", lockHistory(push(1, 1, 0, Fail), takeOp(2, 1, 1, 50, 60, 100, true), final(9, 1000, nil, nil))},
		{"unexpected", lockHistory(takeOp(2, 7, 1, 50, 60, 100, true))},
		{"overlap", lockHistory(push(1, 1, 0, OK), takeOp(2, 1, 1, 50, 0, 100, false), takeOp(3, 1, 2, 80, 90, 150, true))},
		{"over-delivered", lockHistory(push(1, 1, 0, OK), takeOp(2, 1, 6, 50, 60, 100, true))},
	} {
		r := CheckQueue(c.h, QueueOptions{MaxDeliveries: 5})
		if r.Valid || r.Counts[c.kind] == 0 {
			t.Errorf("%s not found: %s %+v", c.kind, r.Summary(), r.Anomalies)
		}
	}
	// A take killed before saying what it took may have acked one item:
	// one missing item is no anomaly, two are.
	unseen := []Op{{Process: 5, Type: Invoke, F: "take", Time: 70, Value: []Mop{{F: Take, Key: "q"}}}}
	if r := CheckQueue(lockHistory(push(1, 1, 0, OK), unseen, final(9, 1000, nil, nil)), QueueOptions{}); !r.Valid || r.Counts["maybe-taken-unseen"] != 1 {
		t.Errorf("one unseen take covers one item: %s %+v", r.Summary(), r.Anomalies)
	}
	if r := CheckQueue(lockHistory(push(1, 1, 0, OK), push(1, 2, 5, OK), unseen, final(9, 1000, nil, nil)), QueueOptions{}); r.Valid || r.Counts["lost"] != 2 {
		t.Errorf("one unseen take cannot cover two items: %s", r.Summary())
	}
	// Dead letters count as done.
	if r := CheckQueue(lockHistory(push(1, 1, 0, OK), final(9, 1000, nil, []int64{1})), QueueOptions{}); !r.Valid {
		t.Errorf("a dead letter is not lost: %+v", r.Anomalies)
	}
}
