package remote

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
)

// Options configures New.
type Options struct {
	// NoNonces sends every call without a nonce, so a call resent after a
	// lost reply may be applied twice. Only for measuring what nonces
	// cost, and for testing that the nonce test can fail.
	NoNonces bool
}

// Store is storage.Store over a percolator server. See doc.go.
type Store struct {
	conn *rpc.Conn
	opts Options

	closeOnce sync.Once
	closed    chan struct{}

	// renewMu serializes group renewals: calls refused together for one
	// expired group open one new group between them.
	renewMu sync.Mutex

	mu struct {
		sync.Mutex
		group [16]byte
		// next is the next call number; outstanding holds the numbers
		// whose reply has not been received; low is the lowest of them
		// (next when there is none).
		next, low   uint64
		outstanding map[uint64]struct{}
	}
}

var (
	_ storage.Store             = (*Store)(nil)
	_ storage.Batcher           = (*Store)(nil)
	_ storage.Counted           = (*Store)(nil)
	_ storage.Idempotent        = (*Store)(nil)
	_ storage.IdempotentBatcher = (*Store)(nil)
	_ storage.Compacter         = (*Store)(nil)
)

// New returns a store over conn, registering a fresh nonce group with the
// server (durably, before any call uses it). The Store does not close
// conn.
func New(ctx context.Context, conn *rpc.Conn, opts Options) (*Store, error) {
	s := &Store{conn: conn, opts: opts, closed: make(chan struct{})}
	s.mu.outstanding = map[uint64]struct{}{}
	if !opts.NoNonces {
		if err := s.openGroup(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// openGroup registers a fresh random group and restarts the numbering.
func (s *Store) openGroup(ctx context.Context) error {
	var g [16]byte
	if _, err := rand.Read(g[:]); err != nil {
		return err
	}
	err := s.conn.Do(ctx, func(ctx context.Context, _ int) error {
		_, err := s.conn.Storage.OpenNonceGroup(ctx, &rpcpb.OpenNonceGroupRequest{Group: g[:]})
		return err
	})
	if err != nil {
		return fmt.Errorf("remote: opening a nonce group: %w", err)
	}
	s.mu.Lock()
	s.mu.group, s.mu.next, s.mu.low = g, 1, 1
	clear(s.mu.outstanding)
	s.mu.Unlock()
	return nil
}

// renewGroup replaces the group old, which the server no longer knows,
// unless another call has replaced it already: opening another would
// restart the numbering under the calls begun in the new one.
func (s *Store) renewGroup(ctx context.Context, old [16]byte) error {
	s.renewMu.Lock()
	defer s.renewMu.Unlock()
	s.mu.Lock()
	current := s.mu.group
	s.mu.Unlock()
	if current != old {
		return nil
	}
	return s.openGroup(ctx)
}

// nonce numbers one call.
type nonce struct {
	group [16]byte
	seq   uint64
}

func (s *Store) begin() nonce {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := nonce{group: s.mu.group, seq: s.mu.next}
	s.mu.next++
	s.mu.outstanding[n.seq] = struct{}{}
	return n
}

// pb returns the call's wire nonce, with the current low-water mark.
func (s *Store) pb(n nonce) *rpcpb.Nonce {
	s.mu.Lock()
	low := s.mu.low
	if n.group != s.mu.group {
		low = n.seq // a call of an older group: its mark is unknown here
	}
	s.mu.Unlock()
	return &rpcpb.Nonce{Group: n.group[:], Seq: n.seq, LowWater: min(low, n.seq)}
}

// end marks the call's reply received (or given up on).
func (s *Store) end(n nonce) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n.group != s.mu.group {
		return
	}
	delete(s.mu.outstanding, n.seq)
	for s.mu.low < s.mu.next {
		if _, ok := s.mu.outstanding[s.mu.low]; ok {
			break
		}
		s.mu.low++
	}
}

func (s *Store) check() error {
	select {
	case <-s.closed:
		return storage.ErrClosed
	default:
		return nil
	}
}

// once sends a non-idempotent call with a nonce, resending it with the
// same nonce until the server answers: the server's nonce table runs it
// once. An expired group is replaced only while no attempt can have
// reached the server; otherwise the outcome is unknown.
func (s *Store) once(ctx context.Context, call func(ctx context.Context, n *rpcpb.Nonce) error) error {
	if s.opts.NoNonces {
		return s.conn.Do(ctx, func(ctx context.Context, _ int) error { return call(ctx, nil) })
	}
	for renewed := false; ; renewed = true {
		n := s.begin()
		last := 0
		err := s.conn.Do(ctx, func(ctx context.Context, attempt int) error {
			last = attempt
			return call(ctx, s.pb(n))
		})
		s.end(n)
		if err == nil || !strings.Contains(err.Error(), rpc.MsgUnknownGroup) {
			return err
		}
		// Refused, never applied; but an earlier attempt may have been.
		if last > 0 || renewed {
			return fmt.Errorf("%w: the server no longer knows this client's nonce group: %v", rpc.ErrOutcomeUnknown, err)
		}
		if gerr := s.renewGroup(ctx, n.group); gerr != nil {
			return gerr
		}
	}
}

// ReadRow implements storage.Store.
func (s *Store) ReadRow(ctx context.Context, row []byte, filter storage.Filter) (storage.Row, error) {
	if err := s.check(); err != nil {
		return storage.Row{}, err
	}
	if err := storage.CheckRead(ctx, row, filter); err != nil {
		return storage.Row{}, err
	}
	var resp *rpcpb.ReadRowResponse
	err := s.conn.Do(ctx, func(ctx context.Context, _ int) (err error) {
		resp, err = s.conn.Storage.ReadRow(ctx, &rpcpb.ReadRowRequest{Row: row, Filter: rpc.FilterToPB(filter)})
		return err
	})
	if err != nil {
		return storage.Row{}, err
	}
	return storage.Row{Key: row, Cells: rpc.CellsFromPB(resp.Cells)}, nil
}

// SafePoint implements txn.SafePointSource: the server's Ping says it
// (its clients may not read the reserved row it is kept in).
func (s *Store) SafePoint(ctx context.Context) (uint64, error) {
	ts, _, err := s.SafePointSampled(ctx)
	return ts, err
}

// SafePointSampled implements txn.SafePointSource: the safe point and
// when it was sampled (zero if unknown).
func (s *Store) SafePointSampled(ctx context.Context) (uint64, time.Time, error) {
	if err := s.check(); err != nil {
		return 0, time.Time{}, err
	}
	var resp *rpcpb.PingResponse
	err := s.conn.Do(ctx, func(ctx context.Context, _ int) (err error) {
		resp, err = s.conn.Storage.Ping(ctx, &rpcpb.PingRequest{})
		return err
	})
	if err != nil {
		return 0, time.Time{}, err
	}
	var sampled time.Time
	if ns := resp.GetSafePointSampledUnixNanos(); ns != 0 {
		sampled = time.Unix(0, ns)
	}
	return resp.GetSafePoint(), sampled, nil
}

// Scan implements storage.Store.
func (s *Store) Scan(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) error {
	_, err := s.ScanCounted(ctx, start, end, filter, limit, fn)
	return err
}

// ScanCounted implements storage.Counted. A stream broken by a failure
// the server may recover from is resumed after the last row delivered;
// every message received is progress, from which the retry budget counts
// again (rpc.Conn.Stream), so a scan that keeps receiving is resumed after
// any number of breaks, and one that receives nothing fails within the
// budget.
func (s *Store) ScanCounted(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) (uint64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if err := storage.CheckScan(start, end, filter, limit); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if len(filter) == 0 {
		return 0, nil
	}
	sc := scan{end: end, filter: rpc.FilterToPB(filter), limit: limit, from: start, fn: fn}
	err := s.conn.Stream(ctx, func(actx context.Context, _ int, progress func() func()) error {
		return sc.attempt(actx, s.conn.Storage, progress)
	})
	return sc.visited, err
}

// scan is the state of a Scan across its attempts.
type scan struct {
	end       []byte
	filter    []*rpcpb.Selector
	limit     int
	fn        func(storage.Row) bool
	from      []byte // where the next attempt starts
	delivered int
	visited   uint64
}

// attempt streams from sc.from until the end, the limit, fn's stop or a
// failure. The stream lives as long as actx: Stream bounds the wait for
// each message, not the whole scan.
func (sc *scan) attempt(actx context.Context, cl rpcpb.StorageClient, progress func() func()) error {
	req := &rpcpb.ScanRequest{Start: sc.from, End: sc.end, Filter: sc.filter}
	if sc.limit > 0 {
		if sc.delivered >= sc.limit {
			return nil
		}
		req.Limit = int64(sc.limit - sc.delivered)
	}
	stream, err := cl.Scan(actx, req)
	if err != nil {
		return err
	}
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		waitNext := progress() // fn's time is not the server's
		for _, r := range msg.Rows {
			sc.delivered++
			sc.from = append(append(make([]byte, 0, len(r.Key)+1), r.Key...), 0)
			if !sc.fn(storage.Row{Key: r.Key, Cells: rpc.CellsFromPB(r.Cells)}) {
				return nil
			}
		}
		if msg.Done {
			sc.visited += msg.Visited
			return nil
		}
		waitNext()
	}
}

// Mutate implements storage.Store. Mutate is idempotent (puts at given
// timestamps and deletes) but a late duplicate could undo a later write of
// the same cells, so it carries a nonce too.
func (s *Store) Mutate(ctx context.Context, row []byte, mutations ...storage.Mutation) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := storage.CheckWrite(ctx, row, mutations); err != nil || len(mutations) == 0 {
		return err
	}
	req := &rpcpb.MutateRequest{Row: row, Mutations: rpc.MutationsToPB(mutations)}
	return s.once(ctx, func(ctx context.Context, n *rpcpb.Nonce) error {
		req.Nonce = n
		_, err := s.conn.Storage.Mutate(ctx, req)
		return err
	})
}

