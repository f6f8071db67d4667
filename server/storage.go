package server

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/txn"
)

// Limits on a request's shape (the message size is bounded too).
const (
	MaxMutations = 10000 // per row, and rows per MutateRows
	MaxSelectors = 4096
	scanBatch    = 64      // rows per Scan message
	scanBytes    = 1 << 20 // bytes per Scan message (about)
)

// storageService serves the storage model over the server's store.
type storageService struct {
	rpcpb.UnimplementedStorageServer
	srv *Server
}

func (s *storageService) st() *pebble.Store { return s.srv.store }

func checkFilter(f []*rpcpb.Selector, what string) error {
	if len(f) > MaxSelectors {
		return status.Errorf(codes.InvalidArgument, "%s: %d selectors, at most %d", what, len(f), MaxSelectors)
	}
	for i, sel := range f {
		if sel == nil {
			return status.Errorf(codes.InvalidArgument, "%s: selector %d is empty", what, i)
		}
		if sel.Limit < 0 {
			return status.Errorf(codes.InvalidArgument, "%s: selector %d has a negative limit", what, i)
		}
	}
	return nil
}

func checkMutations(ms []*rpcpb.Mutation, what string) error {
	if len(ms) > MaxMutations {
		return status.Errorf(codes.InvalidArgument, "%s: %d mutations, at most %d", what, len(ms), MaxMutations)
	}
	for i, m := range ms {
		if m == nil || m.Kind <= rpcpb.MutationKind_MUTATION_KIND_UNSPECIFIED || m.Kind > rpcpb.MutationKind_DELETE_ROW {
			return status.Errorf(codes.InvalidArgument, "%s: mutation %d has no valid kind", what, i)
		}
	}
	return nil
}

// firstError returns the first of errs that is not nil: each is a status
// already, which errors.Join would wrap into a status whose message
// repeats "rpc error: code = ..." before what is wrong.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkRow refuses an empty row, and a reserved one (storage.ReservedPrefix:
// the rows the server itself keeps, such as the oracle's mark and lease)
// with PermissionDenied: no client reads or writes them.
func checkRow(row []byte) error {
	if len(row) == 0 {
		return status.Error(codes.InvalidArgument, "empty row key")
	}
	if storage.IsReserved(row) {
		return status.Errorf(codes.PermissionDenied, "row %s is reserved for the server (rows beginning %q)", storage.QuoteRow(row), storage.ReservedPrefix)
	}
	return nil
}

// ReadRow implements rpcpb.StorageServer.
func (s *storageService) ReadRow(ctx context.Context, req *rpcpb.ReadRowRequest) (*rpcpb.ReadRowResponse, error) {
	if err := firstError(checkRow(req.Row), checkFilter(req.Filter, "filter")); err != nil {
		return nil, err
	}
	return s.readRow(ctx, req)
}

// readRow is ReadRow of a request already checked.
func (s *storageService) readRow(ctx context.Context, req *rpcpb.ReadRowRequest) (*rpcpb.ReadRowResponse, error) {
	return s.readRowFiltered(ctx, req.Row, rpc.FilterFromPB(req.Filter))
}

// readRowFiltered is readRow with its filter converted.
func (s *storageService) readRowFiltered(ctx context.Context, key []byte, f storage.Filter) (*rpcpb.ReadRowResponse, error) {
	// The index learns of a commit of the row in flight only once its
	// write returns: wait for it before asking (presence.go, invariant 2).
	if err := s.st().AwaitOnePhase(ctx, key); err != nil {
		return nil, s.srv.status(err)
	}
	filter := s.srv.locks.prune(key, f)
	if len(filter) == 0 && len(f) > 0 {
		return &rpcpb.ReadRowResponse{}, nil // only locks asked for, and none held
	}
	row, err := s.st().ReadRow(ctx, key, filter)
	if err != nil {
		return nil, s.srv.status(err)
	}
	return &rpcpb.ReadRowResponse{Cells: rpc.CellsToPB(row.Cells)}, nil
}

