package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The runnable-docs test: the shell examples of README.md and docs/*.md
// are run, so that what the documentation tells a reader to type works.
// The convention, which docs/testing.md states for writers:
//
//  1. Every fenced block has an info string (sh, console, go, text, ...),
//     so that no command hides in an unmarked block.
//  2. A ```sh or ```bash block is a shell script; a ```console block is a
//     transcript whose lines starting with "$ " are the commands (the
//     other lines are output, shown, not compared).
//  3. The blocks of one file run in order, in one `bash -e -o pipefail`
//     script, in a fresh directory laid out like a clone's root (it holds
//     a copy of testdata/), with `percolator` built from this tree first
//     on PATH. A command ending in `&` runs in the background; whatever
//     is still running when the file's last block ends is stopped
//     (SIGTERM, then SIGKILL).
//  4. A block preceded by `<!-- not-run: REASON -->` (on the last
//     non-blank line before the fence) is not run; the reason is
//     required.
//
// The `percolator` on PATH is this test binary behind a two-line wrapper
// (TestMain runs main when PERCOLATOR_AS_MAIN=1): it is the command built
// from this tree, with the race detector, and the test builds nothing
// more.

// docBlock is one fenced block of a Markdown file.
type docBlock struct {
	line   int    // line of the opening fence, 1-based
	lang   string // the info string's first word
	body   string
	notRun string // the not-run marker's reason; "" if the block runs
	marked bool   // a not-run marker precedes the block
}

// parseDocBlocks returns the fenced blocks of a Markdown document.
func parseDocBlocks(text string) ([]docBlock, error) {
	var blocks []docBlock
	lines := strings.Split(text, "\n")
	lastNonBlank := ""
	for i := 0; i < len(lines); i++ {
		ln := lines[i]
		trimmed := strings.TrimSpace(ln)
		if !strings.HasPrefix(trimmed, "```") {
			if trimmed != "" {
				lastNonBlank = trimmed
			}
			continue
		}
		fence := trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, "`"))]
		b := docBlock{line: i + 1}
		if f := strings.Fields(strings.TrimPrefix(trimmed, fence)); len(f) > 0 {
			b.lang = f[0]
		}
		if reason, ok := strings.CutPrefix(lastNonBlank, "<!-- not-run:"); ok {
			b.marked = true
			b.notRun = strings.TrimSpace(strings.TrimSuffix(reason, "-->"))
		}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != fence; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: the block never ends", b.line)
		}
		b.body = strings.Join(body, "\n")
		blocks = append(blocks, b)
		lastNonBlank = fence
	}
	return blocks, nil
}

// script is the block's shell commands: the body of a sh block, the "$ "
// lines of a console block.
func (b docBlock) script() string {
	if b.lang != "console" {
		return b.body
	}
	var cmds []string
	for _, ln := range strings.Split(b.body, "\n") {
		if c, ok := strings.CutPrefix(ln, "$ "); ok {
			cmds = append(cmds, c)
		}
	}
	return strings.Join(cmds, "\n")
}

func (b docBlock) shell() bool {
	return b.lang == "sh" || b.lang == "bash" || b.lang == "console"
}

// checkDocBlocks returns what breaks the convention in a file's blocks.
func checkDocBlocks(blocks []docBlock) []string {
	var bad []string
	for _, b := range blocks {
		switch {
		case b.lang == "":
			bad = append(bad, fmt.Sprintf("line %d: a fenced block without an info string (sh, console, go, text, ...)", b.line))
		case b.marked && b.notRun == "":
			bad = append(bad, fmt.Sprintf("line %d: a not-run marker without a reason", b.line))
		case b.marked && !b.shell():
			bad = append(bad, fmt.Sprintf("line %d: a not-run marker on a %s block, which never runs", b.line, b.lang))
		}
	}
	return bad
}

func TestDocsBlocksParse(t *testing.T) {
	doc := "a\n\n<!-- not-run: remote -->\n```sh\ngo install x\n```\n\n```console\n$ percolator a\nout\n$ percolator b &\n```\n\n```\nplain\n```\n<!-- not-run: -->\n\n```sh\nx\n```\n"
	blocks, err := parseDocBlocks(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 4 {
		t.Fatalf("%d blocks, want 4: %+v", len(blocks), blocks)
	}
	if b := blocks[0]; b.notRun != "remote" || b.line != 4 || b.script() != "go install x" {
		t.Errorf("block 0: %+v", b)
	}
	if b := blocks[1]; b.marked || b.script() != "percolator a\npercolator b &" {
		t.Errorf("block 1: %+v, script %q", b, b.script())
	}
	bad := checkDocBlocks(blocks)
	if len(bad) != 2 || !strings.Contains(bad[0], "line 14") || !strings.Contains(bad[1], "line 19: a not-run marker without a reason") {
		t.Errorf("convention breaks: %q", bad)
	}
}

// TestDocs runs the shell blocks of README.md and docs/*.md, a subtest
// per file. The files run side by side, docsFilesAtOnce at a time: their
// scripts mostly wait on the processes they start, so the subtests are
// run from goroutines rather than with t.Parallel, which -parallel
// (GOMAXPROCS by default) would hold to two at a time on two cores.
func TestDocs(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	bin := docsBin(t)
	var wg sync.WaitGroup
	sem := make(chan struct{}, docsFilesAtOnce)
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(rel, func(t *testing.T) { runDocFile(t, root, rel, bin) })
		})
	}
	wg.Wait()
}

// docsFilesAtOnce is how many documents' scripts TestDocs runs at once.
const docsFilesAtOnce = 4

// docsBin returns a directory holding `percolator`: a wrapper that runs
// this test binary as the command.
func docsBin(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wrapper := fmt.Sprintf("#!/bin/sh\nPERCOLATOR_AS_MAIN=1 exec %s \"$@\"\n", shellQuote(exe))
	if err := os.WriteFile(filepath.Join(dir, "percolator"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// runDocFile runs the shell blocks of the file rel as one script.
func runDocFile(t *testing.T, root, rel, bin string) {
	text, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseDocBlocks(string(text))
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	for _, bad := range checkDocBlocks(blocks) {
		t.Errorf("%s:%s", rel, strings.TrimPrefix(bad, "line "))
	}
	state := t.TempDir() // the script, its output and the block it is in
	work := filepath.Join(t.TempDir(), "work")
	if err := os.CopyFS(filepath.Join(work, "testdata"), os.DirFS(filepath.Join(root, "testdata"))); err != nil {
		t.Fatal(err)
	}
	script, n := docScript(rel, blocks, filepath.Join(state, "block"))
	if n == 0 {
		return
	}
	if err := os.WriteFile(filepath.Join(state, "script.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runDocScript(t, work, bin, state)
	if err != nil {
		where, _ := os.ReadFile(filepath.Join(state, "block"))
		t.Fatalf("%s: the block at %s failed: %v\n%s", rel, strings.TrimSpace(string(where)), err, tail(out, 60))
	}
	t.Logf("%s: %d blocks ran", rel, n)
}

// docScript is the script that runs the shell blocks in order, each
// first recording where it is in the file at marker; n counts them.
func docScript(rel string, blocks []docBlock, marker string) (script string, n int) {
	var sb strings.Builder
	sb.WriteString("set -e -o pipefail\n")
	for i, b := range blocks {
		if !b.shell() || b.marked {
			continue
		}
		n++
		fmt.Fprintf(&sb, "\n# %s, block %d, line %d\n", rel, i+1, b.line)
		fmt.Fprintf(&sb, "printf '%%s\\n' %s > %s\n", shellQuote(fmt.Sprintf("line %d (block %d)", b.line, i+1)), shellQuote(marker))
		fmt.Fprintf(&sb, "echo %s >&2\n", shellQuote(fmt.Sprintf("=== %s:%d", rel, b.line)))
		sb.WriteString(b.script())
		sb.WriteString("\n")
	}
	return sb.String(), n
}

// runDocScript runs state/script.sh in work, in a process group of its
// own that is stopped once the script ends, and returns its output.
func runDocScript(t *testing.T, work, bin, state string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	outPath := filepath.Join(state, "out")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(state, "script.sh"))
	cmd.Dir = work
	cmd.Env = docsEnv(bin)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = out, out // a file, not a pipe: background processes may keep it open
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	runErr := cmd.Run()
	if cmd.Process != nil {
		stopGroup(t, cmd.Process.Pid)
	}
	b, _ := os.ReadFile(outPath)
	return string(b), runErr
}

// stopGroup stops what the script left running in its process group:
// SIGTERM (servers drain and exit), then SIGKILL after 10 seconds.
func stopGroup(t *testing.T, pgid int) {
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return // nothing left
	}
	for range 100 {
		if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("processes of group %d outlived SIGTERM by 10s: killed", pgid)
	syscall.Kill(-pgid, syscall.SIGKILL)
	for range 50 {
		if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// docsEnv is the scripts' environment: this test's, with bin first on
// PATH and none of the variables that would point a command elsewhere.
func docsEnv(bin string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "PERCOLATOR_AS_MAIN", "PERCOLATOR_TOKEN", "BIGTABLE_EMULATOR_HOST":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
