package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/bench"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
	"github.com/seed-992972ee/percolator/docindex"
	"github.com/seed-992972ee/percolator/graph"
	"github.com/seed-992972ee/percolator/history"
	"github.com/seed-992972ee/percolator/lock"
	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/queue"
	"github.com/seed-992972ee/percolator/txn"
	"github.com/seed-992972ee/percolator/verify"
)

// jsonDoc is the file that documents what --json prints.
const jsonDoc = "../../docs/json.md"

// schemaField is one documented field: its type, and whether it may be
// absent.
type schemaField struct {
	typ      string
	optional bool
}

// schema is one command's documented output: each field by its path
// ("." the top level, "[]" an element of an array, "." between keys).
type schema map[string]schemaField

// readSchemas parses the json-schema blocks of docs/json.md, by name.
func readSchemas(t *testing.T) map[string]schema {
	t.Helper()
	b, err := os.ReadFile(jsonDoc)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]schema{}
	var cur schema
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```json-schema "):
			name := strings.TrimPrefix(line, "```json-schema ")
			if out[name] != nil {
				t.Fatalf("json.md:%d: a second schema for %q", n, name)
			}
			cur = schema{}
			out[name] = cur
		case cur != nil && line == "```":
			cur = nil
		case cur != nil:
			line, _, _ = strings.Cut(line, "  # ")
			path, typ, ok := strings.Cut(line, ": ")
			if !ok {
				t.Fatalf("json.md:%d: not 'path: type': %q", n, line)
			}
			opt := strings.HasSuffix(path, "?")
			cur[strings.TrimSuffix(path, "?")] = schemaField{strings.TrimSpace(typ), opt}
		}
	}
	for name, s := range out {
		checkSchema(t, name, s)
	}
	return out
}

var (
	snakeKey  = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	knownType = regexp.MustCompile(`^(string|int|number|bool|object|array|seconds|time|b64|lines|map\((string|int|number|bool|scalar)\))$`)
)

// checkSchema checks a schema against the convention: snake_case keys,
// seconds in *_s keys and nothing else there but rates (*_per_s), no
// other unit, base64 in *_b64 keys with their pair x documented as an
// optional string, every field's parent documented as its container.
func checkSchema(t *testing.T, name string, s schema) {
	root, ok := s["."]
	if !ok || (root.typ != "object" && root.typ != "array" && root.typ != "lines") {
		t.Errorf("schema %q: no top-level type ('.: object', 'array' or 'lines')", name)
	}
	for path, f := range s {
		if path == "." {
			continue
		}
		if !knownType.MatchString(f.typ) || f.typ == "lines" {
			t.Errorf("schema %q: %s: unknown type %q", name, path, f.typ)
		}
		parent, key := splitPath(path)
		want := "object"
		if key == "[]" {
			want = "array"
		}
		if p, ok := s[parent]; !ok || (p.typ != want && !(want == "array" && parent == "." && p.typ == "lines")) {
			t.Errorf("schema %q: %s: its parent %q is not documented as an %s", name, path, parent, want)
		}
		if key == "[]" {
			continue
		}
		if !snakeKey.MatchString(key) {
			t.Errorf("schema %q: %s: key %q is not snake_case", name, path, key)
		}
		switch {
		case (f.typ == "seconds") != (strings.HasSuffix(key, "_s") && !strings.HasSuffix(key, "_per_s")):
			t.Errorf("schema %q: %s: a duration is of type seconds in a key ending in _s, and only it (%s)", name, path, f.typ)
		case strings.HasSuffix(key, "_per_s") && f.typ != "number":
			t.Errorf("schema %q: %s: a rate is a number", name, path)
		case strings.HasSuffix(key, "_ns") || strings.HasSuffix(key, "_ms") || strings.HasSuffix(key, "_us"):
			t.Errorf("schema %q: %s: durations are seconds (_s)", name, path)
		case (f.typ == "b64") != strings.HasSuffix(key, "_b64"):
			t.Errorf("schema %q: %s: base64 is of type b64 in a key ending in _b64, and only it", name, path)
		case f.typ == "b64":
			if pair, ok := s[strings.TrimSuffix(path, "_b64")]; !ok || pair.typ != "string" || !pair.optional {
				t.Errorf("schema %q: %s: its pair %s?: string is not documented", name, path, strings.TrimSuffix(key, "_b64"))
			}
		}
	}
}

