package rpcpb_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-992972ee/percolator/internal/protogen/gen"
)

// TestGeneratedCodeFresh regenerates the code from proto/ into a temporary
// directory and fails when any committed file differs: edit the .proto,
// then go generate ./rpc/rpcpb.
func TestGeneratedCodeFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the protoc plugins")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := gen.Generate(root, out); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(out, "rpc", "rpcpb", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("generated nothing (%v)", err)
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%s is generated but not committed: run go generate ./rpc/rpcpb (%v)", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./rpc/rpcpb", name)
		}
	}
}
