package main

// What the command line says when it fails: one line per failure class a
// user provokes, read as a user would.

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// internalPrefix is a Go package's or API's name where a user reads the
// command's: a package prefix starting a message or a part it wraps, or
// an option's field where advice should name a flag.
var internalPrefix = regexp.MustCompile(`(^|: |\n)(percolator|txn|storage|observer|oracle|pebble|memory|coord|rpc|remote|server|cluster|docindex|queue|lock|graph|backup|workload|bench|history|verify|time|bufio\.Scanner|strconv\.[A-Za-z]+): |[A-Za-z]*Options\.[A-Z]`)

// TestCLIErrorMessages: each class of failure prints
// "percolator <command>: <what happened>" with the prefix once, no
// internal package's prefix, no part said twice, advice naming flags,
// and what happened in the user's terms (a missing token is missing).
func TestCLIErrorMessages(t *testing.T) {
	t.Parallel() // in-process servers on ports of their own, and its own directories
	dir, empty, scratch := t.TempDir(), t.TempDir(), t.TempDir()
	mustRun(t, 0, "queue", "push", "q", "x", "--dir", dir)
	file := func(name, body string) string {
		p := filepath.Join(scratch, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tok, badTok, emptyTok := file("token", "s3cret\n"), file("bad-token", "guess\n"), file("empty-token", "\n")
	long := file("long.tsv", "a\t"+strings.Repeat("b", bufio.MaxScanTokenSize)+"\n")
	junk := file("junk.pcb", "not a backup")
	cert, key := testCert(t)
	withToken, _, _ := serveInProcess(t, "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--token-file", tok)
	withTLS, _, _ := serveInProcess(t, "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key)
	missing := filepath.Join(empty, "missing")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := busy.Addr().String()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"status", "--dir", empty}, 1, "percolator status: no store at " + empty},
		{[]string{"queue", "push", "", "a", "--dir", dir}, 2, "percolator queue push: invalid argument: queue name"},
		{[]string{"lock", "acquire", "", "--dir", empty}, 2, "percolator lock acquire: the lock NAME is empty"},
		{[]string{"lock", "acquire", "l", "--ttl", "1ns", "--dir", empty}, 2, "percolator lock acquire: --ttl 1ns: at least 1ms"},
		{[]string{"lock", "show", "", "--dir", dir}, 1, "percolator lock show: invalid argument: lock name"},
		{[]string{"lock", "release", "l", "--id", "5", "--token", "3", "--dir", dir}, 1, "percolator lock release: lease not held: l token 3"},
		{[]string{"graph", "insert", "a", "b", "--dir", dir}, 1, "percolator graph insert: unknown label"},
		{[]string{"graph", "load", "--dir", dir, long}, 1, "percolator graph load: " + long + ":1: line longer than"},
		{[]string{"backup", "--dir", dir, "--out", filepath.Join(missing, "b")}, 1, "percolator backup: cannot create " + filepath.Join(missing, "b") + ": no such file"},
		{[]string{"restore", "--dir", t.TempDir(), junk}, 1, "percolator restore: " + junk + ": "},
		{[]string{"init", "--bigtable", "p/i"}, 2, "percolator init: --bigtable: "},
		{[]string{"status", "--server", withToken}, 1, "percolator status: server " + withToken + " wants a token, and none was given: pass --token-file"},
		{[]string{"status", "--server", withToken, "--token-file", badTok}, 1, "refused the token in --token-file " + badTok},
		{[]string{"status", "--server", withToken, "--token-file", missing}, 1, "percolator status: --token-file " + missing + ": no such file"},
		{[]string{"status", "--server", withToken, "--token-file", emptyTok}, 1, "percolator status: --token-file " + emptyTok + " is empty"},
		{[]string{"status", "--server", withTLS, "--retry-budget", "5s"}, 1, "serves TLS"},
		{[]string{"dump", "--server", taken, "--retry-budget", "100ms"}, 1, "percolator dump: server unavailable: server " + taken + ": "},
		{[]string{"bank", "--dir", empty, "--duration", "soon"}, 2, `percolator bank: --duration "soon": want a duration such as`},
		{[]string{"bank", "--dir", empty, "--accounts", "x"}, 2, `percolator bank: --accounts "x": want a whole number`},
		{[]string{"bank", "--dir", empty, "--accounts", "99999999999999999999"}, 2, `percolator bank: --accounts "99999999999999999999": out of range`},
		{[]string{"index", "--dir", empty, "--dups=maybe"}, 2, `percolator index: --dups "maybe": want true or false`},
		{[]string{"serve", "--dir", t.TempDir(), "--listen", taken}, 1, "percolator serve: --listen " + taken + ": address already in use"},
		{[]string{"serve", "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", taken}, 1, "percolator serve: --http " + taken + ": address already in use"},
		{[]string{"serve", "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--tls-cert", key, "--tls-key", cert}, 1, "percolator serve: --tls-cert " + key + ", --tls-key " + cert + ": "},
	} {
		if tc.args[1] == "--server" && tc.args[0] == "status" && len(tc.args) == 3 && os.Getenv("PERCOLATOR_TOKEN") != "" {
			continue // the environment gives a token
		}
		_, errOut, code := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
		checkMessage(t, tc.args, errOut)
	}
	if entries, _ := os.ReadDir(empty); len(entries) > 0 {
		t.Errorf("a command that failed left %s in %s", entries[0].Name(), empty)
	}
	_, errOut, _ := runCLI(t, "status", "--server", withTLS, "--retry-budget", "5s")
	if !strings.Contains(errOut, "--tls-ca") {
		t.Errorf("plaintext to a TLS server: %q does not name --tls-ca", errOut)
	}
}

