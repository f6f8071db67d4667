package docindex

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-992972ee/percolator"
)

// monitor polls the observers' status every second while they run: the
// notifications left and the runs per second, reported as the observers
// phase's progress.
type monitor struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startMonitor(ctx context.Context, db *percolator.DB, before percolator.ObserverStatus, report JobReport) *monitor {
	ctx, cancel := context.WithCancel(ctx)
	m := &monitor{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		start := time.Now()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if p, err := pollObservers(ctx, db, before, start); err == nil {
					report.Progress(p)
				} // else the run is ending; the next reading or the summary tells
			}
		}
	}()
	return m
}

// pollObservers reads the observers' progress since start, when their
// status was before.
func pollObservers(ctx context.Context, db *percolator.DB, before percolator.ObserverStatus, start time.Time) (JobProgress, error) {
	st, err := db.ObserverStatus(ctx)
	if err != nil {
		return JobProgress{}, err
	}
	var pending int64
	for _, c := range st.Columns {
		pending += int64(c.Pending)
	}
	_, runs := diffRuns(before, st)
	line := fmt.Sprintf("observers: %d notifications left, %.0f runs/s", pending, float64(runs)/time.Since(start).Seconds())
	return JobProgress{Phase: PhaseObservers, Done: runs, Total: runs + pending, Label: line, Words: line, Observers: &st}, nil
}

func (m *monitor) stop() {
	m.cancel()
	<-m.done
}
