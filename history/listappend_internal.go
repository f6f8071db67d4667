package history

import (
	"fmt"
	"slices"
)

// keyState is what a transaction knows of a key from its own earlier
// micro-operations: the whole list once it read it, otherwise only the
// values it appended (the list's suffix).
type keyState struct {
	known bool
	list  []int64
}

// checkInternal finds transactions whose reads disagree with their own
// earlier reads and appends.
func (la *listAppend) checkInternal(rep *report) {
	for t, p := range la.pairs {
		if p.Outcome() != OK {
			continue
		}
		if msg := internalError(p.mops()); msg != "" {
			rep.add(Anomaly{Kind: "internal", Forbidden: true, Ops: []Op{la.op(t)},
				Explanation: fmt.Sprintf("%s %s", la.name(t), msg)})
		}
	}
}

// internalError says how a transaction contradicts itself, or "".
func internalError(ms []Mop) string {
	st := map[string]*keyState{}
	for _, m := range ms {
		s := st[m.Key]
		if s == nil {
			s = &keyState{}
			st[m.Key] = s
		}
		switch {
		case m.F == Append:
			s.list = append(s.list, m.Arg)
		case m.F == Read && m.Read != nil:
			if msg := s.contradicts(m); msg != "" {
				return msg
			}
			s.known, s.list = true, slices.Clone(m.Read)
		}
	}
	return ""
}

func (s *keyState) contradicts(m Mop) string {
	if s.known && !slices.Equal(m.Read, s.list) {
		return fmt.Sprintf("read %s = %v, expected %v from its own reads and appends", m.Key, m.Read, s.list)
	}
	if !s.known && !hasSuffix(m.Read, s.list) {
		return fmt.Sprintf("read %s = %v, not ending in its own appends %v", m.Key, m.Read, s.list)
	}
	return ""
}

func hasSuffix(l, suffix []int64) bool {
	return len(l) >= len(suffix) && slices.Equal(l[len(l)-len(suffix):], suffix)
}
