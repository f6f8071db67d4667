// Package progress shows how far the phases of a long percolator command
// got. A phase names what it counts (its label) and, if it is known
// before the phase starts, how many there are (its total):
//
//  1. Start(label, total) begins a phase; total is Unknown if the count
//     is not known in advance. A total never changes within a phase: a
//     phase that learns its length later is a new phase.
//  2. Set(done) or Detail(done, words) reports the count so far, from
//     any goroutine.
//  3. End(err) ends the phase with the error that ended it (nil: it
//     completed). The meter stays where the count is: a phase ended by an
//     interrupt (the context ended, whatever err) or an error is never
//     shown as complete.
//
// On a terminal a phase with a total is a bar and one without a spinner
// with the count and the rate, redrawn at least every second; elsewhere
// (a log, a pipe) a plain line starts the phase and another follows every
// five seconds with the count and the rate, whether the count moved or
// not. Either way the phase ends with one summary line: what it
// did and how fast, or where it was interrupted or stopped. Quiet shows
// nothing.
//
// Two environment variables are test knobs, set only by tests of the
// command: PERCOLATOR_PROGRESS_EVERY (a duration) replaces the period of
// the plain lines, and PERCOLATOR_PROGRESS_HOLD=LABEL makes the start of
// the phase so labelled wait, once its first line is out, until the
// context ends, so that a test can interrupt that phase and no other.
package progress

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Unknown is the total of a phase whose length is not known when it
// starts.
const Unknown = -1

// defaultEvery is how often a progress line is printed when the output is
// not a terminal.
const defaultEvery = 5 * time.Second

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Meter shows the phases of a command, one at a time. Its methods are
// safe for concurrent use; Set and Detail outside a phase do nothing.
type Meter struct {
	ctx   context.Context // its end is an interrupt
	w     io.Writer
	tty   bool
	quiet bool
	every time.Duration // the plain lines' period
	hold  string        // the label whose Start waits for ctx (a test knob)
	now   func() time.Time
	// tick is a ticker of period d and its stop; a test's never fires
	// or fires when told.
	tick func(d time.Duration) (<-chan time.Time, func())

	mu struct {
		sync.Mutex
		ph *phase // nil between phases
	}
}

// phase is the one a Meter shows.
type phase struct {
	label     string
	total     int64 // or Unknown
	done      int64
	words     string // Detail's
	start     time.Time
	lastPlain time.Time
	bar       *progressbar.ProgressBar // on a terminal
	// stop ends the phase's heartbeat, which closes beaten once gone
	// (nil if none: a quiet Meter's).
	stop, beaten chan struct{}
}

// New is a Meter writing to w; ctx ending means the command was
// interrupted.
func New(ctx context.Context, w io.Writer, quiet bool) *Meter {
	m := &Meter{ctx: ctx, w: w, tty: isTerminal(w), quiet: quiet, every: defaultEvery, now: time.Now, tick: ticker}
	if d, err := time.ParseDuration(os.Getenv("PERCOLATOR_PROGRESS_EVERY")); err == nil && d > 0 {
		m.every = d
	}
	m.hold = os.Getenv("PERCOLATOR_PROGRESS_HOLD")
	return m
}

// Start begins a phase counting label, total of them (Unknown: not
// known), ending the one before it as complete if End was not called.
func (m *Meter) Start(label string, total int64) {
	if total < 0 {
		total = Unknown
	}
	m.mu.Lock()
	before := m.endLocked(nil)
	ph := &phase{label: label, total: total, start: m.now()}
	m.mu.ph = ph
	if !m.quiet {
		if m.tty {
			ph.bar = newBar(m.w, label, total)
		} else {
			ph.lastPlain = ph.start
			fmt.Fprintf(m.w, "%s: %s\n", label, ph.count())
		}
		ph.stop, ph.beaten = make(chan struct{}), make(chan struct{})
		go m.heartbeat(ph)
	}
	m.mu.Unlock()
	before.wait()
	if m.hold != "" && m.hold == label {
		<-m.ctx.Done()
	}
}

func ticker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// heartbeat shows ph every period (a second on a terminal) until it
// ends, so that a phase whose count stands still still shows its time
// and rate.
func (m *Meter) heartbeat(ph *phase) {
	defer close(ph.beaten)
	d := m.every
	if m.tty {
		d = time.Second
	}
	c, stop := m.tick(d)
	defer stop()
	for {
		select {
		case <-ph.stop:
			return
		case <-c:
			m.mu.Lock()
			if m.mu.ph == ph {
				m.showLocked(ph)
			}
			m.mu.Unlock()
		}
	}
}

// wait waits for the heartbeat of the phase, which ended, to be gone.
func (ph *phase) wait() {
	if ph != nil && ph.beaten != nil {
		<-ph.beaten
	}
}

func newBar(w io.Writer, label string, total int64) *progressbar.ProgressBar {
	opts := []progressbar.Option{progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(label),
		progressbar.OptionThrottle(100 * time.Millisecond)}
	if total == Unknown {
		// No change interval: the spinner would turn from a goroutine of
		// its own, writing to w outside the Meter's lock and outliving
		// the phase. It turns as the count moves. The count and the rate
		// are in its description (showLocked): the library would print
		// them as "N/-" and items per hour.
		opts = append(opts, progressbar.OptionSpinnerType(14), progressbar.OptionSetSpinnerChangeInterval(0))
	} else {
		opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetPredictTime(true))
	}
	b := progressbar.NewOptions64(total, opts...)
	_ = b.RenderBlank()
	return b
}

