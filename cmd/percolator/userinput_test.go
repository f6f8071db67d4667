package main

// What a user gives the commands and meets in their output, as the user
// meets it: each test drives the command line only.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeCorpus writes files (path -> content) under a new directory, with
// modification times a day old, and returns it.
func writeCorpus(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeCorpusInto(t, dir, files)
	return dir
}

// writeCorpusInto writes files under dir, a day old.
func writeCorpusInto(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	day := time.Now().Add(-24 * time.Hour)
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(full, day, day); err != nil {
			t.Fatal(err)
		}
	}
}

func mustRun(t *testing.T, wantCode int, args ...string) (string, string) {
	t.Helper()
	out, errOut, code := runCLI(t, args...)
	if code != wantCode {
		t.Fatalf("percolator %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, wantCode, out, errOut)
	}
	return out, errOut
}

// C1: a Latin-1 title, a caf%E9.html link and a Latin-1 file name are
// indexed as the batch build indexes them.
func TestCLIIndexNonUTF8(t *testing.T) {
	src := writeCorpus(t, map[string]string{
		"menu.html": "<title>Caf\xe9 menu</title><p>cr\xe8me br\xfbl\xe9e</p><a href=\"caf%E9.html\">caf\xe9</a>",
		"notes.txt": "Gr\xfc\xdfe\nnotes espresso\n",
	})
	dir := t.TempDir()
	out, _ := mustRun(t, 0, "index", "--dir", dir, "--verify", "--quiet", src)
	if !strings.Contains(out, "equals a from-scratch batch build") || !strings.Contains(out, "2 new") {
		t.Fatalf("index:\n%s", out)
	}
	writeCorpusInto(t, src, map[string]string{"caf\xe9.html": "<title>Latin-1 name</title><p>espresso</p><a href=\"menu.html\">menu</a>"})
	out, _ = mustRun(t, 0, "index", "--dir", dir, "--verify", "--quiet", src)
	if !strings.Contains(out, "equals a from-scratch batch build") || !strings.Contains(out, "1 new") {
		t.Fatalf("index with a Latin-1 file name:\n%s", out)
	}
	out, _ = mustRun(t, 0, "index", "--dir", dir, "query", "espresso")
	if !strings.Contains(out, `"caf\xe9.html"`) || !strings.Contains(out, "notes.txt\tGr\\xfc\\xdfe") {
		t.Fatalf("query (non-UTF-8 printed escaped):\n%s", out)
	}
}

// C2: a link target with %00 and links of 4 KiB and more neither break
// the link rows nor quarantine the document.
func TestCLIIndexHostileLinks(t *testing.T) {
	long := strings.Repeat("x", 5000) + ".html"
	src := writeCorpus(t, map[string]string{
		"a.html": "<title>a</title><a href=\"x.html%00y.html\">nul</a><a href=\"" + long + "\">long</a><a href=\"b.html\">b</a><p>alpha</p>",
		"b.html": "<title>b</title><a href=\"x.html%00y.html\">nul</a><p>beta</p>",
	})
	dir := t.TempDir()
	out, _ := mustRun(t, 0, "index", "--dir", dir, "--verify", "--quiet", src)
	if strings.Contains(out, "quarantined") || !strings.Contains(out, "2 documents") {
		t.Fatalf("index:\n%s", out)
	}
	out, _ = mustRun(t, 0, "index", "--dir", dir, "query", "alpha")
	if !strings.Contains(out, "a.html\ta") {
		t.Fatalf("a.html was dropped:\n%s", out)
	}
}

// C3: a file over the value limit and a non-UTF-8 file name do not stop
// the run: the rest is indexed, the bad file reported (path, reason) in
// the summary and in status, and --strict makes it exit 1.
func TestCLIIndexBadFiles(t *testing.T) {
	src := writeCorpus(t, map[string]string{
		"a.html":      "<title>a</title><p>alpha</p>",
		"caf\xe9.txt": "latin-1 name\nalpha\n",
		"big.txt":     strings.Repeat("big ", (10<<20)/4+1),
	})
	dir := t.TempDir()
	out, _ := mustRun(t, 0, "index", "--dir", dir, "--verify", "--quiet", src)
	if !strings.Contains(out, "bad:       1 files skipped") || !strings.Contains(out, "big.txt: file of 10485764 bytes exceeds the limit of 10485760 bytes") ||
		!strings.Contains(out, "2 documents") || !strings.Contains(out, "equals a from-scratch batch build") {
		t.Fatalf("index with a bad file:\n%s", out)
	}
	out, _ = mustRun(t, 0, "status", "--dir", dir)
	if !strings.Contains(out, "bad files: 1 skipped") || !strings.Contains(out, "big.txt: file of 10485764 bytes") {
		t.Fatalf("status does not list the bad file:\n%s", out)
	}
	_, errOut := mustRun(t, 1, "index", "--dir", dir, "--strict", "--quiet", src)
	if !strings.Contains(errOut, "1 files skipped as bad (--strict)") {
		t.Fatalf("--strict: %s", errOut)
	}
}

// C4: a rerun reads only the files whose stat changed, and --rehash reads
// them all; the summary counts are kept without exporting the index.
func TestCLIIndexRerunReadsChanges(t *testing.T) {
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("f%02d.html", i)] = fmt.Sprintf("<title>f%d</title> word%d common", i, i)
	}
	src := writeCorpus(t, files)
	dir := t.TempDir()
	mustRun(t, 0, "index", "--dir", dir, "--quiet", src)
	out, _ := mustRun(t, 0, "index", "--dir", dir, "--quiet", src)
	if !strings.Contains(out, "20 unchanged, 0 read") || !strings.Contains(out, "index:     20 documents, 41 terms, 0 duplicate clusters") {
		t.Fatalf("rerun:\n%s", out)
	}
	if err := os.WriteFile(filepath.Join(src, "f03.html"), []byte("<title>f3</title> word3 edited common"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = mustRun(t, 0, "index", "--dir", dir, "--quiet", "--verify", src)
	if !strings.Contains(out, "1 changed, 0 deleted, 19 unchanged, 1 read") || !strings.Contains(out, "20 documents, 42 terms") {
		t.Fatalf("rerun after one edit:\n%s", out)
	}
	out, _ = mustRun(t, 0, "index", "--dir", dir, "--quiet", "--rehash", src)
	if !strings.Contains(out, "20 unchanged, 20 read") {
		t.Fatalf("--rehash:\n%s", out)
	}
}

// C5: an empty (or wrong) SRC_DIR does not wipe the index.
func TestCLIIndexEmptySrcKeepsIndex(t *testing.T) {
	t.Parallel() // its own directories only, and no bound on the machine's speed: another test may run meanwhile
	dir := t.TempDir()
	if out, _ := mustRun(t, 0, "index", "--dir", dir, "--quiet", t.TempDir()); !strings.Contains(out, "0 files") || !strings.Contains(out, "0 documents") {
		t.Fatalf("an empty SRC_DIR into a new store:\n%s", out)
	}
	mustRun(t, 0, "index", "--dir", dir, "--quiet", corpus)
	_, errOut := mustRun(t, 1, "index", "--dir", dir, "--quiet", t.TempDir())
	if !strings.Contains(errOut, "refusing to delete more than half") || !strings.Contains(errOut, "--allow-deletes") {
		t.Fatalf("empty SRC_DIR: %s", errOut)
	}
	out, _ := mustRun(t, 0, "index", "--dir", dir, "query", "closure")
	if !strings.Contains(out, "The-Closure-API.html") {
		t.Fatalf("the index lost its documents:\n%s", out)
	}
	out, _ = mustRun(t, 0, "index", "--dir", dir, "--quiet", "--allow-deletes", t.TempDir())
	if !strings.Contains(out, "27 deleted") || !strings.Contains(out, "0 documents") {
		t.Fatalf("--allow-deletes:\n%s", out)
	}
}

// D1: bench never deletes a directory it did not make.
func TestCLIBenchKeepsForeignDir(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "thesis.tex")
	if err := os.WriteFile(mine, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, "bench", "--dir", dir, "--only", "oracle", "--duration", "50ms")
	if b, err := os.ReadFile(mine); err != nil || string(b) != "precious" {
		t.Fatalf("bench deleted the user's file: %v (exit %d, %s)", err, code, errOut)
	}
	if code != 2 || !strings.Contains(errOut, "not made by bench") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// A new directory is made, marked and reused; a default one is temporary.
	fresh := filepath.Join(t.TempDir(), "new")
	for range 2 {
		out, errOut, code := runCLI(t, "bench", "--dir", fresh, "--only", "oracle", "--duration", "50ms")
		checkBenchExit(t, out, errOut, code)
		if !regexp.MustCompile(`oracle: .*\(target >= 2,000,000: (met|MISSED)\)`).MatchString(out) {
			t.Fatalf("bench output:\n%s", out)
		}
	}
	out, errOut, code := runCLI(t, "bench", "--only", "oracle", "--duration", "50ms")
	checkBenchExit(t, out, errOut, code)
	tmp := regexp.MustCompile(`scratch directory (\S+)`).FindStringSubmatch(errOut)
	if tmp == nil {
		t.Fatalf("no scratch directory named: %s", errOut)
	}
	if _, err := os.Stat(tmp[1]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary scratch directory %s left behind: %v", tmp[1], err)
	}
}