// CheckAndMutate implements storage.Store, with a nonce: a resent call
// gets the branch of the run that applied.
func (s *Store) CheckAndMutate(ctx context.Context, row []byte, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	return s.checkAndMutate(ctx, row, predicate, nil, ifTrue, ifFalse, true)
}

// CheckAndMutateUnless implements storage.Unlessed, with a nonce.
func (s *Store) CheckAndMutateUnless(ctx context.Context, row []byte, predicate, unless storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	return s.checkAndMutate(ctx, row, predicate, unless, ifTrue, ifFalse, true)
}

// CheckAndMutateIdempotent implements storage.Idempotent: no nonce.
func (s *Store) CheckAndMutateIdempotent(ctx context.Context, row []byte, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	return s.checkAndMutate(ctx, row, predicate, nil, ifTrue, ifFalse, false)
}

func (s *Store) checkAndMutate(ctx context.Context, row []byte, predicate, unless storage.Filter, ifTrue, ifFalse []storage.Mutation, withNonce bool) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	if err := storage.CheckRead(ctx, row, predicate); err != nil {
		return false, err
	}
	if err := storage.ValidateFilter(unless); err != nil {
		return false, err
	}
	if err := errors.Join(storage.ValidateMutations(ifTrue), storage.ValidateMutations(ifFalse)); err != nil {
		return false, err
	}
	req := &rpcpb.CheckAndMutateRequest{Row: row, Predicate: rpc.FilterToPB(predicate), Unless: rpc.FilterToPB(unless), IfTrue: rpc.MutationsToPB(ifTrue), IfFalse: rpc.MutationsToPB(ifFalse)}
	var resp *rpcpb.CheckAndMutateResponse
	send := func(ctx context.Context, n *rpcpb.Nonce) (err error) {
		req.Nonce = n
		resp, err = s.conn.Storage.CheckAndMutate(ctx, req)
		return err
	}
	var err error
	if withNonce {
		err = s.once(ctx, send)
	} else {
		err = s.conn.Do(ctx, func(ctx context.Context, _ int) error { return send(ctx, nil) })
	}
	if err != nil {
		return false, err
	}
	return resp.Matched, nil
}