// Writer returns a writer to the Meter's own: each Write goes out under
// the Meter's lock, so the lines a command logs while a phase shows
// (its heartbeat writes from a goroutine of its own) never interleave
// with the Meter's, nor race them on a writer not safe for concurrent
// use (a test's buffer).
func (m *Meter) Writer() io.Writer { return meterWriter{m} }

type meterWriter struct{ m *Meter }

func (w meterWriter) Write(p []byte) (int, error) {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	return w.m.w.Write(p)
}

// Set reports done of the phase's count.
func (m *Meter) Set(done int64) { m.update(done, "", false) }

// Detail reports done of the phase's count, with words about the rest
// (what is left, another count) shown after it.
func (m *Meter) Detail(done int64, words string) { m.update(done, words, true) }

func (m *Meter) update(done int64, words string, setWords bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ph := m.mu.ph
	if ph == nil {
		return
	}
	ph.done = done
	if setWords {
		ph.words = words
	}
	if m.quiet {
		return
	}
	if m.tty && setWords && ph.total != Unknown {
		ph.bar.Describe(ph.describe()) // a spinner's, with its count, is showLocked's
	}
	m.showLocked(ph)
}

// showLocked shows ph as it is: the bar redrawn on a terminal (throttled
// by the bar), else a plain line if a period passed since the last one.
func (m *Meter) showLocked(ph *phase) {
	if m.tty {
		done := ph.done
		if ph.total != Unknown {
			done = min(done, ph.total) // a bar past its end would grow it
		} else {
			ph.bar.Describe(fmt.Sprintf("%s: %s, %s", ph.label, ph.count(), ph.rate(m.now())))
		}
		_ = ph.bar.Set64(done)
		return
	}
	if now := m.now(); now.Sub(ph.lastPlain) >= m.every {
		ph.lastPlain = now
		fmt.Fprintf(m.w, "%s: %s, %s\n", ph.label, ph.count(), ph.rate(now))
	}
}

// End ends the phase: once the context ended, it was interrupted (a
// phase may end early without an error when interrupted); else err nil
// means it completed, and any other error that it stopped.
func (m *Meter) End(err error) {
	m.mu.Lock()
	ph := m.endLocked(err)
	m.mu.Unlock()
	ph.wait()
}

// endLocked ends the phase (if any) and returns it, its heartbeat told
// to stop: the caller waits for it once it released the lock.
func (m *Meter) endLocked(err error) *phase {
	ph := m.mu.ph
	if ph == nil {
		return nil
	}
	m.mu.ph = nil
	if m.quiet {
		return ph
	}
	close(ph.stop)
	if ph.bar != nil {
		_ = ph.bar.Exit() // not Finish, which would fill the bar
		_ = ph.bar.Clear()
		fmt.Fprint(m.w, "\r")
	}
	fmt.Fprintln(m.w, ph.summary(m.now(), err, m.ctx.Err() != nil))
	return ph
}

// describe is the label with Detail's words, for a bar.
func (ph *phase) describe() string {
	if ph.words == "" {
		return ph.label
	}
	return ph.label + " (" + ph.words + ")"
}

// count is the count so far, of the total if known, with Detail's words.
func (ph *phase) count() string {
	s := fmt.Sprint(ph.done)
	if ph.total != Unknown {
		s += fmt.Sprintf(" of %d", ph.total)
	}
	if ph.words != "" {
		s += " (" + ph.words + ")"
	}
	return s
}

// rate is the count per second since the phase started.
func (ph *phase) rate(now time.Time) string {
	secs := now.Sub(ph.start).Seconds()
	if secs <= 0 {
		return "0/s"
	}
	return fmt.Sprintf("%.0f/s", float64(ph.done)/secs)
}

// summary is the phase's last line.
func (ph *phase) summary(now time.Time, err error, interrupted bool) string {
	el := now.Sub(ph.start).Round(time.Millisecond)
	switch {
	case interrupted:
		return fmt.Sprintf("%s: interrupted at %s after %s", ph.label, ph.count(), el)
	case err == nil:
		return fmt.Sprintf("%s: done, %s in %s, %s", ph.label, ph.count(), el, ph.rate(now))
	default:
		return fmt.Sprintf("%s: stopped at %s after %s", ph.label, ph.count(), el)
	}
}

// ListThenDo shows an operation that first lists its items, then works
// through them: a phase labelled listing, of unknown length, that ends
// counting the items once the operation knows how many there are, then
// (unless there are none) one labelled doing, of that many. It starts the
// first phase and returns the operation's progress callback (called with
// (0, total) once the items are listed, then with (done, total)); the
// caller ends the last phase with End.
func (m *Meter) ListThenDo(listing, doing string) func(done, total int) {
	m.Start(listing, Unknown)
	listed := false
	return func(done, total int) {
		if !listed {
			listed = true
			m.Set(int64(total))
			if total == 0 {
				return
			}
			m.Start(doing, int64(total))
		}
		m.Set(int64(done))
	}
}
