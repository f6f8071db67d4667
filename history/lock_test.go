package history

import "testing"

// hold is a Hold operation's two events for process p on lock k.
func hold(p int, k string, inv, done int64, typ Type, l *Lease) []Op {
	m := Mop{F: Hold, Key: k}
	c := m
	c.Lease = l
	return []Op{
		{Process: p, Type: Invoke, F: "hold", Time: inv, Value: []Mop{m}},
		{Process: p, Type: typ, F: "hold", Time: done, Value: []Mop{c}},
	}
}

func lockHistory(ops ...[]Op) []Op {
	var h []Op
	for _, o := range ops {
		h = append(h, o...)
	}
	Sort(h)
	return h
}

func TestCheckLockValid(t *testing.T) {
	h := lockHistory(
		hold(1, "a", 0, 30, OK, &Lease{Token: 1, Granted: 5, Released: 20, Deadline: 100}),
		hold(2, "a", 1, 60, OK, &Lease{Token: 2, Granted: 25, Released: 50, Deadline: 120}),
		// Killed while holding: its lease ends at its deadline.
		hold(3, "a", 2, 200, Info, &Lease{Token: 3, Granted: 55, Deadline: 150}),
		hold(4, "a", 3, 300, OK, &Lease{Token: 4, Granted: 160, Released: 170, Deadline: 250}),
		// Another lock, with tokens of its own.
		hold(5, "b", 0, 30, OK, &Lease{Token: 1, Granted: 10, Released: 20, Deadline: 100}),
		// A grant learnt after its deadline was never valid.
		hold(6, "a", 4, 400, OK, &Lease{Token: 5, Granted: 390, Deadline: 200}),
		// An acquire that failed or was never learnt carries no lease.
		hold(7, "a", 5, 10, Fail, nil),
		hold(8, "a", 6, 500, Info, nil),
	)
	if r := CheckLock(h); !r.Valid || len(r.Anomalies) != 0 || r.OK != 5 {
		t.Fatalf("%s: %+v", r.Summary(), r.Anomalies)
	}
}

func TestCheckLockAnomalies(t *testing.T) {
	for _, c := range []struct {
		kind string
		h    []Op
	}{
		{"overlap", lockHistory(
			hold(1, "a", 0, 30, OK, &Lease{Token: 1, Granted: 5, Released: 20, Deadline: 100}),
			hold(2, "a", 1, 60, OK, &Lease{Token: 2, Granted: 15, Released: 50, Deadline: 120}))},
		{"overlap", lockHistory( // a killed holder's lease lasts to its deadline
			hold(1, "a", 0, 300, Info, &Lease{Token: 1, Granted: 5, Deadline: 100}),
			hold(2, "a", 1, 60, OK, &Lease{Token: 2, Granted: 50, Released: 55, Deadline: 120}))},
		{"duplicate-token", lockHistory(
			hold(1, "a", 0, 30, OK, &Lease{Token: 1, Granted: 5, Released: 20, Deadline: 100}),
			hold(2, "a", 1, 60, OK, &Lease{Token: 1, Granted: 25, Released: 50, Deadline: 120}))},
		{"token-order", lockHistory(
			hold(1, "a", 0, 30, OK, &Lease{Token: 7, Granted: 5, Released: 20, Deadline: 100}),
			hold(2, "a", 1, 60, OK, &Lease{Token: 3, Granted: 25, Released: 50, Deadline: 120}))},
	} {
		r := CheckLock(c.h)
		if r.Valid || r.Counts[c.kind] == 0 {
			t.Errorf("%s not found: %s %+v", c.kind, r.Summary(), r.Anomalies)
			continue
		}
		for _, a := range r.Anomalies {
			if a.Kind == c.kind && (len(a.Ops) != 2 || a.Explanation == "") {
				t.Errorf("%s: %+v", c.kind, a)
			}
		}
	}
}