// D2: read commands on a directory without a store fail and create
// nothing.
func TestCLIReadCommandsDoNotCreate(t *testing.T) {
	for _, empty := range []bool{true, false} {
		dir := t.TempDir()
		if !empty {
			dir = filepath.Join(dir, "missing")
		}
		for _, args := range [][]string{
			{"status"}, {"dump"}, {"locks"}, {"notifications"}, {"notifications", "--quarantined"},
			{"index", "query", "x"}, {"index", "--dups"},
		} {
			args = append([]string{args[0], "--dir", dir}, args[1:]...)
			_, errOut, code := runCLI(t, args...)
			if code != 1 || !strings.Contains(errOut, "no store at "+dir) {
				t.Errorf("%q: exit %d, %q; want 1 and \"no store at %s\"", args, code, errOut, dir)
			}
			entries, err := os.ReadDir(dir)
			if empty && (err != nil || len(entries) != 0) || !empty && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%q created something in %s: %v %v", args, dir, entries, err)
			}
		}
	}
}

// D3: status works while index runs, from what index publishes.
func TestCLIStatusWhileIndexRuns(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocess")
	}
	src, dir := bigCorpus(t, 300), t.TempDir()
	cmd, out := startIndex(t, dir, src, "published a running status")
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	// Stopped, it holds the store and stays alive: status must answer from
	// what it published.
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	st, errOut, code := runCLI(t, "status", "--dir", dir)
	_ = cmd.Process.Signal(syscall.SIGCONT)
	if code != 0 || !strings.Contains(st, fmt.Sprintf("in use by pid %d (percolator index --dir %s", pid, dir)) || !strings.Contains(st, "phase: ") {
		t.Fatalf("status while index runs: exit %d\n%s%s", code, st, errOut)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("index: %v\n%s", err, out.String())
	}
	st, _ = mustRun(t, 0, "status", "--dir", dir)
	if !strings.Contains(st, fmt.Sprintf("last run: percolator index --dir %s", dir)) || !strings.Contains(st, "finished") {
		t.Fatalf("status after index:\n%s", st)
	}
}

