package main

// The command line itself: argument checks, each command's own flags,
// help, version and completion, the index's sub-command against a
// directory named query, and the flag spellings scripts use.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestCLIArgumentChecks: extra or missing arguments are usage errors
// (exit 2), which name what the command wants.
func TestCLIArgumentChecks(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"status", "--dir", dir, "extra"},
		{"version", "extra"},
		{"dump", "--dir", dir, "extra"},
		{"unobserve", "--dir", dir},
		{"unobserve", "--dir", dir, "a", "b"},
		{"index", "--dir", dir},
		{"index", "--dir", dir, "a", "b"},
		{"index", "--dir", dir, "--dups", "a"},
		{"index", "--dir", dir, "query"},
		{"index", "--dir", dir, "query", "a", "b"},
		{"lock", "show", "--dir", dir},
		{"lock", "acquire", "a", "b", "--dir", dir},
		{"lock", "acquire", "--dir", dir, "--", "true"},
		{"lock", "show", "a", "--dir", dir, "--", "true"},
		{"queue", "stats", "--dir", dir},
		{"queue", "stats", "q", "extra", "--dir", dir},
		{"graph", "delete", "a", "--dir", dir},
		{"graph", "check", "extra", "--dir", dir},
		{"backup", "--dir", dir},
		{"backup", "--dir", dir, "--out", filepath.Join(dir, "b"), "extra"},
		{"restore", "--dir", dir},
		{"restore", "--dir", dir, "a", "b"},
		{"completion"},
		{"completion", "tcsh"},
		{"lock"},
		{"lock", "nope"},
		{"nope"},
		{},
	} {
		if _, _, code := runCLI(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestCLIFlagsPerCommand: each command takes its own flags and no other
// command's: a flag of a sibling is a usage error.
func TestCLIFlagsPerCommand(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"queue", "stats", "q", "--count", "1"},
		{"queue", "stats", "q", "--ttl", "1s"},
		{"queue", "stats", "q", "--requeue"},
		{"queue", "push", "q", "--idle-exit", "1s"},
		{"lock", "show", "l", "--id", "1"},
		{"lock", "show", "l", "--token", "1"},
		{"lock", "show", "l", "--ttl", "1s"},
		{"lock", "show", "l", "--wait", "1s"},
		{"lock", "release", "l", "--id", "1", "--token", "1", "--wait", "1s"},
		{"graph", "degree", "--in", "v", "--limit", "1"},
		{"status", "--quarantined"},
		{"bank", "--scanners", "2"},
	} {
		args = append(args, "--dir", dir)
		_, errOut, code := runCLI(t, args...)
		if code != 2 || !strings.Contains(errOut, "unknown flag") {
			t.Errorf("%q: exit %d, %q; want 2 and an unknown flag", args, code, errOut)
		}
	}
}

// TestCLIHelpEverywhere: -h, --help and help print a command's usage and
// exit 0, down to the sub-commands.
func TestCLIHelpEverywhere(t *testing.T) {
	for _, args := range [][]string{
		{"lock", "-h"}, {"lock", "help"}, {"help", "lock", "acquire"}, {"lock", "acquire", "--help"},
		{"index", "query", "-h"}, {"help", "index", "query"}, {"queue", "consume", "-h"}, {"graph", "load", "--help"},
		{"completion", "-h"}, {"bench", "-h"}, {"serve", "--help"}, {"oracle", "-h"},
	} {
		out, _ := mustRun(t, 0, args...)
		if !strings.Contains(out, "usage: percolator ") || !strings.Contains(out, "examples:") {
			t.Errorf("%q: no usage line or examples:\n%s", args, out)
		}
	}
	mustRun(t, 2, "help", "lock", "nope")
}

// TestCLIVersionAndCompletion: --version prints what version does (the
// module's version and the Go version), and completion prints each
// shell's script.
func TestCLIVersionAndCompletion(t *testing.T) {
	version, _ := mustRun(t, 0, "version")
	flag, _ := mustRun(t, 0, "--version")
	if version != flag || !strings.HasPrefix(flag, "percolator ") || !strings.Contains(flag, " go1.") {
		t.Fatalf("version %q, --version %q", version, flag)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out, _ := mustRun(t, 0, "completion", shell); !strings.Contains(out, "percolator") || len(out) < 1000 {
			t.Errorf("completion %s: %.200q", shell, out)
		}
	}
}

// TestCLIIndexDirectoryNamedQuery: a source directory named query is
// indexed when given as ./query or after "--"; bare, it is the query
// sub-command, which then wants its WORD and says how to name the
// directory.
func TestCLIIndexDirectoryNamedQuery(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocess")
	}
	parent, db := t.TempDir(), t.TempDir()
	writeCorpusInto(t, filepath.Join(parent, "query"), map[string]string{"a.txt": "hello query world"})
	for _, args := range [][]string{{"--", "query"}, {"./query"}} {
		cmd := command(append([]string{"index", "--dir", db, "--quiet"}, args...)...)
		cmd.Dir = parent
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "corpus:    1 files") {
			t.Fatalf("index %q from %s: %v\n%s", args, parent, err, out)
		}
	}
	out, _ := mustRun(t, 0, "index", "--dir", db, "query", "hello")
	if !strings.Contains(out, "a.txt\thello query world") {
		t.Fatalf("query hello: %q", out)
	}
	_, errOut := mustRun(t, 2, "index", "--dir", db, "query")
	if !strings.Contains(errOut, "./query") {
		t.Fatalf("index query without a WORD: %q", errOut)
	}
	if _, err := os.Stat(filepath.Join(parent, "query", "a.txt")); err != nil {
		t.Fatal(err)
	}
}

// TestCLIFlagSpellings: long flags take one dash or two, and a value
// after "=" or as the next argument, as the flag package they were first
// written with took them; flags may follow the arguments.
func TestCLIFlagSpellings(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, 0, "bank", "-dir", dir, "-accounts", "4", "-workers=1", "-duration", "50ms", "-quiet")
	mustRun(t, 0, "queue", "push", "q", "one", "-dir="+dir, "two")
	out, _ := mustRun(t, 0, "queue", "stats", "q", "--dir="+dir)
	if !strings.Contains(out, "depth 2\n") {
		t.Fatalf("queue stats: %q", out)
	}
	if _, _, code := runCLI(t, "lock", "acquire", "l", "--dir", dir, "--", "sh", "-c", "exit 3"); code != 3 {
		t.Fatalf("lock acquire -- sh -c 'exit 3': exit %d, want 3 (the command's)", code)
	}
}

// TestCommandTree: every command a user sees has a synopsis, an example
// and an argument check.
func TestCommandTree(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.Hidden && (c.Short == "" || c.Example == "" || c.Args == nil) {
			t.Errorf("%s: synopsis %q, example %q, argument check %v", c.CommandPath(), c.Short, c.Example, c.Args != nil)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRoot(nil))
}
