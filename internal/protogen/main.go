// Command protogen regenerates rpc/rpcpb from proto/percolator.proto with
// nothing but Go: protocompile parses the .proto (no protoc needed), and
// the two plugins run as the module's pinned tools (go.mod's tool lines:
// protoc-gen-go and protoc-gen-go-grpc), fed a CodeGeneratorRequest on
// stdin as protoc would.
//
//	go run ./internal/protogen [-out DIR]
//
// -out (default: the module root) is where the files are written, under
// their package path (rpc/rpcpb/...); the staleness test writes them to a
// temporary directory and compares.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/seed-992972ee/percolator/internal/protogen/gen"
)

func main() {
	out := flag.String("out", ".", "directory to write rpc/rpcpb/... under")
	root := flag.String("root", ".", "the module root (holds proto/ and go.mod)")
	flag.Parse()
	if err := gen.Generate(*root, *out); err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
}
