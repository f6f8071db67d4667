package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestTornHistory checks a history whose writer was killed mid-line: the
// events before the torn line are read and checked.
func TestTornHistory(t *testing.T) {
	var b builder
	b.txn(1, OK, ap("x", 1))
	b.txn(2, OK, rd("x", 1))
	b.invoke(3, "txn", ap("x", 2))
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	for _, o := range b.h {
		if err := enc.Write(o); err != nil {
			t.Fatal(err)
		}
	}
	full := buf.Len()
	if err := enc.Write(Op{Index: 5, Process: 3, Type: OK, F: "txn", Value: []Mop{ap("x", 2)}}); err != nil {
		t.Fatal(err)
	}
	torn := buf.Bytes()[:full+10]
	h, err := ReadAll(bytes.NewReader(torn))
	if !errors.Is(err, ErrTorn) || len(h) != len(b.h) {
		t.Fatalf("read %d events, %v; want %d and ErrTorn", len(h), err, len(b.h))
	}
	r := CheckListAppend(h, ListAppendOptions{RealTime: true})
	expectValid(t, r)
	if r.Info != 1 {
		t.Errorf("the torn completion's operation should count as info: %s", r.Summary())
	}
}

func TestResultReport(t *testing.T) {
	var b builder
	b.txn(1, OK, ap("x", 1), ap("y", 1))
	b.txn(2, OK, ap("x", 2), ap("y", 2))
	b.txn(3, OK, rd("x", 1, 2), rd("y", 2, 1))
	b.txn(4, Fail, ap("z", 1))
	r := CheckListAppend(b.h, ListAppendOptions{})
	if got, want := r.Summary(), "list-append: INVALID, 3 ok, 1 fail, 0 info; G0=1"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"checker":`, `"valid":false`, `"counts":{"G0":1}`, `"anomalies":[{"kind":"G0","forbidden":true,"ops":[`, `"explanation":`} {
		if !strings.Contains(string(js), key) {
			t.Errorf("JSON %s lacks %s", js, key)
		}
	}
}

func TestMaxExamples(t *testing.T) {
	var b builder
	for p := range MaxExamples + 3 {
		b.txn(p, OK, rd("x", 9))
	}
	r := CheckListAppend(b.h, ListAppendOptions{})
	if r.Counts["unexpected"] != MaxExamples+3 || len(r.Anomalies) != MaxExamples {
		t.Errorf("%s with %d examples", r.Summary(), len(r.Anomalies))
	}
}
