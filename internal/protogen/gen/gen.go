// Package gen generates the Go code of proto/percolator.proto without
// protoc (see internal/protogen).
package gen

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/pluginpb"
)

// Module is this module's path; the plugins strip it from go_package to
// place files under the output directory.
const Module = "github.com/seed-992972ee/percolator"

// Files are the .proto files generated, relative to root/proto.
var Files = []string{"percolator.proto"}

// Plugins are the protoc plugins run, as go.mod tools.
var Plugins = []string{"protoc-gen-go", "protoc-gen-go-grpc"}

// Generate compiles root/proto/Files and writes the plugins' output under
// out.
func Generate(root, out string) error {
	comp := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{filepath.Join(root, "proto")}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := comp.Compile(context.Background(), Files...)
	if err != nil {
		return err
	}
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: Files,
		Parameter:      proto.String("module=" + Module),
	}
	for _, f := range compiled {
		req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(f))
	}
	in, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	for _, plugin := range Plugins {
		if err := run(root, out, plugin, in); err != nil {
			return fmt.Errorf("%s: %w", plugin, err)
		}
	}
	return nil
}

func run(root, out, plugin string, in []byte) error {
	cmd := exec.Command("go", "tool", plugin)
	cmd.Dir = root
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s", err, stderr.Bytes())
	}
	var resp pluginpb.CodeGeneratorResponse
	if err := proto.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return err
	}
	if resp.Error != nil {
		return fmt.Errorf("%s", resp.GetError())
	}
	for _, f := range resp.File {
		path := filepath.Join(out, filepath.FromSlash(f.GetName()))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
