package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/seed-992972ee/percolator/docindex"
)

// Targets of the rerun figure (issue 7, C4): a rerun after editing 1% of
// the files costs at most 0.03x the first run, and one with no change at
// most the larger of 0.01x and 300 ms.
const (
	rerunEditTarget  = 0.03
	rerunNoneTarget  = 0.01
	rerunNoneMinimum = 300 * time.Millisecond
)

// benchRerun times the index job, in-process and end to end (open, scan,
// load, observers, count, close) as `percolator index` runs it, over a
// copy of the corpus whose files look a day old: the first run, a rerun
// after editing cfg.editFraction of the files, and a rerun with no change.
// A last run with --verify (not timed) checks the index.
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
	edited, err := editFiles(src, cfg.editFraction)
	if err != nil {
		return err
	}
	edit, err := timeIndex(ctx, cfg, db, src, fmt.Sprintf("after editing %d files", edited))
	if err != nil {
		return err
	}
	none, err := timeIndex(ctx, cfg, db, src, "no change")
	if err != nil {
		return err
	}
	if _, err := timeIndex(ctx, cfg, db, src, "verify", "--verify"); err != nil {
		return err
	}
	noneLimit := max(time.Duration(rerunNoneTarget*float64(first)), rerunNoneMinimum)
	fmt.Fprintf(w, "rerun:   %d files: first run %s; after editing %d files (%.1f%%) %s = %.4fx (target <= %.2fx: %s); no change %s = %.4fx (target <= max(%.2fx, %s) = %s: %s)\n",
		n, first.Round(time.Millisecond), edited, 100*float64(edited)/float64(n), edit.Round(time.Millisecond), edit.Seconds()/first.Seconds(),
		rerunEditTarget, cfg.targets.mark(edit.Seconds() <= rerunEditTarget*first.Seconds()),
		none.Round(time.Millisecond), none.Seconds()/first.Seconds(), rerunNoneTarget, rerunNoneMinimum, noneLimit.Round(time.Millisecond),
		cfg.targets.mark(none <= noneLimit))
	return nil
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
// (at least one), and returns how many.
func editFiles(dir string, fraction float64) (int, error) {
	files, _, err := docindex.ScanDir(dir)
	if err != nil {
		return 0, err
	}
	n := max(1, int(math.Round(fraction*float64(len(files)))))
	step := float64(len(files)) / float64(n)
	for i := range n {
		p := filepath.Join(dir, filepath.FromSlash(files[int(float64(i)*step)].Path))
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

// timeIndex runs the index job on src into db as the CLI does, and
// returns how long it took; its summary goes to the progress log.
func timeIndex(ctx context.Context, cfg benchConfig, db, src, what string, extra ...string) (time.Duration, error) {
	var out, errOut bytes.Buffer
	args := append([]string{"--dir", db, "--quiet"}, extra...)
	start := time.Now()
	err := runIndex(ctx, append(args, src), &out, &errOut)
	took := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("index (%s): %w\n%s%s", what, err, out.String(), errOut.String())
	}
	fmt.Fprintf(cfg.log, "rerun: %s in %s:\n%s", what, took.Round(time.Millisecond), out.String())
	return took, nil
}