// Scan implements rpcpb.StorageServer: rows go out in batches; the last
// message carries the keys visited.
func (s *storageService) Scan(req *rpcpb.ScanRequest, stream grpc.ServerStreamingServer[rpcpb.ScanResponse]) error {
	if err := checkFilter(req.Filter, "filter"); err != nil {
		return err
	}
	if req.Limit < 0 {
		return status.Error(codes.InvalidArgument, "negative limit")
	}
	ctx := stream.Context()
	var (
		batch   = &rpcpb.ScanResponse{}
		size    int
		sendErr error
	)
	// The reserved rows are the tail of the keyspace: a scan stops short
	// of them, and one that starts among them is refused.
	end, ok := storage.UserRange(req.Start, req.End)
	if !ok {
		return status.Errorf(codes.PermissionDenied, "scan from %s starts among the rows reserved for the server (beginning %q)", storage.QuoteRow(req.Start), storage.ReservedPrefix)
	}
	emit := func(r storage.Row) bool {
		batch.Rows = append(batch.Rows, &rpcpb.ScanRow{Key: r.Key, Cells: rpc.CellsToPB(r.Cells)})
		size += len(r.Key)
		for i := range r.Cells {
			size += len(r.Cells[i].Value) + len(r.Cells[i].Qualifier) + 16
		}
		if len(batch.Rows) >= scanBatch || size >= scanBytes {
			if sendErr = stream.Send(batch); sendErr != nil {
				return false
			}
			batch, size = &rpcpb.ScanResponse{}, 0
		}
		return true
	}
	filter := rpc.FilterFromPB(req.Filter)
	var (
		visited uint64
		err     error
	)
	if err := s.st().AwaitAllOnePhase(ctx); err != nil {
		return s.srv.status(err) // the index must have seen the commits in flight
	}
	if rows, ok := s.srv.locks.rowsIn(req.Start, end, filter); ok {
		// Locks only: the rows the lock index names (presence.go).
		visited, err = s.scanRows(ctx, rows, filter, int(req.Limit), emit)
	} else {
		visited, err = s.st().ScanCounted(ctx, req.Start, end, filter, int(req.Limit), emit)
	}
	if sendErr != nil {
		return sendErr
	}
	if err != nil {
		return s.srv.status(err)
	}
	batch.Visited, batch.Done = visited, true
	return stream.Send(batch)
}

// scanRows is a scan of rows alone, in order: each read through filter,
// those with a cell selected passed to fn (at most limit, when it is
// positive) until fn returns false. visited counts the cells read.
func (s *storageService) scanRows(ctx context.Context, rows [][]byte, filter storage.Filter, limit int, fn func(storage.Row) bool) (uint64, error) {
	var visited uint64
	n := 0
	for _, row := range rows {
		r, err := s.st().ReadRow(ctx, row, filter)
		if err != nil {
			return visited, err
		}
		visited += uint64(len(r.Cells))
		if len(r.Cells) == 0 {
			continue
		}
		if !fn(r) {
			break
		}
		if n++; limit > 0 && n >= limit {
			break
		}
	}
	return visited, nil
}

// requestHash is the hash of req's body (its nonce cleared) and method: a
// number reused with another body is refused.
func requestHash(method string, req proto.Message, clear func()) ([hashLen]byte, error) {
	clear()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return [hashLen]byte{}, err
	}
	h := sha256.New()
	h.Write([]byte(method))
	h.Write(b)
	var out [hashLen]byte
	copy(out[:], h.Sum(nil))
	return out, nil
}

// nonceOf validates a call's nonce; ok is false when the call has none.
func nonceOf(n *rpcpb.Nonce) (g [GroupLen]byte, ok bool, err error) {
	if n == nil {
		return g, false, nil
	}
	if len(n.Group) != GroupLen {
		return g, false, status.Errorf(codes.InvalidArgument, "nonce group of %d bytes, want %d", len(n.Group), GroupLen)
	}
	copy(g[:], n.Group)
	return g, true, nil
}

