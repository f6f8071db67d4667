package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/seed-992972ee/percolator/docindex"
)

// Targets of the rerun figure: a rerun after editing 1% of
// the files costs at most 0.03x the first run, and one with no change at
// most the larger of 0.01x and 300 ms.
const (
	rerunEditTarget  = 0.03
	rerunNoneTarget  = 0.01
	rerunNoneMinimum = 300 * time.Millisecond
)

// benchRerun times the index job, end to end in a process of its own
// (start, open, scan, load, observers, count, close), over a copy of the
// corpus whose files look a day old: the first run, a rerun after editing
// cfg.editFraction of the files, a rerun with no change, and a second
// rerun after editing as many other files (the first rerun also pays for
// what the first run's store left to do: replaying its log). A last run
// with --verify (not timed) checks the index.
func benchRerun(ctx context.Context, cfg benchConfig, w io.Writer) error {
	src := filepath.Join(cfg.dir, "rerun-corpus")
	db := filepath.Join(cfg.dir, "rerun-db")
	n, err := rerunCorpus(cfg, src)
	if err != nil {
		return err
	}
	first, err := timeIndex(ctx, cfg, db, src, "first run")
	if err != nil {
		return err
	}
	var edits [2]time.Duration
	var none time.Duration
	edited := 0
	for round := range 2 {
		if edited, err = editFiles(src, cfg.editFraction, round); err != nil {
			return err
		}
		if edits[round], err = timeIndex(ctx, cfg, db, src, fmt.Sprintf("after editing %d files", edited)); err != nil {
			return err
		}
		if round == 0 {
			if none, err = timeIndex(ctx, cfg, db, src, "no change"); err != nil {
				return err
			}
		}
	}
	if _, err := timeIndex(ctx, cfg, db, src, "verify", "--verify"); err != nil {
		return err
	}
	printRerun(w, cfg, n, edited, first, edits, none)
	return nil
}

func printRerun(w io.Writer, cfg benchConfig, n, edited int, first time.Duration, edits [2]time.Duration, none time.Duration) {
	ratio := func(d time.Duration) float64 { return d.Seconds() / first.Seconds() }
	noneLimit := max(time.Duration(rerunNoneTarget*float64(first)), rerunNoneMinimum)
	fmt.Fprintf(w, "rerun:   %d files, first run %s\n", n, ms(first))
	for i, d := range edits {
		fmt.Fprintf(w, "rerun:   after editing %d files (%.1f%%, %s time): %s = %.4fx the first run (target <= %.2fx: %s)\n",
			edited, 100*float64(edited)/float64(n), []string{"first", "second"}[i], ms(d), ratio(d), rerunEditTarget, cfg.targets.mark(ratio(d) <= rerunEditTarget))
	}
	fmt.Fprintf(w, "rerun:   no change: %s = %.4fx the first run (target <= max(%.2fx, %s) = %s: %s)\n",
		ms(none), ratio(none), rerunNoneTarget, rerunNoneMinimum, ms(noneLimit), cfg.targets.mark(none <= noneLimit))
}

// rerunCorpus copies a named corpus as is, or the default one to
// cfg.indexFiles files, into dst, with modification times a day old (as
// an existing corpus has), and returns the number of files.
func rerunCorpus(cfg benchConfig, dst string) (int, error) {
	var err error
	if cfg.corpusGiven {
		err = copyTree(cfg.corpus, dst)
	} else {
		err = copyCorpus(cfg.corpus, dst, cfg.indexFiles)
	}
	if err != nil {
		return 0, err
	}
	files, _, err := docindex.ScanDir(dst)
	if err != nil {
		return 0, err
	}
	day := time.Now().Add(-24 * time.Hour)
	for _, f := range files {
		if err := os.Chtimes(filepath.Join(dst, filepath.FromSlash(f.Path)), day, day); err != nil {
			return 0, err
		}
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("no indexable files in %s", cfg.corpus)
	}
	return len(files), nil
}

// copyTree copies the corpus files under src (those ScanDir lists) to dst.
func copyTree(src, dst string) error {
	files, _, err := docindex.ScanDir(src)
	if err != nil {
		return err
	}
	for _, f := range files {
		b, err := f.Read()
		if err != nil {
			return err
		}
		p := filepath.Join(dst, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// editFiles appends a word to an evenly spread fraction of the files
// (at least one), a different set each round, and returns how many.
func editFiles(dir string, fraction float64, round int) (int, error) {
	files, _, err := docindex.ScanDir(dir)
	if err != nil {
		return 0, err
	}
	n := max(1, int(math.Round(fraction*float64(len(files)))))
	step := float64(len(files)) / float64(n)
	for i := range n {
		p := filepath.Join(dir, filepath.FromSlash(files[(int(float64(i)*step)+round)%len(files)].Path))
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return 0, err
		}
		_, werr := fmt.Fprintf(f, " benchedit%d ", i)
		if err := f.Close(); werr != nil || err != nil {
			return 0, fmt.Errorf("editing %s: %v %v", p, werr, err)
		}
	}
	return n, nil
}

// timeIndex runs `percolator index` on src into db in a process of its
// own, as a user does, and returns how long it took; where the time went
// goes to the progress log. (PERCOLATOR_AS_MAIN makes the test binary run
// as the command.)
func timeIndex(ctx context.Context, cfg benchConfig, db, src, what string, extra ...string) (time.Duration, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	args := append([]string{"index", "--dir", db, "--quiet", "--json"}, extra...)
	cmd := exec.CommandContext(ctx, exe, append(args, src)...)
	cmd.Env = append(os.Environ(), "PERCOLATOR_AS_MAIN=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("index (%s): %w\n%s%s", what, err, out.String(), errOut.String())
	}
	var s indexSummary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		return 0, fmt.Errorf("index (%s): summary: %w", what, err)
	}
	rest := took - s.OpenTime - s.ScanTime - s.LoadTime - s.RunTime - s.CountTime
	fmt.Fprintf(cfg.log, "rerun: %s in %s: %d new, %d changed, %d read, %d observer runs; open %s, list %s, load %s, observers %s, count %s, rest (start, close) %s\n",
		what, took.Round(time.Millisecond), s.New, s.Changed, s.Read, sumRuns(s.Runs), ms(s.OpenTime), ms(s.ScanTime), ms(s.LoadTime), ms(s.RunTime), ms(s.CountTime), ms(rest))
	return took, nil
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func sumRuns(runs map[string]int64) int64 {
	var n int64
	for _, r := range runs {
		n += r
	}
	return n
}
