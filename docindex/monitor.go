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
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if p, err := pollObservers(ctx, db, before); err == nil {
					report.Progress(p)
				} // else the run is ending; the next reading or the summary tells
			}
		}
	}()
	return m
}

// pollObservers reads the observers' progress since their status was
// before.
func pollObservers(ctx context.Context, db *percolator.DB, before percolator.ObserverStatus) (JobProgress, error) {
	st, err := db.ObserverStatus(ctx)
	if err != nil {
		return JobProgress{}, err
	}
	return observersProgress(before, st), nil
}

// observersProgress is the observers' progress from before to now: the
// runs so far, of a total no one knows (each run may notify more cells),
// and the notifications left.
func observersProgress(before, now percolator.ObserverStatus) JobProgress {
	var pending int64
	for _, c := range now.Columns {
		pending += int64(c.Pending)
	}
	_, runs := diffRuns(before, now)
	detail := fmt.Sprintf("%d notifications left", pending)
	return JobProgress{Phase: PhaseObservers, Step: StepObservers, Done: runs, Total: TotalUnknown, Detail: detail,
		Words: fmt.Sprintf("%s %d, %s", StepObservers, runs, detail), Observers: &now}
}

func (m *monitor) stop() {
	m.cancel()
	<-m.done
}
