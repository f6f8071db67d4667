package main

import (
	"context"
	"strings"
	"testing"
	"time"

	bt "cloud.google.com/go/bigtable"

	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// TestInitGCRule: init reports the family's garbage-collection rule as it
// is. A table whose family has an age or a version rule (set by hand, as
// with cbt setgcpolicy) is refused with exit 1, naming the rule and how to
// remove it, and left as it was; init --fix removes the rule and says so;
// init on a table without a rule says it has none.
func TestInitGCRule(t *testing.T) {
	emu, err := bigtable.StartEmulator("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	t.Setenv("BIGTABLE_EMULATOR_HOST", emu.Addr())
	ctx := context.Background()
	admin, err := bt.NewAdminClient(ctx, "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	rule := func(table string) string {
		t.Helper()
		info, err := admin.TableInfo(ctx, table)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range info.FamilyInfos {
			if f.Name == bigtable.Family {
				return f.GCPolicy
			}
		}
		t.Fatalf("no family %q in %s", bigtable.Family, table)
		return ""
	}

	out, errOut, code := runCLI(t, "init", "--bigtable", "p/i/fresh")
	if code != 0 || !strings.Contains(out, "no garbage-collection rule") {
		t.Fatalf("init of a new table: exit %d\n%s%s", code, out, errOut)
	}
	for _, tc := range []struct {
		table string
		rule  bt.GCPolicy
		text  string
	}{
		{"age", bt.MaxAgePolicy(30 * 24 * time.Hour), "age() > 30d"},
		{"versions", bt.MaxVersionsPolicy(1), "versions() > 1"},
		{"union", bt.UnionPolicy(bt.MaxAgePolicy(24*time.Hour), bt.MaxVersionsPolicy(5)), "(age() > 1d || versions() > 5)"},
	} {
		table := "p/i/" + tc.table
		if _, errOut, code := runCLI(t, "init", "--bigtable", table); code != 0 {
			t.Fatalf("init: exit %d: %s", code, errOut)
		}
		if err := admin.SetGCPolicy(ctx, tc.table, bigtable.Family, tc.rule); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := runCLI(t, "init", "--bigtable", table)
		if code != 1 || strings.Contains(out, "no garbage-collection rule") ||
			!strings.Contains(errOut, tc.text) || !strings.Contains(errOut, "init --bigtable "+table+" --fix") {
			t.Fatalf("init of a table whose family has the rule %s: exit %d\nstdout: %s\nstderr: %s\nwant exit 1 naming the rule and --fix", tc.text, code, out, errOut)
		}
		if got := rule(tc.table); got != tc.text {
			t.Fatalf("the refused init changed the rule to %q", got)
		}
		out, errOut, code = runCLI(t, "init", "--bigtable", table, "--fix")
		if code != 0 || !strings.Contains(out, "removed the garbage-collection rule "+tc.text) || !strings.Contains(out, "no garbage-collection rule") {
			t.Fatalf("init --fix: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
		}
		if got := rule(tc.table); got != "" {
			t.Fatalf("after init --fix the family has the rule %q", got)
		}
	}
	out, errOut, code = runCLI(t, "init", "--bigtable", "p/i/fresh", "--fix")
	if code != 0 || strings.Contains(out, "removed") || !strings.Contains(out, "no garbage-collection rule") {
		t.Fatalf("init --fix of a table without a rule: exit %d\n%s%s", code, out, errOut)
	}
}
