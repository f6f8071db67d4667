package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryLinksNoTestCode: the command links no test code, neither
// package testing (which registers its flags and pulls in the test
// runner) nor a test helper of this module (storagetest, servertest,
// etcdtest, bttesting, ...): what a command needs from one moves to a
// package of its own, as shared.Store did out of storagetest.
func TestBinaryLinksNoTestCode(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list the dependencies with: %v", err)
	}
	cmd := exec.Command(gotool, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", ".")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderrOf(err))
	}
	const module = "github.com/seed-992972ee/percolator"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(line, " ")
		last := path[strings.LastIndexByte(path, '/')+1:]
		testish := strings.HasSuffix(last, "test") || strings.HasSuffix(last, "testing")
		switch {
		case std == "true" && (path == "testing" || strings.HasPrefix(path, "testing/")),
			std == "true" && testish && !strings.Contains(path, "internal/"),
			(path == module || strings.HasPrefix(path, module+"/")) && testish:
			t.Errorf("the command links the test package %s", path)
		}
	}
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
