package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/bench"
)

const corpus = "../../testdata/corpus"

func TestIndexCommand(t *testing.T) {
	t.Parallel() // its own directories only, and no bound on the machine's speed: another test may run meanwhile
	dir := t.TempDir()
	out, errOut, code := runCLI(t, "index", "--dir", dir, "--verify", "--quiet", corpus)
	if code != 0 || !strings.Contains(out, "equals a from-scratch batch build") {
		t.Fatalf("index: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "27 new") {
		t.Fatalf("first run output:\n%s", out)
	}
	out, _, code = runCLI(t, "index", "--dir", dir, "query", "Closure")
	if code != 0 || !strings.Contains(out, "The-Closure-API.html\tThe Closure API") {
		t.Fatalf("query: exit %d\n%s", code, out)
	}
	out, _, _ = runCLI(t, "index", "--dir", dir, "--dups")
	if !strings.Contains(out, "Simple-Example.html (canonical)\n  = mirror/Simple-Example.html") {
		t.Fatalf("dups:\n%s", out)
	}
	out, _, _ = runCLI(t, "index", "--dir", dir, "--quiet", corpus)
	if !strings.Contains(out, "27 unchanged") || !strings.Contains(out, "observers: 0 runs") {
		t.Fatalf("rerun without changes:\n%s", out)
	}
	out, _, code = runCLI(t, "status", "--dir", dir)
	if code != 0 || !regexp.MustCompile(`document +content +27 +27 +0 +0 +0 +0\n`).MatchString(out) || !regexp.MustCompile(`content +0 +-\n`).MatchString(out) ||
		!regexp.MustCompile(`scanners: [1-9][0-9]* scans found [1-9][0-9]* notified rows, visiting [1-9][0-9]* keys`).MatchString(out) {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	out, _, code = runCLI(t, "notifications", "--dir", dir)
	if code != 0 || !strings.Contains(out, "0 pending") {
		t.Fatalf("notifications: exit %d\n%s", code, out)
	}
	out, _, code = runCLI(t, "notifications", "--dir", dir, "--quarantined")
	if code != 0 || !strings.Contains(out, "0 quarantined") {
		t.Fatalf("notifications --quarantined: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{
		{"index", "--dir", dir},
		{"index", "--dir", dir, "query"},
		{"index", "--dir", dir, "--scanners", "0", corpus},
		{"index", corpus},
		{"index", "--dir", dir, filepath.Join(dir, "missing")},
	} {
		if _, _, code := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// TestIndexSelection: index says what it skipped, by type; --include
// replaces the default set (and --verify checks the index of what it
// chose), --exclude leaves files out, and a bad glob is a usage error
// that creates nothing.
func TestIndexSelection(t *testing.T) {
	src := writeCorpus(t, map[string]string{"a.md": "alpha", "notes/b.md": "beta", "main.go": "package main // gopher",
		"lib/x.go": "package lib", "Makefile": "all:", "LICENSE": "MIT"})
	out, _ := mustRun(t, 0, "index", "--dir", t.TempDir(), "--quiet", src)
	if !strings.Contains(out, "corpus:    2 files") || !strings.Contains(out, "skipped:   4 files by type: (none) 2, .go 2\n") {
		t.Fatalf("default set:\n%s", out)
	}
	dir := t.TempDir()
	out, _ = mustRun(t, 0, "index", "--dir", dir, "--quiet", "--verify", "--include", "*.go", src)
	if !strings.Contains(out, "corpus:    2 files") || !strings.Contains(out, "skipped:   4 files by type: (none) 2, .md 2\n") ||
		!strings.Contains(out, "equals a from-scratch batch build") {
		t.Fatalf("--include '*.go':\n%s", out)
	}
	if out, _ = mustRun(t, 0, "index", "--dir", dir, "query", "gopher"); !strings.HasPrefix(out, "main.go\t") {
		t.Fatalf("query gopher after --include '*.go':\n%s", out)
	}
	out, _ = mustRun(t, 0, "index", "--dir", t.TempDir(), "--json", "--include", "*.go", "--include", "Makefile", "--exclude", "lib/*", src)
	var sum struct {
		Files   int            `json:"files"`
		Skipped map[string]int `json:"skipped_by_type"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Files != 2 || !maps.Equal(sum.Skipped, map[string]int{".go": 1, ".md": 2, "": 1}) {
		t.Fatalf("--include '*.go' --include Makefile --exclude 'lib/*' --json: %+v, %v\n%s", sum, err, out)
	}
	for _, flags := range [][]string{{"--include", "["}, {"--exclude", "*.[ch"}, {"--include", "*.go", "--exclude", ""}} {
		fresh := filepath.Join(t.TempDir(), "store")
		_, errOut := mustRun(t, 2, append(append([]string{"index", "--dir", fresh}, flags...), src)...)
		if !strings.Contains(errOut, "not a glob") {
			t.Errorf("%q: %s", flags, errOut)
		}
		if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%q: a refused run made %s: %v", flags, fresh, err)
		}
	}
}

// TestIndexKill kills `index` with SIGKILL while its observers run, then
// runs it again: no notification is lost and the index equals a batch
// build of the corpus.
func TestIndexKill(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocess soak")
	}
	src := bigCorpus(t, 300)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	killed := 0
	for round := range 4 {
		if round == 2 { // change the corpus between kills
			for i := range 10 {
				for _, name := range []string{"Types.html", "Memory-Usage.html"} {
					p := filepath.Join(src, fmt.Sprintf("copy%03d", i), name)
					if err := os.WriteFile(p, []byte(fmt.Sprintf("<title>edited %d</title> round%d", i, round)), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Remove(filepath.Join(src, fmt.Sprintf("copy%03d", i), "Closure-Example.html")); err != nil {
					t.Fatal(err)
				}
			}
		}
		cmd := command("index", "--dir", dir, "--quiet", "--scanners", "2", src)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(100+rng.IntN(900)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err == nil {
			killed++
		}
		_ = cmd.Wait()
		t.Logf("round %d: killed after:\n%s", round, out.String())
	}
	out, errOut, code := runCLI(t, "index", "--dir", dir, "--verify", "--quiet", src)
	if code != 0 {
		t.Fatalf("after %d kills: exit %d\n%s%s", killed, code, out, errOut)
	}
	t.Logf("after %d kills:\n%s", killed, out)
}

// bigCorpus copies the test corpus into n files with small edits
// (bench.CopyCorpus, which the observers benchmark uses too).
func bigCorpus(t *testing.T, n int) string {
	t.Helper()
	src := t.TempDir()
	if err := bench.CopyCorpus(corpus, src, n); err != nil {
		t.Fatal(err)
	}
	return src
}

// TestBenchObservers runs the notify and observers figures at a small
// scale: they must complete, check themselves and print their ratios.
func TestBenchObservers(t *testing.T) {
	t.Parallel() // it checks what the figures print, not how fast they are: another test may run meanwhile
	if testing.Short() {
		t.Skip("benchmark smoke test")
	}
	dir := t.TempDir()
	// The big table is just above the workers' CompactAfter (1,024
	// cleared notifications): about the smallest whose processing
	// compacts the notify keyspace, as at full scale.
	out, errOut, code := runCLI(t, "bench", "--dir", dir, "--only", "notify", "--notify-cells", "1100", "--notify-dirty", "50", "--rounds", "1")
	checkBenchExit(t, out, errOut, code)
	if !regexp.MustCompile(`finding 50 dirty cells: [0-9,]+ keys visited in .* among 50 cells; [0-9,]+ keys in .* among 1100 processed cells: ratio [0-9.]+x`).MatchString(out) {
		t.Fatalf("bench notify: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "bench", "--dir", dir, "--only", "observers", "--corpus", corpus, "--index-files", "30")
	if code != 0 || strings.Count(out, "the batch build (no target)\n") != 4 || !strings.Contains(out, "batch build of 30 files") {
		t.Fatalf("bench observers: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "bench", "--dir", dir, "--only", "rerun", "--index-files", "50")
	checkBenchExit(t, out, errOut, code)
	if !regexp.MustCompile(`after editing 1 files \(2.0%, second time\): .* = [0-9.]+x the first run \(target <= 0.03x: (met|MISSED)\)`).MatchString(out) ||
		!strings.Contains(errOut, "equals a from-scratch batch build") && !strings.Contains(errOut, "rerun: verify in") {
		t.Fatalf("bench rerun: exit %d\n%s%s", code, out, errOut)
	}
	for _, args := range [][]string{
		{"bench", "--dir", dir, "--only", "notify", "--notify-cells", "10", "--notify-dirty", "20"},
		{"bench", "--dir", dir, "--only", "observers", "--index-files", "0"},
		{"bench", "--dir", dir, "--only", "nope"},
		{"bench", "--dir", dir, "--only", "observers", "--corpus", filepath.Join(dir, "missing")},
	} {
		if _, _, code := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