// checkMessage: the error in errOut (after any progress lines) begins
// "percolator <command>: ", and says so once; then no internal prefix, no
// part twice in a row, and a signal is "interrupted".
func checkMessage(t *testing.T, args []string, errOut string) {
	t.Helper()
	if i := strings.Index(errOut, "\npercolator "); i >= 0 && !strings.HasPrefix(errOut, "percolator ") {
		errOut = errOut[i+1:]
	}
	cmd, body, ok := strings.Cut(errOut, ": ")
	if !ok || !strings.HasPrefix(cmd, "percolator") || strings.Count(errOut, cmd+": ") != 1 {
		t.Errorf("%q: %q does not begin with the command's name, once", args, errOut)
	}
	if m := internalPrefix.FindString(body); m != "" {
		t.Errorf("%q: %q reaches the user in %q", args, m, errOut)
	}
	parts := strings.Split(body, ": ")
	for i := 1; i < len(parts); i++ {
		if parts[i] == parts[i-1] {
			t.Errorf("%q: %q says %q twice", args, errOut, parts[i])
		}
	}
	if p := repeatedPhrase(body, 4); p != "" {
		t.Errorf("%q: %q says %q twice", args, errOut, p)
	}
	if strings.Contains(errOut, "interrupted by interrupt") {
		t.Errorf("%q: %q", args, errOut)
	}
}

// repeatedPhrase is a phrase of n words that s says twice, or "".
func repeatedPhrase(s string, n int) string {
	words := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\n' || r == ':' || r == '(' || r == ')' })
	seen := map[string]bool{}
	for i := 0; i+n <= len(words); i++ {
		p := strings.Join(words[i:i+n], " ")
		if seen[p] {
			return p
		}
		seen[p] = true
	}
	return ""
}

// TestCLIStoreInUseMessage: a command on a store another process holds
// names the holder, its pid once, and (a command that reads) where to
// read what it is doing only when it publishes that.
func TestCLIStoreInUseMessage(t *testing.T) {
	t.Parallel() // it waits on a process of its own: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocess")
	}
	dir := t.TempDir()
	mustRun(t, 0, "queue", "push", "q", "x", "--dir", dir)
	holder := command("lock", "acquire", "l", "--dir", dir, "--", "sh", "-c", "echo held; read x")
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = holder.Wait() }() // sh reads its end of input and exits; the lease is released
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "held\n" {
		t.Fatalf("lock acquire -- sh: %q, %v", line, err)
	}
	args := []string{"queue", "stats", "q", "--dir", dir}
	_, errOut, code := runCLI(t, args...)
	pid := strconv.Itoa(holder.Process.Pid)
	if code != 1 || !strings.HasPrefix(errOut, "percolator queue stats: store ") || !strings.Contains(errOut, "in use by process "+pid+" (") ||
		strings.Count(errOut, pid) != 1 || strings.Contains(errOut, "percolator status --dir") {
		t.Errorf("%q while lock acquire holds the store: exit %d, %q; want 1 and its holder named once", args, code, errOut)
	}
	checkMessage(t, args, errOut)
}

// TestRepeatedPhrase: the check finds a phrase said twice across the
// parts of a message, and passes one that repeats only an address.
func TestRepeatedPhrase(t *testing.T) {
	said := "start timestamp: etcd: no elected timestamp oracle answered within 10s: etcd: no elected timestamp oracle answered: no candidate"
	if p := repeatedPhrase(said, 4); p != "etcd no elected timestamp" {
		t.Errorf("repeatedPhrase(%q) = %q", said, p)
	}
	if p := repeatedPhrase("server unavailable: server a:1: dial tcp a:1: connect: connection refused", 4); p != "" {
		t.Errorf("a repeated address alone: %q", p)
	}
}
