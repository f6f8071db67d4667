// Package progress shows how far a long phase of a percolator command
// got: a bar on a terminal, a plain line every two seconds otherwise
// (a log, a pipe), nothing when quiet.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// plainEvery is how often a progress line is printed when the output is
// not a terminal.
const plainEvery = 2 * time.Second

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Meter shows how far a phase got: a bar on a terminal, a plain line
// every plainEvery otherwise, nothing when quiet. Safe for concurrent use.
type Meter struct {
	w     io.Writer
	tty   bool
	quiet bool

	mu        sync.Mutex
	bar       *progressbar.ProgressBar
	lastPlain time.Time
}

// New is a Meter writing to w.
func New(w io.Writer, quiet bool) *Meter {
	return &Meter{w: w, tty: isTerminal(w), quiet: quiet}
}

// Show reports done of total (total may grow) with a description.
func (p *Meter) Show(desc string, done, total int64) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		if time.Since(p.lastPlain) >= plainEvery {
			p.lastPlain = time.Now()
			fmt.Fprintf(p.w, "%s: %d/%d\n", desc, done, total)
		}
		return
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions64(max(total, 1), progressbar.OptionSetWriter(p.w), progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetPredictTime(true))
	}
	p.bar.Describe(desc)
	if total > p.bar.GetMax64() {
		p.bar.ChangeMax64(total)
	}
	_ = p.bar.Set64(done)
}

// Count reports done items of a phase whose length is unknown (a
// description, then the count): a spinner with the count on a terminal,
// a plain line every plainEvery otherwise.
func (p *Meter) Count(desc string, done int64) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		if time.Since(p.lastPlain) >= plainEvery {
			p.lastPlain = time.Now()
			fmt.Fprintf(p.w, "%s: %d\n", desc, done)
		}
		return
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions64(-1, progressbar.OptionSetWriter(p.w), progressbar.OptionShowCount(),
			progressbar.OptionSpinnerType(14), progressbar.OptionThrottle(100*time.Millisecond))
	}
	p.bar.Describe(desc)
	_ = p.bar.Set64(done)
}

// Begin announces a phase whose length is unknown: a spinner on a
// terminal, one plain line otherwise.
func (p *Meter) Begin(desc string) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		fmt.Fprintf(p.w, "%s...\n", desc)
		return
	}
	p.bar = progressbar.NewOptions64(-1, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription(desc),
		progressbar.OptionSpinnerType(14), progressbar.OptionThrottle(100*time.Millisecond))
	_ = p.bar.Add(1)
}

// End closes the phase's bar.
func (p *Meter) End() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
		p.bar = nil
	}
	p.lastPlain = time.Time{}
}
