// Package rpcpb is the generated Go code of proto/percolator.proto: the
// messages and gRPC services of the percolator server. Do not edit:
// regenerate with go generate ./rpc/rpcpb (TestGeneratedCodeFresh fails
// when these files are stale).
package rpcpb

//go:generate go run ../../internal/protogen -root ../.. -out ../..
