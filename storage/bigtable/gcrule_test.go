package bigtable_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	bt "cloud.google.com/go/bigtable"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/bigtable"
	"github.com/seed-992972ee/percolator/storage/bigtable/bttesting"
)

// gcRules are garbage-collection rules a table's family may have been
// given by hand (cbt setgcpolicy, the console): every one of them deletes
// protocol cells, whose times are instants in 1970.
var gcRules = []struct {
	name string
	rule bt.GCPolicy
	text string // as Bigtable prints it
}{
	{"age", bt.MaxAgePolicy(7 * 24 * time.Hour), "age() > 7d"},
	{"versions", bt.MaxVersionsPolicy(3), "versions() > 3"},
	{"union", bt.UnionPolicy(bt.MaxAgePolicy(24*time.Hour), bt.MaxVersionsPolicy(1)), "(age() > 1d || versions() > 1)"},
	{"intersection", bt.IntersectionPolicy(bt.MaxAgePolicy(time.Hour), bt.MaxVersionsPolicy(2)), "(age() > 1h && versions() > 2)"},
}

// adminClient is an admin client of the emulator, as cbt would be.
func adminClient(t *testing.T, emu *bigtable.Emulator) *bt.AdminClient {
	t.Helper()
	t.Setenv("BIGTABLE_EMULATOR_HOST", emu.Addr())
	admin, err := bt.NewAdminClient(context.Background(), "test", "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	return admin
}

// familyRule is the family's rule as Bigtable prints it ("" for none).
func familyRule(t *testing.T, admin *bt.AdminClient, table string) string {
	t.Helper()
	info, err := admin.TableInfo(context.Background(), table)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range info.FamilyInfos {
		if f.Name == bigtable.Family {
			return f.GCPolicy
		}
	}
	t.Fatalf("table %s has no family %q", table, bigtable.Family)
	return ""
}

// TestGCRuleRefused: a table whose family has a garbage-collection rule —
// an age rule (which deletes every cell: their times are in 1970), a
// version rule (which deletes versions snapshots still read), a union or
// an intersection of them — is refused by Open and by Init with
// ErrGCRule, naming the rule and the commands that remove it; the refusal
// changes nothing. RemoveGCRule removes it and says which it removed;
// Open then succeeds.
func TestGCRuleRefused(t *testing.T) {
	emu := bttesting.Start(t)
	admin := adminClient(t, emu)
	ctx := context.Background()
	for i, tc := range gcRules {
		t.Run(tc.name, func(t *testing.T) {
			table := fmt.Sprintf("gc%d", i)
			opts := bttesting.Options(t, emu, table)
			if err := bigtable.Init(ctx, opts); err != nil {
				t.Fatal(err)
			}
			if err := admin.SetGCPolicy(ctx, table, bigtable.Family, tc.rule); err != nil {
				t.Fatal(err)
			}
			if got := familyRule(t, admin, table); got != tc.text {
				t.Fatalf("the emulator reports the rule as %q, want %q", got, tc.text)
			}
			for name, call := range map[string]func() error{
				"Open": func() error {
					s, err := bigtable.Open(ctx, opts)
					if err == nil {
						s.Close()
					}
					return err
				},
				"Init": func() error { return bigtable.Init(ctx, opts) },
			} {
				err := call()
				if !errors.Is(err, bigtable.ErrGCRule) {
					t.Fatalf("%s of a table whose family has the rule %s: %v, want ErrGCRule", name, tc.text, err)
				}
				msg := err.Error()
				for _, want := range []string{tc.text, "percolator init --bigtable test/test/" + table + " --fix", "cbt -project test -instance test setgcpolicy " + table + " p never"} {
					if !strings.Contains(msg, want) {
						t.Errorf("%s: %q does not say %q", name, msg, want)
					}
				}
				if got := familyRule(t, admin, table); got != tc.text {
					t.Fatalf("%s changed the rule to %q", name, got)
				}
			}
			removed, err := bigtable.RemoveGCRule(ctx, opts)
			if err != nil || removed != tc.text {
				t.Fatalf("RemoveGCRule: %q, %v; want %q removed", removed, err, tc.text)
			}
			if got := familyRule(t, admin, table); got != "" {
				t.Fatalf("after RemoveGCRule the family has the rule %q", got)
			}
			if removed, err := bigtable.RemoveGCRule(ctx, opts); err != nil || removed != "" {
				t.Fatalf("RemoveGCRule again: %q, %v; want nothing removed", removed, err)
			}
			s, err := bigtable.Open(ctx, opts)
			if err != nil {
				t.Fatalf("Open after the rule was removed: %v", err)
			}
			defer s.Close()
			if err := s.Mutate(ctx, []byte("r"), storage.SetCell("f", "q", 1, []byte("v"))); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := bigtable.RemoveGCRule(ctx, bttesting.Options(t, emu, "absent")); !errors.Is(err, bigtable.ErrNoTable) {
		t.Fatalf("RemoveGCRule of a missing table: %v, want ErrNoTable", err)
	}
}
