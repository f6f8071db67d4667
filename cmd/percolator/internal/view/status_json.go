package view

import (
	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
)

// statusJSON is Status as `status --json` prints it (docs/json.md).
type statusJSON struct {
	Dir       string          `json:"dir,omitempty"`
	Server    string          `json:"server,omitempty"`
	Source    string          `json:"source"`
	Format    uint64          `json:"format_version,omitempty"`
	GC        *GCState        `json:"gc,omitempty"`
	Observers *observersJSON  `json:"observers,omitempty"`
	Index     *indexCountJSON `json:"index,omitempty"`
	Run       *runJSON        `json:"run,omitempty"`
	AgeS      float64         `json:"age_s,omitempty"`
}

type indexCountJSON struct {
	Documents int64 `json:"documents"`
	Terms     int64 `json:"terms"`
	Clusters  int64 `json:"duplicate_clusters"`
}

// MarshalJSON prints the status by the convention of --json.
func (s Status) MarshalJSON() ([]byte, error) {
	j := statusJSON{Dir: s.Dir, Server: s.Server, Source: s.Source, Format: s.Format, GC: s.GC,
		Observers: observersOf(s.Observers), AgeS: Seconds(s.Age)}
	if c := s.Index; c != nil {
		j.Index = &indexCountJSON{c.Documents, c.Terms, c.Clusters}
	}
	if r := s.Run; r != nil {
		j.Run = &runJSON{PID: r.PID, Command: r.Command, Started: Time(r.Started), Updated: Time(r.Updated), Finished: r.Finished,
			Error: r.Error, Phase: r.Phase, Progress: r.Progress, Observers: observersOf(r.Observers), Bad: r.Bad,
			BadTotal: r.BadTotal, Summary: r.Summary}
	}
	return marshalNoHTML(j)
}

// runJSON is the status a running (or the last) command published.
type runJSON struct {
	PID       int             `json:"pid"`
	Command   string          `json:"command"`
	Started   string          `json:"started"`
	Updated   string          `json:"updated"`
	Finished  bool            `json:"finished"`
	Error     string          `json:"error,omitempty"`
	Phase     string          `json:"phase"`
	Progress  string          `json:"progress,omitempty"`
	Observers *observersJSON  `json:"observers,omitempty"`
	Bad       []runstatus.Bad `json:"bad_files,omitempty"`
	BadTotal  int             `json:"bad_total,omitempty"`
	Summary   []string        `json:"summary,omitempty"`
}

// observersJSON is percolator.ObserverStatus as --json prints it.
type observersJSON struct {
	Columns     []columnJSON     `json:"columns"`
	Observers   []observerJSON   `json:"observers"`
	Quarantined int              `json:"quarantined"`
	Scanners    map[string]int64 `json:"scanners"`
	Partitions  []partitionJSON  `json:"partitions,omitempty"`
	Unowned     int              `json:"unowned,omitempty"`
}

type columnJSON struct {
	Column  UserBytes `json:"column"`
	Pending int       `json:"pending"`
	OldestS float64   `json:"oldest_s"`
}

func (c columnJSON) MarshalJSON() ([]byte, error) { return marshalFlat(c) }

type observerJSON struct {
	Name   string           `json:"name"`
	Column UserBytes        `json:"column"`
	Weak   bool             `json:"weak"`
	Counts map[string]int64 `json:"counts"`
}

func (o observerJSON) MarshalJSON() ([]byte, error) { return marshalFlat(o) }

type partitionJSON struct {
	Owner   string    `json:"owner"`
	Worker  string    `json:"worker"`
	Index   int       `json:"index"`
	Of      int       `json:"of"`
	Start   UserBytes `json:"start,omitempty"` // absent: the keyspace's start
	End     UserBytes `json:"end,omitempty"`   // absent: the keyspace's end
	Version uint64    `json:"version"`
	Updated string    `json:"updated"`
	Backlog int       `json:"backlog"`
}

func (p partitionJSON) MarshalJSON() ([]byte, error) { return marshalFlat(p) }

func observersOf(st *percolator.ObserverStatus) *observersJSON {
	if st == nil {
		return nil
	}
	j := &observersJSON{Columns: []columnJSON{}, Observers: []observerJSON{}, Quarantined: st.Quarantined,
		Scanners: nonNil(st.Scanners), Unowned: st.Unowned}
	for _, c := range st.Columns {
		j.Columns = append(j.Columns, columnJSON{UserBytes(c.Column), c.Pending, Seconds(c.Oldest)})
	}
	for _, o := range st.Observers {
		j.Observers = append(j.Observers, observerJSON{o.Name, UserBytes(o.Column), o.Weak, nonNil(o.Counts)})
	}
	for _, p := range st.Partitions {
		j.Partitions = append(j.Partitions, partitionJSON{p.Owner, p.Worker, p.Index, p.Of, p.Start, p.End, p.Version, Time(p.Updated), p.Backlog})
	}
	return j
}

func nonNil[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}