// splitPath is a field's parent path and its key ("[]" for an element).
func splitPath(path string) (parent, key string) {
	if strings.HasSuffix(path, "[]") {
		parent = strings.TrimSuffix(path, "[]")
		if parent == "" {
			parent = "."
		}
		return parent, "[]"
	}
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return ".", path
	}
	return path[:i], path[i+1:]
}

// child is the path of key under parent.
func child(parent, key string) string {
	switch {
	case key == "[]":
		return strings.TrimPrefix(parent, ".") + "[]"
	case parent == ".":
		return key
	}
	return parent + "." + key
}

// checkOutput decodes out and checks it against s: every field
// documented, of its type, every required one present; it marks the
// paths it saw in seen.
func checkOutput(s schema, out string, seen map[string]bool) []string {
	var errs []string
	fail := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	decode := func(text string) (any, error) {
		dec := json.NewDecoder(strings.NewReader(text))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if dec.More() {
			return nil, fmt.Errorf("more than one JSON value")
		}
		return v, nil
	}
	if s["."].typ == "lines" {
		seen["."] = true
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		for _, l := range lines {
			v, err := decode(l)
			if err != nil {
				fail("line %q: %v", l, err)
				continue
			}
			checkValue(s, "[]", v, seen, fail)
		}
		return errs
	}
	v, err := decode(out)
	if err != nil {
		return []string{fmt.Sprintf("not one JSON value: %v", err)}
	}
	checkValue(s, ".", v, seen, fail)
	return errs
}

// checkValue checks v, the value at path, and what it holds.
func checkValue(s schema, path string, v any, seen map[string]bool, fail func(string, ...any)) {
	f := s[path]
	seen[path] = true
	if !typeOK(f.typ, v) {
		fail("%s: %v is not of type %s", path, v, f.typ)
		return
	}
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			checkValue(s, child(path, "[]"), e, seen, fail)
		}
	case map[string]any:
		if strings.HasPrefix(f.typ, "map(") {
			return
		}
		for k, e := range v {
			p := child(path, k)
			if _, ok := s[p]; !ok {
				fail("%s: undocumented field", p)
				continue
			}
			checkValue(s, p, e, seen, fail)
			if strings.HasSuffix(k, "_b64") {
				checkPair(v, k, p, fail)
			}
		}
		for p, sf := range s {
			if parent, key := splitPath(p); parent == path && key != "[]" && !sf.optional {
				if _, ok := v[key]; !ok {
					fail("%s: missing", p)
				}
			}
		}
	}
}

// checkPair checks that x_b64 decodes, and that x is the bytes it holds
// exactly when they are valid UTF-8.
func checkPair(obj map[string]any, k, path string, fail func(string, ...any)) {
	b, err := base64.StdEncoding.DecodeString(obj[k].(string))
	if err != nil {
		fail("%s: not standard base64: %v", path, err)
		return
	}
	x, ok := obj[strings.TrimSuffix(k, "_b64")]
	switch {
	case !ok && utf8.Valid(b):
		fail("%s: valid UTF-8 %q without its string field", path, b)
	case ok && !utf8.Valid(b):
		fail("%s: a string field for invalid UTF-8 %q", path, b)
	case ok && x != string(b):
		fail("%s: the string field %q is not the bytes %q", path, x, b)
	}
}

// typeOK says whether v, as decoded with UseNumber, is of type typ.
func typeOK(typ string, v any) bool {
	switch typ {
	case "string", "b64":
		_, ok := v.(string)
		return ok
	case "time":
		s, ok := v.(string)
		_, err := time.Parse(time.RFC3339Nano, s)
		return ok && err == nil
	case "int":
		n, ok := v.(json.Number)
		return ok && !strings.ContainsAny(string(n), ".eE")
	case "number", "seconds":
		_, ok := v.(json.Number)
		return ok
	case "bool":
		_, ok := v.(bool)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array", "lines":
		_, ok := v.([]any)
		return ok
	}
	if elem, ok := strings.CutPrefix(typ, "map("); ok {
		return mapOK(strings.TrimSuffix(elem, ")"), v)
	}
	return false
}

// mapOK says whether v is an object whose values are of type elem
// ("scalar": a string, a number or a bool).
func mapOK(elem string, v any) bool {
	m, ok := v.(map[string]any)
	for _, e := range m {
		switch {
		case elem != "scalar" && !typeOK(elem, e),
			elem == "scalar" && !typeOK("string", e) && !typeOK("number", e) && !typeOK("bool", e):
			return false
		}
	}
	return ok
}

