package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/seed-992972ee/percolator/storage"
)

// propState is one property of an edge and the version that set it.
type propState struct {
	V  Value `json:"v"`
	TS int64 `json:"ts"`
}

// edgeState is an edge as its snapshot records it. The edge is live while
// its newest insert, update or increment (InsTS) is newer than its newest
// delete (DelTS); Version is the newest mutation applied.
type edgeState struct {
	Props   map[string]propState `json:"props,omitempty"`
	InsTS   int64                `json:"ins,omitempty"`
	DelTS   int64                `json:"del,omitempty"`
	Version int64                `json:"ver,omitempty"`
	Exists  bool                 `json:"exists,omitempty"`
}

func (s *edgeState) live() bool { return s.Exists && s.InsTS > s.DelTS }

// props are the live edge's property values.
func (s *edgeState) props() Props {
	p := make(Props, len(s.Props))
	for k, v := range s.Props {
		p[k] = v.V
	}
	return p
}

// dropped reports whether m is older than the state (S2Graph drops a
// request whose version is older than the snapshot's).
func (s *edgeState) dropped(m *Mutation) bool { return s.Exists && m.TS < s.Version }

// apply returns the state after m (which is not dropped): properties merge
// one by one, the newer timestamp winning (the seed's merge).
func (s edgeState) apply(m *Mutation) edgeState {
	n := s
	n.Props = maps.Clone(s.Props)
	if n.Props == nil {
		n.Props = map[string]propState{}
	}
	n.Exists = true
	n.Version = max(n.Version, m.TS)
	switch m.Op {
	case Delete:
		n.DelTS = max(n.DelTS, m.TS)
		return n
	}
	if m.TS > n.DelTS {
		// An insert, update or increment after a delete starts the edge
		// afresh: properties the delete removed do not come back (nor
		// count in an increment).
		for k, p := range n.Props {
			if p.TS <= n.DelTS {
				delete(n.Props, k)
			}
		}
	}
	switch m.Op {
	case Insert, Update:
		for k, v := range m.Props {
			if old, ok := n.Props[k]; !ok || m.TS >= old.TS {
				n.Props[k] = propState{V: v, TS: m.TS}
			}
		}
	case Increment:
		for k, d := range m.Props {
			old := n.Props[k]
			v := old.V
			if !ok(old) {
				v = Value{Type: d.Type}
			}
			v.I += d.I
			v.F += d.F
			n.Props[k] = propState{V: v, TS: max(old.TS, m.TS)}
		}
	}
	n.InsTS = max(n.InsTS, m.TS)
	return n
}

func ok(p propState) bool { return p.V.Type != "" }

// pending is a mutation holding (or queued on) the snapshot's lock, with
// the version its index writes carry: the snapshot cell's version when it
// was locked.
type pending struct {
	M   Mutation `json:"m"`
	Ver uint64   `json:"ver"`
}

// recent is a mutation already settled, so a re-sent one is not applied
// twice.
type recent struct {
	ID      uint64 `json:"id"`
	Dropped bool   `json:"dropped,omitempty"`
	// Existed: the edge was live when the mutation applied (Result).
	Existed bool `json:"existed,omitempty"`
}

func (r recent) result() Result { return Result{Dropped: r.Dropped, Existed: r.Existed} }

// maxRecent bounds the settled mutation IDs a snapshot remembers.
const maxRecent = 32

// snapshot is the content of the snapshot edge's cell, stored at its
// version. Locked while Pending is not empty: its mutations are applied
// in order (each lock takeover appends one), and the cell is written again
// without them (the release) once their index and degree writes are done.
type snapshot struct {
	Edge     edgeState `json:"edge"`
	Pending  []pending `json:"pending,omitempty"`
	LockedAt int64     `json:"locked_at,omitempty"` // Unix ms, the locker's clock
	Recent   []recent  `json:"recent,omitempty"`
}

func (s *snapshot) locked() bool { return len(s.Pending) > 0 }

func (s *snapshot) settled(id uint64) (recent, bool) {
	for _, r := range s.Recent {
		if r.ID == id {
			return r, true
		}
	}
	for _, p := range s.Pending {
		if p.M.ID == id {
			return recent{}, false
		}
	}
	return recent{}, false
}

func (s *snapshot) holds(id uint64) bool {
	for _, p := range s.Pending {
		if p.M.ID == id {
			return true
		}
	}
	return false
}

func encodeSnapshot(s *snapshot) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("graph: encoding a snapshot: %v", err))
	}
	return b
}

func decodeSnapshot(b []byte) (snapshot, error) {
	var s snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("graph: corrupt snapshot edge: %w", err)
	}
	return s, nil
}

// indexValue is what an index edge's cell holds: the edge as a query
// returns it.
type indexValue struct {
	TS    int64 `json:"ts"`
	Props Props `json:"props,omitempty"`
}

// fetch reads the snapshot edge: its content and version (0: none).
func (g *Graph) fetch(ctx context.Context, row []byte) (snapshot, uint64, error) {
	r, err := g.store.ReadRow(ctx, row, storage.Filter{{Family: Family, Qualifier: qualSnapshot, Limit: 1}})
	if err != nil || len(r.Cells) == 0 {
		return snapshot{}, 0, err
	}
	s, err := decodeSnapshot(r.Cells[0].Value)
	return s, r.Cells[0].TS, err
}