// once runs apply through the nonce table when the call carries a nonce,
// else directly (with a recorder that records nothing).
func (s *storageService) once(ctx context.Context, method string, req proto.Message, nonce **rpcpb.Nonce, apply func(rec recorder) ([]byte, error)) ([]byte, bool, error) {
	n := *nonce
	g, ok, err := nonceOf(n)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		res, err := apply(nil)
		return res, false, s.srv.status(err)
	}
	hash, err := requestHash(method, req, func() { *nonce = nil })
	*nonce = n
	if err != nil {
		return nil, false, status.Errorf(codes.InvalidArgument, "request: %v", err)
	}
	res, replayed, err := s.srv.nonces.do(ctx, g, n.Seq, n.LowWater, hash, apply)
	if replayed {
		s.srv.metrics.replays.WithLabelValues(method).Inc()
	}
	return res, replayed, s.srv.status(err)
}

// records returns rec(result), or nil without a recorder.
func records(rec recorder, result []byte) []pebble.Record {
	if rec == nil {
		return nil
	}
	return rec(result)
}

// Mutate implements rpcpb.StorageServer.
func (s *storageService) Mutate(ctx context.Context, req *rpcpb.MutateRequest) (*rpcpb.MutateResponse, error) {
	if err := firstError(checkRow(req.Row), checkMutations(req.Mutations, "mutations")); err != nil {
		return nil, err
	}
	_, replayed, err := s.once(ctx, "Mutate", req, &req.Nonce, func(rec recorder) ([]byte, error) {
		return nil, s.st().MutateRecorded(ctx, req.Row, rpc.MutationsFromPB(req.Mutations), records(rec, nil))
	})
	if err != nil {
		return nil, err
	}
	return &rpcpb.MutateResponse{Replayed: replayed}, nil
}