// jsonStore is where the commands' store goes (dir, made by index) and
// the corpus it indexes (src): a file named in Latin-1, one named with
// HTML characters, and two duplicates.
func jsonStore(t *testing.T) (dir, src string) {
	src = writeCorpus(t, map[string]string{
		"a<b>&c.html": "<title>A &lt; B</title><p>gopher closure</p>",
		"caf\xe9.txt": "gopher caf\xe9 notes\n",
		"one.txt":     "the same words twice\n",
		"two.txt":     "the same words twice\n",
	})
	dir = filepath.Join(t.TempDir(), "db")
	return dir, src
}

// addPending registers an observer without code on dir's store and
// writes its column, in a row key with HTML characters and one of
// invalid UTF-8: its notifications stay pending.
func addPending(t *testing.T, dir string) {
	ctx := context.Background()
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir, MustExist: true, DisableGC: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Observe(ctx, percolator.Observer{Name: "pending", Column: "p<c"}); err != nil {
		t.Fatal(err)
	}
	err = db.Update(ctx, func(tx *percolator.Txn) error {
		return tx.Set("r<1>", "p<c", bytes.Repeat([]byte("v"), 5<<10)) // not inline: dump shows its data cell
	})
	if err == nil {
		err = db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("r\xff", "p<c", []byte("w\xfe")) })
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestJSONMatchesDocs runs every command that takes --json on a small
// store and checks what it prints against docs/json.md; what a small
// store does not produce (madeUpOutputs) is printed by the same view
// functions from made-up values. Every field documented must be printed
// by some output, every command with --json must be documented, and no
// output may escape HTML characters.
func TestJSONMatchesDocs(t *testing.T) {
	t.Parallel() // its own directories only
	schemas := readSchemas(t)
	dir, src := jsonStore(t)
	tmp := t.TempDir()
	g, bank, restored, file := filepath.Join(tmp, "g"), filepath.Join(tmp, "bank"), filepath.Join(tmp, "restored"), filepath.Join(tmp, "b.pcb")
	seen := map[string]map[string]bool{} // by schema, the paths the outputs printed
	check := func(name, out string) {
		t.Helper()
		s, ok := schemas[name]
		if !ok {
			t.Errorf("%s: no schema in %s", name, jsonDoc)
			return
		}
		if seen[name] == nil {
			seen[name] = map[string]bool{}
		}
		for _, e := range checkOutput(s, out, seen[name]) {
			t.Errorf("%s: %s\n%s", name, e, out)
		}
		if strings.Contains(out, `\u003c`) || strings.Contains(out, `\u003e`) || strings.Contains(out, `\u0026`) {
			t.Errorf("%s: HTML characters escaped:\n%s", name, out)
		}
	}
	runs := []struct {
		name string
		args []string
	}{
		{"index", []string{"index", "--dir", dir, "--quiet", "--json", src}},
		{"", nil}, // addPending
		{"status", []string{"status", "--dir", dir, "--json"}},
		{"locks", []string{"locks", "--dir", dir, "--json", "--resolve"}},
		{"notifications", []string{"notifications", "--dir", dir, "--json"}},
		{"notifications --quarantined", []string{"notifications", "--dir", dir, "--json", "--quarantined"}},
		{"notifications --retry", []string{"notifications", "--dir", dir, "--json", "--retry"}},
		{"dump", []string{"dump", "--dir", dir, "--json", "--prefix", "r"}},
		{"index query", []string{"index", "--dir", dir, "--json", "query", "gopher"}},
		{"index --dups", []string{"index", "--dir", dir, "--json", "--dups"}},
		{"gc", []string{"gc", "--dir", dir, "--json", "--dry-run", "--gc-lifetime", "1ms"}},
		{"backup", []string{"backup", "--dir", dir, "--json", "--quiet", "--out", file}},
		{"restore", []string{"restore", "--dir", restored, "--json", "--quiet", file}},
		{"queue push", []string{"queue", "push", "q", "a<b", "x\xff", "--dir", dir, "--json"}},
		{"queue stats", []string{"queue", "stats", "q", "--dir", dir, "--json"}},
		{"queue consume", []string{"queue", "consume", "q", "--dir", dir, "--json", "--count", "2"}},
		{"queue dead", []string{"queue", "dead", "q", "--dir", dir, "--json"}},
		{"queue dead --requeue", []string{"queue", "dead", "q", "--dir", dir, "--json", "--requeue"}},
		{"lock acquire", []string{"lock", "acquire", "nightly", "--dir", dir, "--json", "--ttl", "1m"}},
		{"lock show", []string{"lock", "show", "nightly", "--dir", dir, "--json"}},
		{"graph load", []string{"graph", "load", "--dir", g, "--json", "--limit", "10", "--workers", "2"}},
		{"", []string{"graph", "insert", "--dir", g, "a<b", "c\xff", "kind=Depends", "constraint=>= 2"}},
		{"", []string{"graph", "insert", "--dir", g, "a<b", "d&", "kind=Depends"}},
		{"graph query", []string{"graph", "query", "--dir", g, "--json", "--out", "a<b"}},
		{"graph degree", []string{"graph", "degree", "--dir", g, "--json", "--out", "a<b"}},
		{"graph check", []string{"graph", "check", "--dir", g, "--json"}},
		{"bank", []string{"bank", "--dir", bank, "--json", "--quiet", "--accounts", "4", "--workers", "2", "--readers", "1", "--duration", "100ms"}},
		{"version", []string{"version", "--json"}},
	}
	for _, r := range runs {
		if r.args == nil {
			addPending(t, dir)
			continue
		}
		out, _ := mustRun(t, 0, r.args...)
		if r.name != "" {
			check(r.name, out)
		}
	}
	for _, m := range madeUpOutputs() {
		var out bytes.Buffer
		if err := m.print(&out); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		check(m.name, out.String())
	}
	// A lock cell in dump needs a transaction caught between prewrite and
	// commit, which the commands cannot leave behind.
	unreachable := map[string]bool{"dump [].cells[].lock": true}
	for name, s := range schemas {
		for path := range s {
			if !seen[name][path] && !unreachable[name+" "+path] {
				t.Errorf("%s: %s is documented in %s but no output checked printed it", name, path, jsonDoc)
			}
		}
	}
	names := slices.Collect(maps.Keys(schemas))
	for _, c := range commandsWithJSON(newRoot(nil), "") {
		if !slices.ContainsFunc(names, func(n string) bool { return n == c || strings.HasPrefix(n, c+" --") }) {
			t.Errorf("%s takes --json but %s has no schema for it", c, jsonDoc)
		}
	}
}