// MutateRows implements storage.Batcher, with a nonce: the server applies
// the batch once however often it is sent, so a late copy cannot undo a
// later write of its cells (storage.Batcher).
func (s *Store) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	return s.mutateRows(ctx, rows, true)
}

// MutateRowsIdempotent implements storage.IdempotentBatcher: no nonce. The
// caller vouches that the batch is safe to apply twice in any order.
func (s *Store) MutateRowsIdempotent(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	return s.mutateRows(ctx, rows, false)
}

func (s *Store) mutateRows(ctx context.Context, rows []storage.RowMutation, withNonce bool) ([]error, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	req := &rpcpb.MutateRowsRequest{Rows: make([]*rpcpb.RowMutation, len(rows))}
	for i := range rows {
		if err := storage.CheckWrite(ctx, rows[i].Row, rows[i].Mutations); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		req.Rows[i] = &rpcpb.RowMutation{Row: rows[i].Row, Mutations: rpc.MutationsToPB(rows[i].Mutations)}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	var resp *rpcpb.MutateRowsResponse
	send := func(ctx context.Context, n *rpcpb.Nonce) (err error) {
		req.Nonce = n
		resp, err = s.conn.Storage.MutateRows(ctx, req)
		return err
	}
	var err error
	if withNonce {
		err = s.once(ctx, send)
	} else {
		err = s.conn.Do(ctx, func(ctx context.Context, _ int) error { return send(ctx, nil) })
	}
	if err != nil {
		return nil, err
	}
	if len(resp.Errors) == 0 {
		return nil, nil
	}
	errs := make([]error, len(rows))
	for _, e := range resp.Errors {
		if e.Index < 0 || int(e.Index) >= len(rows) {
			continue
		}
		if e.InvalidArgument {
			errs[e.Index] = fmt.Errorf("%w: %s", storage.ErrInvalidArgument, e.Message)
		} else {
			errs[e.Index] = errors.New(e.Message)
		}
	}
	return errs, nil
}

// Increment implements storage.Store, with a nonce: a resent call gets the
// sum of the run that applied, and adds nothing.
func (s *Store) Increment(ctx context.Context, row []byte, family, qualifier string, delta int64) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if err := storage.CheckWrite(ctx, row, []storage.Mutation{storage.SetCell(family, qualifier, 0, nil)}); err != nil {
		return 0, err
	}
	req := &rpcpb.IncrementRequest{Row: row, Family: []byte(family), Qualifier: []byte(qualifier), Delta: delta}
	var resp *rpcpb.IncrementResponse
	err := s.once(ctx, func(ctx context.Context, n *rpcpb.Nonce) (err error) {
		req.Nonce = n
		resp, err = s.conn.Storage.Increment(ctx, req)
		return err
	})
	if err != nil {
		return 0, err
	}
	return resp.Value, nil
}

