package history

import "testing"

func gmut(p int, f string, key string, ver int64, t int64, typ Type) []Op {
	m := Mop{F: f, Key: key, Arg: ver}
	return []Op{
		{Process: p, Type: Invoke, F: "mutate", Time: t, Value: []Mop{m}},
		{Process: p, Type: typ, F: "mutate", Time: t + 1, Value: []Mop{m}},
	}
}

func gfinal(t int64, mismatches int64, edges map[string][]int64) []Op {
	inv := []Mop{{F: Checked, Key: "check"}}
	done := []Mop{{F: Checked, Key: "check", Read: []int64{mismatches}}}
	for k, r := range edges {
		inv = append(inv, Mop{F: EdgeRead, Key: k})
		done = append(done, Mop{F: EdgeRead, Key: k, Read: r})
	}
	return []Op{{Process: 99, Type: Invoke, F: "final", Time: t, Value: inv}, {Process: 99, Type: OK, F: "final", Time: t + 1, Value: done}}
}

func TestCheckGraph(t *testing.T) {
	base := lockHistory(
		gmut(1, Insert, "a>b", 10, 0, OK), gmut(2, Remove, "a>b", 20, 2, OK), gmut(1, Insert, "a>b", 30, 4, Info),
		gmut(3, Insert, "b>c", 5, 0, OK), gmut(3, Insert, "b>c", 7, 2, Fail),
	)
	valid := []map[string][]int64{
		{"a>b": {}, "b>c": {5, 5}},       // the unknown insert did not land
		{"a>b": {30, 30}, "b>c": {5, 5}}, // it did
	}
	for _, edges := range valid {
		if r := CheckGraph(append(append([]Op{}, base...), gfinal(100, 0, edges)...)); !r.Valid {
			t.Errorf("%v: %s %+v", edges, r.Summary(), r.Anomalies)
		}
	}
	for kind, edges := range map[string]map[string][]int64{
		"lost":    {"a>b": {10, 10}, "b>c": {5, 5}}, // the acknowledged delete at 20 lost
		"phantom": {"a>b": {}, "b>c": {7, 7}},       // the failed insert landed
		"torn":    {"a>b": {}, "b>c": {5, 7}},
	} {
		if r := CheckGraph(append(append([]Op{}, base...), gfinal(100, 0, edges)...)); r.Valid || r.Counts[kind] == 0 {
			t.Errorf("%s not found: %s %+v", kind, r.Summary(), r.Anomalies)
		}
	}
	lostInsert := lockHistory(gmut(1, Insert, "x>y", 10, 0, OK), gfinal(100, 0, map[string][]int64{"x>y": {}}))
	if r := CheckGraph(lostInsert); r.Counts["lost"] != 1 {
		t.Errorf("an acknowledged insert found absent: %s", r.Summary())
	}
	if r := CheckGraph(lockHistory(gfinal(100, 2, nil))); r.Counts["check-mismatch"] != 1 {
		t.Errorf("check mismatches: %s", r.Summary())
	}
}