// waitPublished waits until the process pid published a status that is
// not final, and reports whether it did before finishing.
func waitPublished(t *testing.T, dir string, pid int) bool {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(filepath.Join(dir, "status.json"))
		var p struct {
			PID      int  `json:"pid"`
			Finished bool `json:"finished"`
		}
		if err == nil && json.Unmarshal(b, &p) == nil && p.PID == pid {
			return !p.Finished
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("index never published its status")
	return false
}

// D4: help, version and the exit codes.
func TestCLIHelpVersionExitCodes(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		out, _ := mustRun(t, 0, args...)
		if !strings.Contains(out, "usage: percolator <command>") || !strings.Contains(out, "index") {
			t.Errorf("%q: %s", args, out)
		}
	}
	mustRun(t, 0, "help", "index")
	mustRun(t, 0, "index", "-h")
	if out, _ := mustRun(t, 0, "version"); !strings.HasPrefix(out, "percolator ") {
		t.Errorf("version: %q", out)
	}
	mustRun(t, 2, "help", "nope")
	mustRun(t, 2, "index", "--dir", t.TempDir())  // no SRC_DIR
	mustRun(t, 1, "status", "--dir", t.TempDir()) // a run-time failure: no store
}

// D4: SIGINT exits 130, and the index it interrupted is consistent.
func TestCLIInterrupt(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocess")
	}
	src, dir := bigCorpus(t, 300), t.TempDir()
	cmd, out := startIndex(t, dir, src, "could be interrupted")
	_ = cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 || !strings.Contains(out.String(), "percolator index: interrupted\n") {
		t.Fatalf("index after SIGINT: %v, want exit 130 and 'interrupted'\n%s", err, out.String())
	}
	mustRun(t, 0, "index", "--dir", dir, "--quiet", "--verify", src)
}

