package main

// The command line itself: argument checks, each command's own flags,
// help, version and completion, the index's sub-command against a
// directory named query, and the flag spellings scripts use.

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
// and an argument check; for every command of the tree, --help prints
// its description, usage line and examples and exits 0, as
// `help COMMAND` does; an unknown flag is a usage error; and so is each
// number of arguments its check refuses.
func TestCommandTree(t *testing.T) {
	walkCommands(newRoot(nil), func(c *cobra.Command) {
		if !c.Hidden && (c.Short == "" || c.Example == "" || c.Args == nil) {
			t.Errorf("%s: synopsis %q, example %q, argument check %v", c.CommandPath(), c.Short, c.Example, c.Args != nil)
		}
		c.InitDefaultHelpFlag() // as running it does: its usage line then says [flags]
		path := strings.Fields(c.CommandPath())[1:]
		checkHelp(t, c, path)
		args := append(slices.Clone(path), "--no-such-flag")
		if _, errOut, code := runCLI(t, args...); code != 2 || !strings.Contains(errOut, "unknown flag: --no-such-flag") {
			t.Errorf("%q: exit %d, %q; want 2 and the unknown flag named", args, code, errOut)
		}
		checkArgCounts(t, c, path)
	})
}

// walkCommands calls fn on c and every command below it.
func walkCommands(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, s := range c.Commands() {
		walkCommands(s, fn)
	}
}

// checkHelp: `PATH --help` and `PATH -h` print c's description (its
// Long, or its synopsis), usage line and examples, exit 0, and print
// what `help PATH` prints.
func checkHelp(t *testing.T, c *cobra.Command, path []string) {
	t.Helper()
	out, errOut, code := runCLI(t, append(slices.Clone(path), "--help")...)
	desc := cmp.Or(c.Long, c.Short)
	if code != 0 || !strings.HasPrefix(out, desc) || !strings.Contains(out, "usage: "+c.UseLine()+"\n") ||
		c.HasExample() && !strings.Contains(out, "examples:\n"+c.Example) {
		t.Errorf("%s --help: exit %d, want 0, its description, usage line and examples:\n%s%s", c.CommandPath(), code, out, errOut)
	}
	if short, _, _ := runCLI(t, append(slices.Clone(path), "-h")...); short != out {
		t.Errorf("%s: -h and --help differ:\n%s\n---\n%s", c.CommandPath(), short, out)
	}
	if help, _, code := runCLI(t, append([]string{"help"}, path...)...); code != 0 || help != out {
		t.Errorf("help %s: exit %d, and it differs from --help:\n%s\n---\n%s", strings.Join(path, " "), code, help, out)
	}
}

// checkArgCounts: each of a few numbers of arguments that c's check
// refuses is a usage error (exit 2) that names the arguments. A command
// that takes any number refuses what it does not know in its RunE: a
// group (an unknown command; none), the root and help (an unknown
// command), index (checked with --dups: TestCLIArgumentChecks).
func checkArgCounts(t *testing.T, c *cobra.Command, path []string) {
	t.Helper()
	refused := 0
	for _, n := range []int{0, 1, 2, 3, 9} {
		args := make([]string, n)
		for i := range args {
			args[i] = fmt.Sprintf("arg%d", i)
		}
		if c.Args == nil || c.Args(c, args) == nil {
			continue
		}
		refused++
		line := append(slices.Clone(path), args...)
		_, errOut, code := runCLI(t, line...)
		if code != 2 || !strings.Contains(errOut, "argument") && !strings.Contains(errOut, "want ") ||
			!strings.Contains(errOut, "Run '"+c.CommandPath()+" -h' for usage.") {
			t.Errorf("%q: exit %d, %q; want 2 and a usage error about the arguments", line, code, errOut)
		}
	}
	switch {
	case refused > 0:
	case c.HasSubCommands():
		for _, line := range [][]string{path, append(slices.Clone(path), "no-such-command")} {
			if _, _, code := runCLI(t, line...); code != 2 {
				t.Errorf("%q: exit %d, want 2", line, code)
			}
		}
	case !slices.Contains([]string{"percolator", "percolator help", "percolator index"}, c.CommandPath()):
		t.Errorf("%s takes any number of arguments: give it an argument check", c.CommandPath())
	}
}