// CheckAndMutate implements rpcpb.StorageServer.
func (s *storageService) CheckAndMutate(ctx context.Context, req *rpcpb.CheckAndMutateRequest) (*rpcpb.CheckAndMutateResponse, error) {
	if err := firstError(checkRow(req.Row), checkFilter(req.Predicate, "predicate"), checkFilter(req.Unless, "unless"),
		checkMutations(req.IfTrue, "if_true"), checkMutations(req.IfFalse, "if_false")); err != nil {
		return nil, err
	}
	ifTrue, ifFalse := rpc.MutationsFromPB(req.IfTrue), rpc.MutationsFromPB(req.IfFalse)
	res, replayed, err := s.once(ctx, "CheckAndMutate", req, &req.Nonce, func(rec recorder) ([]byte, error) {
		matched, err := s.st().CheckAndMutateRecorded(ctx, req.Row, rpc.FilterFromPB(req.Predicate), rpc.FilterFromPB(req.Unless), ifTrue, ifFalse,
			func(matched bool) []pebble.Record { return records(rec, []byte{boolByte(matched)}) })
		if err != nil {
			return nil, err
		}
		s.srv.countBranch(ifTrue, ifFalse, matched)
		return []byte{boolByte(matched)}, nil
	})
	if err != nil {
		return nil, err
	}
	return &rpcpb.CheckAndMutateResponse{Matched: len(res) == 1 && res[0] == 1, Replayed: replayed}, nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// MutateRows implements rpcpb.StorageServer.
func (s *storageService) MutateRows(ctx context.Context, req *rpcpb.MutateRowsRequest) (*rpcpb.MutateRowsResponse, error) {
	if len(req.Rows) > MaxMutations {
		return nil, status.Errorf(codes.InvalidArgument, "%d rows, at most %d", len(req.Rows), MaxMutations)
	}
	rows, err := rowMutations(req.Rows)
	if err != nil {
		return nil, err
	}
	// The server's store commits the rows in one batch, all or none: a
	// call either fails whole or succeeds for every row, so a nonce's
	// record holds no result, and a replay answers success.
	_, replayed, err := s.once(ctx, "MutateRows", req, &req.Nonce, func(rec recorder) ([]byte, error) {
		return nil, s.st().MutateRowsRecorded(ctx, rows, records(rec, nil))
	})
	if err != nil {
		return nil, err
	}
	return &rpcpb.MutateRowsResponse{Replayed: replayed}, nil
}

// rowMutations converts and checks a request's row mutations.
func rowMutations(pbs []*rpcpb.RowMutation) ([]storage.RowMutation, error) {
	rows := make([]storage.RowMutation, len(pbs))
	for i, r := range pbs {
		if r == nil {
			return nil, status.Errorf(codes.InvalidArgument, "row %d is empty", i)
		}
		if err := firstError(checkRow(r.Row), checkMutations(r.Mutations, fmt.Sprintf("row %d", i))); err != nil {
			return nil, err
		}
		rows[i] = storage.RowMutation{Row: r.Row, Mutations: rpc.MutationsFromPB(r.Mutations)}
	}
	return rows, nil
}

// Increment implements rpcpb.StorageServer.
func (s *storageService) Increment(ctx context.Context, req *rpcpb.IncrementRequest) (*rpcpb.IncrementResponse, error) {
	if err := checkRow(req.Row); err != nil {
		return nil, err
	}
	res, replayed, err := s.once(ctx, "Increment", req, &req.Nonce, func(rec recorder) ([]byte, error) {
		sum, err := s.st().IncrementRecorded(ctx, req.Row, string(req.Family), string(req.Qualifier), req.Delta, func(sum int64) []pebble.Record {
			return records(rec, binary.BigEndian.AppendUint64(nil, uint64(sum)))
		})
		return binary.BigEndian.AppendUint64(nil, uint64(sum)), err
	})
	if err != nil {
		return nil, err
	}
	if len(res) != 8 {
		return nil, status.Error(codes.Internal, "malformed nonce record")
	}
	return &rpcpb.IncrementResponse{Value: int64(binary.BigEndian.Uint64(res)), Replayed: replayed}, nil
}

// OpenNonceGroup implements rpcpb.StorageServer.
func (s *storageService) OpenNonceGroup(ctx context.Context, req *rpcpb.OpenNonceGroupRequest) (*rpcpb.OpenNonceGroupResponse, error) {
	if len(req.Group) != GroupLen {
		return nil, status.Errorf(codes.InvalidArgument, "nonce group of %d bytes, want %d", len(req.Group), GroupLen)
	}
	var g [GroupLen]byte
	copy(g[:], req.Group)
	if err := s.srv.nonces.open(ctx, g); err != nil {
		return nil, s.srv.status(err)
	}
	return &rpcpb.OpenNonceGroupResponse{GraceMs: s.srv.opts.NonceGrace.Milliseconds()}, nil
}

// CompactFamily implements rpcpb.StorageServer.
func (s *storageService) CompactFamily(ctx context.Context, req *rpcpb.CompactFamilyRequest) (*rpcpb.CompactFamilyResponse, error) {
	if err := s.st().CompactFamily(ctx, string(req.Family)); err != nil {
		return nil, s.srv.status(err)
	}
	return &rpcpb.CompactFamilyResponse{}, nil
}

// Now implements rpcpb.StorageServer: the time by its store's clock.
func (s *storageService) Now(ctx context.Context, _ *rpcpb.NowRequest) (*rpcpb.NowResponse, error) {
	t, err := s.st().Now(ctx)
	if err != nil {
		return nil, s.srv.status(err)
	}
	return &rpcpb.NowResponse{UnixNanos: t.UnixNano()}, nil
}

// Ping implements rpcpb.StorageServer.
func (s *storageService) Ping(ctx context.Context, _ *rpcpb.PingRequest) (*rpcpb.PingResponse, error) {
	sp, err := txn.ReadSafePointInfo(ctx, s.srv.store)
	if err != nil {
		return nil, grpcStatus(err)
	}
	resp := &rpcpb.PingResponse{FormatVersion: s.srv.format, SafePoint: sp.TS, SyncedWrites: s.srv.store.SyncedWrites()}
	if !sp.Sampled.IsZero() {
		resp.SafePointSampledUnixNanos = sp.Sampled.UnixNano()
	}
	return resp, nil
}
