package history

import (
	"bytes"
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// RegisterOptions configures CheckRegister. The zero value searches
// without a time limit.
type RegisterOptions struct {
	// Timeout bounds the whole search (all keys); zero is no limit. A key
	// whose search it cuts short is reported "unknown-linearizability",
	// which is invalid: an unfinished search proves nothing.
	Timeout time.Duration
}

// CheckRegister checks that single-key operations F "read" ([r k [x]], or
// [] when unset), "write" ([w k v]) and "cas" ([cas k expect->v]) are
// linearizable, key by key, with porcupine. A failed operation did not
// happen (a failed cas is a no-op) and is dropped; an info write or cas
// may take effect at any time after its invocation, so it returns at
// infinity; an info read tells nothing and is dropped.
func CheckRegister(h []Op, o RegisterOptions) Result {
	pairs, bad := pairsOrReport("register", h)
	if bad != nil {
		return bad.result()
	}
	rep := newReport("register", pairs)
	byKey, keys := registerOps(pairs)
	var deadline time.Time
	if o.Timeout > 0 {
		deadline = time.Now().Add(o.Timeout)
	}
	for _, k := range keys {
		checkKey(rep, k, byKey[k], deadline)
	}
	return rep.result()
}

// regInput is a register operation for porcupine.
type regInput struct {
	f           string // Read, Write or CAS
	arg, expect int64
	info        bool // a cas that may or may not have happened
	op          Op   // for reports
}

// regState is a register's value; a read's output is one too.
type regState struct {
	set   bool
	value int64
}

var registerModel = porcupine.Model{
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		return registerStep(state.(regState), input.(regInput), output)
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		switch in.f {
		case Read:
			return fmt.Sprintf("read() -> %s", output.(regState))
		case Write:
			return fmt.Sprintf("write(%d)", in.arg)
		}
		return fmt.Sprintf("cas(%d -> %d)", in.expect, in.arg)
	},
	DescribeState: func(state any) string { return state.(regState).String() },
}

func (s regState) String() string {
	if !s.set {
		return "unset"
	}
	return fmt.Sprint(s.value)
}

func registerStep(s regState, in regInput, output any) (bool, any) {
	switch in.f {
	case Read:
		return output.(regState) == s, s
	case Write:
		return true, regState{true, in.arg}
	}
	if s == (regState{true, in.expect}) {
		return true, regState{true, in.arg}
	}
	return in.info, s // an ok cas happened: the value was expect
}

// registerOps turns pairs into porcupine operations by key (keys sorted).
func registerOps(pairs []Pair) (map[string][]porcupine.Operation, []string) {
	byKey := map[string][]porcupine.Operation{}
	clients := map[string]map[int]int{} // key -> process -> dense client id
	for _, p := range pairs {
		op, key, ok := registerOp(p)
		if !ok {
			continue
		}
		if clients[key] == nil {
			clients[key] = map[int]int{}
		}
		c, seen := clients[key][p.Invoke.Process]
		if !seen {
			c = len(clients[key])
			clients[key][p.Invoke.Process] = c
		}
		op.ClientId = c
		byKey[key] = append(byKey[key], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return byKey, keys
}

// registerOp converts one pair; false drops it.
func registerOp(p Pair) (porcupine.Operation, string, bool) {
	out := p.Outcome()
	ms := p.mops()
	if out == Fail || len(ms) != 1 || (p.Invoke.F == "read" && out != OK) {
		return porcupine.Operation{}, "", false
	}
	m := ms[0]
	in := regInput{f: m.F, arg: m.Arg, expect: m.Expect, info: out == Info, op: p.last()}
	var output any
	if m.F == Read {
		if m.Read == nil {
			return porcupine.Operation{}, "", false
		}
		output = readState(m.Read)
	}
	return porcupine.Operation{Input: in, Output: output, Call: p.invokeTime(), Return: p.completeTime()}, m.Key, true
}

func readState(vs []int64) regState {
	if len(vs) == 0 {
		return regState{}
	}
	return regState{true, vs[0]}
}

// checkKey checks one key's operations before the deadline (zero: none).
func checkKey(rep *report, key string, ops []porcupine.Operation, deadline time.Time) {
	timeout, expired := remaining(deadline)
	res := porcupine.Unknown
	if !expired {
		res = porcupine.CheckOperationsTimeout(registerModel, ops, timeout)
	}
	switch res {
	case porcupine.Unknown:
		rep.add(Anomaly{Kind: "unknown-linearizability", Forbidden: true, Ops: registerReportOps(ops),
			Explanation: fmt.Sprintf("key %s: the search over its %d operations timed out; not proven linearizable", key, len(ops))})
	case porcupine.Illegal:
		rep.add(Anomaly{Kind: "not-linearizable", Forbidden: true, Ops: registerReportOps(ops),
			Explanation: fmt.Sprintf("key %s: no linearization of its %d operations (%s); see the HTML visualization", key, len(ops), names(registerReportOps(ops)...))})
		if rep.r.HTML == nil {
			rep.r.HTML = visualize(ops, deadline)
		}
	}
}

// remaining is the time left before the deadline (0: no limit), and
// whether it has passed.
func remaining(deadline time.Time) (time.Duration, bool) {
	if deadline.IsZero() {
		return 0, false
	}
	d := time.Until(deadline)
	return d, d <= 0
}

// visualize renders porcupine's view of a key's operations. It searches
// again, recording partial linearizations, for at most a minute past the
// deadline (an ugly page beats none).
func visualize(ops []porcupine.Operation, deadline time.Time) []byte {
	timeout := time.Minute
	if d, _ := remaining(deadline); d > 0 {
		timeout += d
	}
	_, info := porcupine.CheckOperationsVerbose(registerModel, ops, timeout)
	var buf bytes.Buffer
	if err := porcupine.Visualize(registerModel, info, &buf); err != nil {
		return []byte(fmt.Sprintf("<html><body>visualization failed: %v</body></html>", err))
	}
	return buf.Bytes()
}

// maxReportOps bounds the operations a register anomaly lists.
const maxReportOps = 32

func registerReportOps(ops []porcupine.Operation) []Op {
	var out []Op
	for _, o := range ops[:min(len(ops), maxReportOps)] {
		out = append(out, o.Input.(regInput).op)
	}
	return out
}