// TestJSONConflicts: --json where stdout holds something else too is a
// usage error, which changes nothing: acquire running a command, bank
// printing acks, verify's matrix and cleanup.
func TestJSONConflicts(t *testing.T) {
	t.Parallel() // nothing but usage errors
	dir := filepath.Join(t.TempDir(), "db")
	for _, args := range [][]string{
		{"lock", "acquire", "l", "--dir", dir, "--json", "--", "true"},
		{"bank", "--dir", dir, "--json", "--ack"},
		{"verify", "--json", "--matrix"},
		{"verify", "--json", "--cleanup", "--dir", dir},
	} {
		if _, errOut := mustRun(t, 2, args...); !strings.Contains(errOut, "--json") {
			t.Errorf("%q: %s", args, errOut)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a usage error created %s: %v", dir, err)
	}
}

// madeUpOutputs prints, by the commands' own view functions, what a small
// store does not give: locks, quarantined notifications, dead letters,
// a mismatch, a waiter, the status a running command published (with
// partitions), a server's status, a build's revision, bench's figures
// and verify's verdict; each with user bytes in valid UTF-8 and not.
func madeUpOutputs() []madeUp {
	now := time.Now()
	obs := &percolator.ObserverStatus{
		Columns:   []observer.ColumnStatus{{Column: "c\xff", Pending: 2, Oldest: time.Second}},
		Observers: []observer.ObserverStatus{{Name: "o", Column: "c\xff", Counts: map[string]int64{"runs": 3}}},
		Scanners:  map[string]int64{"scans": 1},
		Partitions: []observer.PartitionStatus{{Owner: "w0", Worker: "h/1", Of: 2, End: []byte("k\xff"), Version: 1, Updated: now, Backlog: 1},
			{Owner: "w1", Worker: "h/2", Index: 1, Of: 2, Start: []byte("k<"), End: []byte("z"), Updated: now}},
		Quarantined: 1, Unowned: 1,
	}
	run := runstatus.Status{PID: 1, Command: "percolator index", Started: now, Updated: now, Error: "x", Phase: "loading", Progress: "1 of 2",
		Observers: obs, Bad: []runstatus.Bad{{Path: "a", Reason: "b"}}, BadTotal: 1, Summary: []string{"s"}}
	lockInfo := func(row string) percolator.LockInfo {
		return percolator.LockInfo{Row: []byte(row), Column: "c<", StartTS: 5, Expires: now, Lock: txn.Lock{PrimaryRow: []byte("p"), PrimaryCol: "c", Owner: "me"}}
	}
	quarantined := func(row string) percolator.Quarantined {
		return percolator.Quarantined{Row: row, Column: "c", Observer: "o", Failures: 3, Error: "e", WallMS: now.UnixMilli()}
	}
	dead := func(body string) queue.DeadLetter {
		return queue.DeadLetter{ID: "1", Body: []byte(body), Deliveries: 5, PushedAt: now}
	}
	return []madeUp{
		{"locks", func(w io.Writer) error {
			return view.Locks(w, []percolator.LockInfo{lockInfo("r\xff"), lockInfo("r<")}, true)
		}},
		{"notifications --quarantined", func(w io.Writer) error {
			return view.Quarantined(w, []percolator.Quarantined{quarantined("r\xff"), quarantined("r>")}, true)
		}},
		{"queue dead", func(w io.Writer) error {
			return view.DeadLetters(w, []queue.DeadLetter{dead("b\xff"), dead("b&")}, true)
		}},
		{"queue dead --requeue", func(w io.Writer) error { return view.RequeuedItems(w, []string{"1"}, true) }},
		{"graph check", func(w io.Writer) error {
			return view.GraphCheck(w, graph.Report{Edges: 1, Mismatches: []string{"m"}}, true)
		}},
		{"lock show", func(w io.Writer) error {
			return view.LockStateJSON(w, "l", lock.Status{Held: true, Holder: "h", Token: 2, Expiry: now, Now: now, Waiters: []string{"w"}})
		}},
		{"status", func(w io.Writer) error {
			return view.JSON(w, view.Status{Dir: "d", Source: "store", Format: 2, Observers: obs, Run: &run, Age: time.Second,
				GC: &view.GCState{SafePoint: 3, Lag: 1, OldestOpen: 2, OldestOwner: "me"}, Index: &docindex.Counts{Documents: 1}})
		}},
		{"status", func(w io.Writer) error {
			return view.JSON(w, view.Status{Server: "127.0.0.1:7420", Source: "server", Format: 2})
		}},
		{"index", func(w io.Writer) error {
			bad := []docindex.BadFile{{Path: "x\xff", Reason: "r"}, {Path: "y<", Reason: "r"}}
			return view.JSON(w, view.IndexSummary{JobSummary: docindex.JobSummary{Bad: bad, Skipped: map[string]int{".md": 1}}})
		}},
		{"version", func(w io.Writer) error {
			return view.Version(w, "", cli.Build{Version: "v1", Revision: "abc", Go: "go1"}, true, true)
		}},
		{"bench", func(w io.Writer) error {
			return view.BenchReports(w, []bench.Report{{Figure: "oracle", Lines: []string{"l"}, Targets: []bench.Target{{Name: "t", Met: true}}}})
		}},
		{"verify", func(w io.Writer) error {
			r := verify.Report{Workload: "bank", Target: "dir", Faults: map[string]int{"kill": 1}, Seconds: 1, Out: "o",
				Result: history.Result{Checker: "c", Valid: true, Counts: map[string]int{"g1c": 0}}}
			return view.VerifyVerdict(w, &r, true)
		}},
	}
}

// madeUp is one output printed from made-up values, and its schema.
type madeUp struct {
	name  string
	print func(io.Writer) error
}

// commandsWithJSON lists the commands under c (by their path from the
// root, as "queue stats") that have a --json flag.
func commandsWithJSON(c *cobra.Command, prefix string) []string {
	var out []string
	for _, sub := range c.Commands() {
		path := strings.TrimSpace(prefix + " " + sub.Name())
		if sub.Flags().Lookup("json") != nil || sub.PersistentFlags().Lookup("json") != nil {
			out = append(out, path)
		}
		out = append(out, commandsWithJSON(sub, path)...)
	}
	return out
}
