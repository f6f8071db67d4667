package memory

import "math/rand/v2"

const maxLevel = 24

// skiplist is an ordered map from row key to the row's cells in one family.
// It is not safe for concurrent use; the Store's lock guards it.
type skiplist struct {
	head  node
	level int
	rng   *rand.Rand
}

type node struct {
	key  string
	row  *famRow
	next []*node
}

func newSkiplist(seed uint64) *skiplist {
	return &skiplist{
		head:  node{next: make([]*node, maxLevel)},
		level: 1,
		rng:   rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
	}
}

// randomLevel returns a level with P(level > n) = 4^-n.
func (l *skiplist) randomLevel() int {
	lvl := 1
	for lvl < maxLevel && l.rng.Uint32()&3 == 0 {
		lvl++
	}
	return lvl
}

// findPrev fills prev with, per level, the last node whose key is < key,
// and returns the first node whose key is >= key.
func (l *skiplist) findPrev(key string, prev *[maxLevel]*node) *node {
	x := &l.head
	for i := l.level - 1; i >= 0; i-- {
		for x.next[i] != nil && x.next[i].key < key {
			x = x.next[i]
		}
		if prev != nil {
			prev[i] = x
		}
	}
	return x.next[0]
}

// seekGE returns the first node whose key is >= key, or nil.
func (l *skiplist) seekGE(key string) *node {
	return l.findPrev(key, nil)
}

// insert adds key, which must be absent.
func (l *skiplist) insert(key string, row *famRow) {
	var prev [maxLevel]*node
	l.findPrev(key, &prev)
	lvl := l.randomLevel()
	for i := l.level; i < lvl; i++ {
		prev[i] = &l.head
	}
	l.level = max(l.level, lvl)
	n := &node{key: key, row: row, next: make([]*node, lvl)}
	for i := range lvl {
		n.next[i] = prev[i].next[i]
		prev[i].next[i] = n
	}
}

// remove deletes key if present.
func (l *skiplist) remove(key string) {
	var prev [maxLevel]*node
	n := l.findPrev(key, &prev)
	if n == nil || n.key != key {
		return
	}
	for i := range n.next {
		prev[i].next[i] = n.next[i]
	}
	for l.level > 1 && l.head.next[l.level-1] == nil {
		l.level--
	}
}
