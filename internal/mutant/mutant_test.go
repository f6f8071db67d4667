package mutant

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	got, err := Parse(" skip-lock-check,,stale-range ")
	if err != nil || strings.Join(got, ",") != "skip-lock-check,stale-range" {
		t.Fatalf("Parse = %q, %v", got, err)
	}
	if got, err := Parse(""); err != nil || len(got) != 0 {
		t.Fatalf("Parse(\"\") = %q, %v", got, err)
	}
	_, err = Parse("skip-lock-check,skip-lock-chek")
	if err == nil {
		t.Fatal("a misspelt name parsed")
	}
	for _, m := range Names() {
		if !strings.Contains(err.Error(), m.Name) {
			t.Errorf("the error does not list %s: %v", m.Name, err)
		}
	}
}

func TestNamesDescribed(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range Names() {
		if seen[m.Name] || m.Description == "" || strings.Contains(m.Description, "\n") || m.Invariant == 0 {
			t.Errorf("mutant %+v: duplicate, or not described in one line", m)
		}
		seen[m.Name] = true
	}
}

// TestOffInNormalBuild: in a build without the tag no mutant is ever on,
// whatever the environment says.
func TestOffInNormalBuild(t *testing.T) {
	if Compiled {
		t.Skip("built with -tags percolator_mutants")
	}
	all := make([]string, 0, len(Names()))
	for _, m := range Names() {
		all = append(all, m.Name)
	}
	t.Setenv(EnvVar, strings.Join(all, ","))
	for _, name := range all {
		if On(name) {
			t.Errorf("On(%q) in a normal build", name)
		}
	}
}
