package server_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
)

// services are every service the server registers. The methods tested are
// read from their descriptors, so a method added later is tested too (and
// fails the test until it has a request in authRequests).
var services = []grpc.ServiceDesc{rpcpb.Storage_ServiceDesc, rpcpb.Oracle_ServiceDesc, rpcpb.Coord_ServiceDesc, healthpb.Health_ServiceDesc}

// authRequests returns, for every method, a request that would change
// something (or tell something) if the server ran it: sid is a live
// session holding the lock "held".
func authRequests(sid string) map[string]proto.Message {
	put := []*rpcpb.Mutation{{Kind: rpcpb.MutationKind_PUT, Family: []byte("c"), Qualifier: []byte("x"), Ts: 9, Value: []byte("intruder")}}
	all := []*rpcpb.Selector{{Family: []byte("c"), AllQualifiers: true}}
	group := bytes.Repeat([]byte{7}, server.GroupLen)
	return map[string]proto.Message{
		"/percolator.v1.Storage/ReadRow":        &rpcpb.ReadRowRequest{Row: []byte("r"), Filter: all},
		"/percolator.v1.Storage/Scan":           &rpcpb.ScanRequest{Filter: all},
		"/percolator.v1.Storage/Mutate":         &rpcpb.MutateRequest{Row: []byte("r"), Mutations: put},
		"/percolator.v1.Storage/CheckAndMutate": &rpcpb.CheckAndMutateRequest{Row: []byte("r"), Predicate: all, IfTrue: put, IfFalse: put},
		"/percolator.v1.Storage/MutateRows":     &rpcpb.MutateRowsRequest{Rows: []*rpcpb.RowMutation{{Row: []byte("r"), Mutations: put}}},
		"/percolator.v1.Storage/Increment":      &rpcpb.IncrementRequest{Row: []byte("ctr"), Family: []byte("c"), Qualifier: []byte("n"), Delta: 100},
		"/percolator.v1.Storage/CompactFamily":  &rpcpb.CompactFamilyRequest{Family: []byte("c")},
		"/percolator.v1.Storage/OpenNonceGroup": &rpcpb.OpenNonceGroupRequest{Group: group},
		"/percolator.v1.Storage/Ping":           &rpcpb.PingRequest{},
		"/percolator.v1.Storage/Now":            &rpcpb.NowRequest{},
		"/percolator.v1.Oracle/Allocate":        &rpcpb.AllocateRequest{Count: 1000},
		"/percolator.v1.Oracle/AllocateStream":  &rpcpb.AllocateRequest{Count: 1000},
		"/percolator.v1.Coord/OpenSession":      &rpcpb.OpenSessionRequest{Owner: "intruder", TtlMs: 10000},
		"/percolator.v1.Coord/KeepAlive":        &rpcpb.KeepAliveRequest{Session: sid},
		"/percolator.v1.Coord/CloseSession":     &rpcpb.CloseSessionRequest{Session: sid},
		"/percolator.v1.Coord/Alive":            &rpcpb.AliveRequest{Owner: "owner"},
		"/percolator.v1.Coord/TryLock":          &rpcpb.TryLockRequest{Session: sid, Key: "free"},
		"/percolator.v1.Coord/Unlock":           &rpcpb.UnlockRequest{Session: sid, Key: "held"},
		"/percolator.v1.Coord/Oldest":           &rpcpb.OldestRequest{},
		"/percolator.v1.Storage/CollectGarbage": &rpcpb.CollectGarbageRequest{DryRun: true},
		"/percolator.v1.Storage/ReadRows":       &rpcpb.ReadRowsRequest{Reads: []*rpcpb.ReadRowRequest{{Row: []byte("r"), Filter: all}}},
		"/percolator.v1.Storage/ReadRowsFresh":  &rpcpb.ReadRowsRequest{Reads: []*rpcpb.ReadRowRequest{{Row: []byte("r"), Filter: all}}},
		"/percolator.v1.Storage/CheckAndMutateRows": &rpcpb.CheckAndMutateRowsRequest{Checks: []*rpcpb.RowCheck{
			{Row: []byte("r"), Predicate: all, IfTrue: put, IfFalse: put}}},
		// The epoch of a first run: a server on a fresh directory runs 1.
		"/percolator.v1.Storage/CheckAndMutateInEpoch": &rpcpb.CheckAndMutateInEpochRequest{Epoch: 1,
			Check: &rpcpb.RowCheck{Row: []byte("r"), Predicate: all, IfTrue: put, IfFalse: put}},
		"/percolator.v1.Storage/CommitInEpoch": &rpcpb.CommitInEpochRequest{Epoch: 1,
			Check: &rpcpb.RowCheck{Row: []byte("r"), Predicate: all, IfTrue: put}, Stamped: []*rpcpb.RowMutation{{Row: []byte("r"), Mutations: put}}},
		"/percolator.v1.Storage/CommitOnePhase": &rpcpb.CommitOnePhaseRequest{Row: []byte("r1p"), Predicate: all, Stamped: put},
		"/percolator.v1.Storage/PrewriteAsync": &rpcpb.PrewriteAsyncRequest{Checks: []*rpcpb.AsyncCheck{
			{Row: []byte("ra"), Predicate: all, Stamped: put}}},
		"/grpc.health.v1.Health/Check": &healthpb.HealthCheckRequest{},
		"/grpc.health.v1.Health/List":  &healthpb.HealthListRequest{},
		"/grpc.health.v1.Health/Watch": &healthpb.HealthCheckRequest{},
	}
}

