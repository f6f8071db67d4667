package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator/bench"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
)

// TestBenchVerdict: the summary counts the targets met and missed; a
// missed one is exit 1 (cli.ErrFailed) with an error naming every target
// missed, and none missed (or none at all) is exit 0. The figures'
// results are made up: no benchmark runs.
func TestBenchVerdict(t *testing.T) {
	bc, _, err := newRoot(nil).Find([]string{"bench"})
	if err != nil {
		t.Fatal(err)
	}
	writes, rerun := "writes >= 0.25x raw Pebble", "rerun without change <= max(0.01x the first run, 300ms)"
	for _, c := range []struct {
		targets      []bench.Target
		out, errLine string
		code         int
	}{
		{nil, "targets: 0 met, 0 missed\n", "", 0},
		{[]bench.Target{{Name: writes, Met: true}, {Name: rerun, Met: true}}, "targets: 2 met, 0 missed\n", "", 0},
		{[]bench.Target{{Name: "oracle", Met: true}, {Name: writes}}, "targets: 1 met, 1 missed\n",
			"percolator bench: 1 target missed: " + writes + "\n", 1},
		{[]bench.Target{{Name: writes}, {Name: "oracle", Met: true}, {Name: rerun}}, "targets: 1 met, 2 missed\n",
			"percolator bench: 2 targets missed: " + writes + "; " + rerun + "\n", 1},
	} {
		var out, stderr bytes.Buffer
		err := verdict(&out, c.targets)
		code := cli.ExitStatus(context.Background(), bc, err, &stderr)
		if out.String() != c.out || stderr.String() != c.errLine || code != c.code || errors.Is(err, cli.ErrFailed) != (c.code == 1) {
			t.Errorf("%+v: printed %q, error %v (exit %d, %q); want %q, exit %d, %q",
				c.targets, out.String(), err, code, stderr.String(), c.out, c.code, c.errLine)
		}
	}
}

// checkBenchExit checks a bench run's exit status against the summary it
// printed: 0 if no target was missed, 1 with the missed ones named if
// some were (a figure at a test's small scale may miss its target).
func checkBenchExit(t *testing.T, out, errOut string, code int) {
	t.Helper()
	m := regexp.MustCompile(`targets: [0-9]+ met, ([0-9]+) missed\n`).FindStringSubmatch(out)
	switch {
	case m == nil:
	case m[1] == "0" && code == 0:
		return
	case m[1] != "0" && code == 1 && strings.Contains(errOut, "percolator bench: "+m[1]+" target"):
		return
	}
	t.Fatalf("bench: exit %d, not what its summary says\n%s%s", code, out, errOut)
}

// TestBenchGCFlags: the gc figure's flags out of range are usage errors
// (exit 2), named in the message, and run nothing.
func TestBenchGCFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--gc-duration", "0"}, {"--gc-lifetime", "-1s"}, {"--gc-versions", "1"},
	} {
		args = append([]string{"bench", "--dir", t.TempDir(), "--only", "gc"}, args...)
		out, errOut, code := runCLI(t, args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "need --gc-duration, --gc-lifetime > 0 and --gc-versions >= 2") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}

// TestBenchPostgresFlags: --postgres needs --server and a libpq URL
// (usage errors, exit 2, naming the flag, running nothing); without it
// the postgres figure is skipped with a line saying so, no failure.
func TestBenchPostgresFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--postgres", "postgres://bench@127.0.0.1/bench"}, "--postgres needs --server"},
		{[]string{"--server", "127.0.0.1:1", "--postgres", "mysql://bench@127.0.0.1/bench"}, `--postgres: scheme "mysql"`},
	} {
		args := append([]string{"bench", "--dir", t.TempDir(), "--only", "postgres"}, c.args...)
		out, errOut, code := runCLI(t, args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	out, errOut, code := runCLI(t, "bench", "--dir", t.TempDir(), "--server", "127.0.0.1:1", "--only", "postgres")
	if code != 0 || !strings.Contains(out, "postgres: skipped: no PostgreSQL server to measure against (give --postgres URL)") {
		t.Errorf("without --postgres: exit %d\n%s%s", code, out, errOut)
	}
}
