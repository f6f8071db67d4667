package percolator_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/seed-992972ee/percolator"

// layers ranks every package of the module: an import goes to a lower
// rank only, or within one package's family of the same rank (a backend
// builds on its interface or on a sibling: oracle/remote imports oracle,
// oracle/etcd imports oracle/remote). The order is doc.go's
// "Architecture"; a package missing here fails the test, so a new one is
// placed on purpose.
var layers = map[string]int{
	"cmd/percolator": 13, "cmd/percolator/internal/holding": 13,
	"cmd/percolator/internal/progress": 13, "cmd/percolator/internal/runstatus": 13, "cmd/percolator/internal/heapfloor": 13,
	"cmd/percolator/internal/cli": 13, "cmd/percolator/internal/view": 13, "cmd/percolator/internal/verifycmd": 13,
	"cmd/percolator/internal/statuspage": 13,
	"bench":                              12, "verify": 12,
	"docindex": 11, "workload": 11, "backup": 11,
	"cluster": 10,
	"graph":   9, "lock": 9, "queue": 9,
	"":         8, // the root package: the public facade
	"server":   7,
	"observer": 6,
	"txn":      5,
	"oracle":   4, "oracle/remote": 4, "oracle/etcd": 4,
	"coord": 3, "coord/remote": 3, "coord/etcd": 3,
	"storage/memory": 2, "storage/pebble": 2, "storage/bigtable": 2, "storage/remote": 2, "storage/shared": 2,
	"internal/userstore": 2,
	"rpc":                1,
	"storage":            0, "rpc/rpcpb": 0, "internal/ctxwait": 0,
	"history": 0, "internal/mutant": 0, "internal/faultproxy": 0, "internal/loopback": 0, // histories are plain data: it imports nothing of the module
	"internal/proccpu": 0,
}

// testSupport are the packages that exist for tests (doubles, fault
// injection, conformance suites, test servers): no other package of the
// module may import them, so that no binary links them (nor package
// testing through them).
var testSupport = map[string]bool{
	"storage/storagetest": true, "storage/bigtable/bttesting": true, "storage/pebble/faultfs": true,
	"coord/coordtest": true, "coord/etcd/etcdtest": true, "server/servertest": true,
	"internal/clockstores": true, "internal/leakcheck": true, "internal/manualclock": true,
	"internal/protogen": true, "internal/protogen/gen": true, // the code generator, run by go generate
}

type listedPackage struct {
	ImportPath string
	Imports    []string
}

// modulePackages lists the module's packages with their imports (go list
// -json: the imports of the package's non-test files).
func modulePackages(t *testing.T) []listedPackage {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list the packages: %v", err)
	}
	out, err := exec.Command(goCmd, "list", "-json", module+"/...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// rel is a module package's path relative to the module ("" for the
// root); ok is false for a package outside the module.
func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// family is the first element of a package's path: oracle for
// oracle/etcd.
func family(p string) string {
	f, _, _ := strings.Cut(p, "/")
	return f
}

// TestLayers fails when an import breaks the layer order of doc.go's
// "Architecture", or when a package the tests alone should use is
// imported by another.
func TestLayers(t *testing.T) {
	for _, p := range modulePackages(t) {
		from, _ := rel(p.ImportPath)
		rank, placed := layers[from]
		if !placed && !testSupport[from] {
			t.Errorf("package %q has no layer: place it in layers (and in doc.go's Architecture)", from)
			continue
		}
		for _, imp := range p.Imports {
			to, in := rel(imp)
			if !in {
				continue
			}
			switch {
			case testSupport[to] && !testSupport[from]:
				t.Errorf("%q imports %q, a package for tests: the binaries would link it", from, to)
			case testSupport[from] || testSupport[to]:
			case layers[to] > rank || (layers[to] == rank && (family(from) != family(to) || from == family(from))):
				t.Errorf("%q (layer %d) imports %q (layer %d): imports go down the layers only", from, rank, to, layers[to])
			}
		}
	}
}