// D6: dump takes a prefix, cuts long values, decodes the index's columns;
// numeric flags are checked; lists print as JSON.
func TestCLIDumpAndJSON(t *testing.T) {
	t.Parallel() // its own directories only, and no bound on the machine's speed: another test may run meanwhile
	dir := t.TempDir()
	mustRun(t, 0, "index", "--dir", dir, "--quiet", corpus)
	out, _ := mustRun(t, 0, "dump", "--dir", dir, "--prefix", "doc/", "--limit", "2")
	if strings.Count(out, "COLUMN ") != 2 || !strings.Contains(out, "doc/Arrays-Unions-Enums.html\n") || !strings.Contains(out, "; --full)") ||
		strings.Contains(out, "hash/") || !strings.Contains(out, `doc title="Arrays Unions Enums`) {
		t.Fatalf("dump --prefix doc/ --limit 2:\n%s", out)
	}
	full, _ := mustRun(t, 0, "dump", "--dir", dir, "--row", "doc/Arrays-Unions-Enums.html", "--full")
	if len(full) <= len(out)/2 || strings.Contains(full, "--full)") {
		t.Fatalf("dump --full still cuts values:\n%.2000s", full)
	}
	for _, args := range [][]string{{"dump", "--dir", dir, "--limit", "0"}, {"notifications", "--dir", dir, "--limit", "-1"}, {"index", "--dir", dir, "--scanners", "0", corpus}} {
		mustRun(t, 2, args...)
	}
	for _, args := range [][]string{
		{"status", "--dir", dir, "--json"}, {"notifications", "--dir", dir, "--json"}, {"locks", "--dir", dir, "--json"},
		{"index", "--dir", dir, "--json", "query", "closure"}, {"index", "--dir", dir, "--json", "--dups"},
		{"dump", "--dir", dir, "--json", "--prefix", "hash/"}, {"index", "--dir", dir, "--json", corpus},
	} {
		out, _ := mustRun(t, 0, args...)
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Errorf("%q: not JSON (%v):\n%s", args, err, out)
		}
	}
}

// D6: bench finds its corpus from any working directory.
func TestCLIBenchFindsCorpus(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocess")
	}
	cmd := command("bench", "--only", "observers", "--index-files", "30")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "batch build of 30 files") {
		t.Fatalf("bench from %s: %v\n%s", cmd.Dir, err, out)
	}
}

// startIndex starts `index` on src in the background and returns once it
// publishes a running status (skipping the test, saying it finished
// before it what, if it ends first). out collects its output.
func startIndex(t *testing.T, dir, src, what string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	cmd := command("index", "--dir", dir, "--quiet", "--scanners", "1", src)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitPublished(t, dir, cmd.Process.Pid) {
		_ = cmd.Wait()
		t.Skipf("index finished before it %s:\n%s", what, out.String())
	}
	return cmd, out
}

// B4 through the CLI: status shows each observer's self-triggers, and
// unobserve unregisters an observer (unknown names and missing arguments
// are refused); the index job registers its observers again when it runs.
func TestUnobserveCLI(t *testing.T) {
	t.Parallel() // its own directories only, and no bound on the machine's speed: another test may run meanwhile
	dir := t.TempDir()
	mustRun(t, 0, "index", "--dir", dir, "--quiet", corpus)
	st, _ := mustRun(t, 0, "status", "--dir", dir)
	if !strings.Contains(st, "SELF-TRIGGERS") || !strings.Contains(st, "\nterms ") {
		t.Fatalf("status:\n%s", st)
	}
	mustRun(t, 2, "unobserve", "--dir", dir)
	mustRun(t, 1, "unobserve", "--dir", dir, "nosuch")
	out, _ := mustRun(t, 0, "unobserve", "--dir", dir, "terms")
	if !strings.Contains(out, "unregistered observer terms") {
		t.Fatalf("unobserve: %q", out)
	}
	if st, _ = mustRun(t, 0, "status", "--dir", dir); strings.Contains(st, "\nterms ") {
		t.Fatalf("status still lists terms after unobserve:\n%s", st)
	}
	mustRun(t, 0, "index", "--dir", dir, "--quiet", "--verify", corpus)
}
