package history

// tarjan returns the strongly connected components with more than one
// node of the graph whose node v has successors succ[v]. It is Tarjan's
// algorithm with an explicit stack: histories are long enough to make
// recursion deep.
func tarjan(succ [][]int32) [][]int {
	t := &tarjanState{
		succ:    succ,
		index:   make([]int, len(succ)),
		low:     make([]int, len(succ)),
		onStack: make([]bool, len(succ)),
	}
	for v := range succ {
		if t.index[v] == 0 {
			t.run(v)
		}
	}
	return t.out
}

type tarjanState struct {
	succ       [][]int32
	index, low []int // index 0: unvisited
	onStack    []bool
	stack      []int
	next       int
	out        [][]int
}

type tarjanFrame struct{ v, i int }

func (t *tarjanState) visit(v int) {
	t.next++
	t.index[v], t.low[v] = t.next, t.next
	t.stack = append(t.stack, v)
	t.onStack[v] = true
}

func (t *tarjanState) run(root int) {
	t.visit(root)
	call := []tarjanFrame{{v: root}}
	for len(call) > 0 {
		f := &call[len(call)-1]
		if f.i < len(t.succ[f.v]) {
			w := int(t.succ[f.v][f.i])
			f.i++
			if t.index[w] == 0 {
				t.visit(w)
				call = append(call, tarjanFrame{v: w})
			} else if t.onStack[w] {
				t.low[f.v] = min(t.low[f.v], t.index[w])
			}
			continue
		}
		v := f.v
		call = call[:len(call)-1]
		if len(call) > 0 {
			u := call[len(call)-1].v
			t.low[u] = min(t.low[u], t.low[v])
		}
		if t.low[v] == t.index[v] {
			t.pop(v)
		}
	}
}

// pop ends the component rooted at v.
func (t *tarjanState) pop(v int) {
	var comp []int
	for {
		w := t.stack[len(t.stack)-1]
		t.stack = t.stack[:len(t.stack)-1]
		t.onStack[w] = false
		comp = append(comp, w)
		if w == v {
			break
		}
	}
	if len(comp) > 1 {
		t.out = append(t.out, comp)
	}
}
