package main

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-992972ee/percolator"
)

// monitor polls the observers' status every second while they run: the
// notifications left and the runs per second, shown as progress and
// published.
type monitor struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startMonitor(ctx context.Context, db *percolator.DB, before percolator.ObserverStatus, prog *progress, pub *publisher) *monitor {
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
				pollObservers(ctx, db, before, start, prog, pub)
			}
		}
	}()
	return m
}

// pollObservers shows one reading of the observers' progress.
func pollObservers(ctx context.Context, db *percolator.DB, before percolator.ObserverStatus, start time.Time, prog *progress, pub *publisher) {
	st, err := db.ObserverStatus(ctx)
	if err != nil {
		return // the run is ending; the next reading or the summary tells
	}
	var pending int64
	for _, c := range st.Columns {
		pending += int64(c.Pending)
	}
	_, runs := diffRuns(before, st)
	line := fmt.Sprintf("observers: %d notifications left, %.0f runs/s", pending, float64(runs)/time.Since(start).Seconds())
	prog.show(line, runs, runs+pending)
	pub.set(func(p *published) { p.Observers, p.Progress = &st, line })
}

func (m *monitor) stop() {
	m.cancel()
	<-m.done
}