// newResponse returns an empty response message of the method.
func newResponse(t *testing.T, service, method string) proto.Message {
	t.Helper()
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		t.Fatal(err)
	}
	m := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method))
	if m == nil {
		t.Fatalf("%s has no method %s", service, method)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
	if err != nil {
		t.Fatal(err)
	}
	return mt.New().Interface()
}

// call calls method with req on cc, whatever its kind, and returns the
// error.
func call(t *testing.T, cc *grpc.ClientConn, md metadata.MD, svc grpc.ServiceDesc, method string, stream *grpc.StreamDesc, req proto.Message) error {
	t.Helper()
	full := "/" + svc.ServiceName + "/" + method
	c := metadata.NewOutgoingContext(ctx, md)
	resp := newResponse(t, svc.ServiceName, method)
	if stream == nil {
		return cc.Invoke(c, full, req, resp)
	}
	s, err := cc.NewStream(c, stream, full)
	if err != nil {
		return err
	}
	// A stream the server has already refused answers SendMsg with io.EOF;
	// gRPC then gives the status to RecvMsg, so any send error falls
	// through to it.
	if err := s.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_ = s.CloseSend()
	return s.RecvMsg(resp)
}

// TestAuthEveryMethod: with a token set, every method of every service,
// called without the token or with a wrong one, is refused as
// Unauthenticated and changes nothing: the store's cells and records, the
// oracle's position, sessions and locks.
func TestAuthEveryMethod(t *testing.T) {
	const token = "s3cret"
	srv := servertest.Start(t, server.Options{Token: token}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{Token: token})
	st := servertest.Store(t, conn, remote.Options{})
	if _, err := st.Increment(ctx, []byte("ctr"), "c", "n", 1); err != nil {
		t.Fatal(err)
	}
	if err := st.Mutate(ctx, []byte("r"), storage.SetCell("c", "x", 1, []byte("v"))); err != nil {
		t.Fatal(err)
	}
	sess, err := conn.Coord.OpenSession(ctx, &rpcpb.OpenSessionRequest{Owner: "owner", TtlMs: 60000})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := conn.Coord.TryLock(ctx, &rpcpb.TryLockRequest{Session: sess.Session, Key: "held"}); err != nil || r.Held {
		t.Fatalf("TryLock: %v, %v", r, err)
	}
	settle(t, srv)
	before, last := snapshot(t, srv), allocate(t, conn)
	coordState := func() [2]float64 {
		return [2]float64{metric(t, srv, "percolator_sessions"), metric(t, srv, "percolator_advisory_locks")}
	}
	coordBefore := coordState()

	reqs := authRequests(sess.Session)
	cc := rawConn(t, srv.Addr)
	creds := map[string]metadata.MD{
		"no token":     nil,
		"wrong token":  metadata.Pairs(rpc.TokenHeader, "Bearer wrong"),
		"token prefix": metadata.Pairs(rpc.TokenHeader, "Bearer "+token[:3]),
		"empty":        metadata.Pairs(rpc.TokenHeader, ""),
	}
	tested := 0
	for _, svc := range services {
		type method struct {
			name   string
			stream *grpc.StreamDesc
		}
		var methods []method
		for _, m := range svc.Methods {
			methods = append(methods, method{name: m.MethodName})
		}
		for i := range svc.Streams {
			methods = append(methods, method{name: svc.Streams[i].StreamName, stream: &svc.Streams[i]})
		}
		for _, m := range methods {
			full := "/" + svc.ServiceName + "/" + m.name
			req, ok := reqs[full]
			if !ok {
				t.Errorf("%s: no request in authRequests: add one", full)
				continue
			}
			tested++
			for name, md := range creds {
				wantCode(t, full+" "+name, call(t, cc, md, svc, m.name, m.stream, req), codes.Unauthenticated, "token")
			}
		}
	}
	if tested != len(reqs) {
		t.Errorf("tested %d methods, authRequests has %d: a method is gone from the services", tested, len(reqs))
	}
	unchanged(t, srv, conn, before, last)
	if got := coordState(); got != coordBefore {
		t.Errorf("sessions and locks went from %v to %v", coordBefore, got)
	}
	if r, err := conn.Coord.KeepAlive(ctx, &rpcpb.KeepAliveRequest{Session: sess.Session}); err != nil {
		t.Errorf("the session did not survive: %v, %v", r, err)
	}
	// The right token, as sent by rpc.Dial, is accepted on every service.
	if _, err := healthpb.NewHealthClient(cc).Check(metadata.NewOutgoingContext(ctx, metadata.Pairs(rpc.TokenHeader, "Bearer "+token)), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health with the token: %v", err)
	}
}
