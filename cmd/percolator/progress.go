package main

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

// progress shows how far a phase got: a bar on a terminal, a plain line
// every plainEvery otherwise, nothing when quiet. Safe for concurrent use.
type progress struct {
	w     io.Writer
	tty   bool
	quiet bool

	mu        sync.Mutex
	bar       *progressbar.ProgressBar
	lastPlain time.Time
}

func newProgress(w io.Writer, quiet bool) *progress {
	return &progress{w: w, tty: isTerminal(w), quiet: quiet}
}

// Show reports done of total (total may grow) with a description.
func (p *progress) Show(desc string, done, total int64) {
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

// Begin announces a phase whose length is unknown: a spinner on a
// terminal, one plain line otherwise.
func (p *progress) Begin(desc string) {
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
func (p *progress) End() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
		p.bar = nil
	}
	p.lastPlain = time.Time{}
}