// CompactFamily implements storage.Compacter: the server's store compacts
// the family.
func (s *Store) CompactFamily(ctx context.Context, family string) error {
	if err := s.check(); err != nil {
		return err
	}
	if family == "" {
		return fmt.Errorf("%w: empty family", storage.ErrInvalidArgument)
	}
	return s.conn.Do(ctx, func(actx context.Context, _ int) error {
		_, err := s.conn.Storage.CompactFamily(ctx, &rpcpb.CompactFamilyRequest{Family: []byte(family)})
		return err
	})
}

// Close implements storage.Store. It does not close the connection; a
// second Close returns ErrClosed.
func (s *Store) Close() error {
	err := storage.ErrClosed
	s.closeOnce.Do(func() { close(s.closed); err = nil })
	return err
}

// GCPass is what a garbage collection pass on the server did.
type GCPass struct {
	SafePoint                      uint64
	Rows, Versions, Bytes, Skipped int
	Duration                       time.Duration
	Resumed                        bool // it finished an interrupted pass
}

// CollectGarbage asks the server to run one garbage collection pass over
// its store (dry: to count what one would remove). The server may first
// wait for a timestamp it sampled a lifetime ago.
func (s *Store) CollectGarbage(ctx context.Context, dry bool) (GCPass, error) {
	if err := s.check(); err != nil {
		return GCPass{}, err
	}
	var resp *rpcpb.CollectGarbageResponse
	err := s.conn.Do(ctx, func(ctx context.Context, _ int) (err error) {
		resp, err = s.conn.Storage.CollectGarbage(ctx, &rpcpb.CollectGarbageRequest{DryRun: dry})
		return err
	})
	if err != nil {
		return GCPass{}, err
	}
	return GCPass{SafePoint: resp.SafePoint, Rows: int(resp.Rows), Versions: int(resp.Versions), Bytes: int(resp.Bytes),
		Skipped: int(resp.Skipped), Duration: time.Duration(resp.DurationNs), Resumed: resp.Resumed}, nil
}
