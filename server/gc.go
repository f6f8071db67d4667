package server

import (
	"context"
	"log/slog"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// gcStore is the server's store as its garbage collector's client sees
// it: not exclusive (the lock index holds the store's apply hook, and the
// server's clients read it too), and compactable.
type gcStore struct {
	storage.Store
	storage.Compacter
	storage.Deferred
	storage.Reserver
}

// sessionLiveness judges lock owners by the server's sessions, as its
// clients' Alive calls do.
type sessionLiveness struct{ c *coordService }

func (l sessionLiveness) Alive(ctx context.Context, owner string) (bool, error) {
	resp, err := l.c.Alive(ctx, &rpcpb.AliveRequest{Owner: owner})
	if err != nil {
		return true, err
	}
	return resp.Alive, nil
}

// startCollector starts the background garbage collector (txn/doc.go,
// "Garbage collection"): a client of the store with the server's oracle,
// judging lock owners by the sessions, holding the safe point at or below
// the oldest start_ts the live sessions publish. Its deletions go through
// the store's apply hook, so the lock index drops what they remove. Its
// samples live in memory: after a restart it collects nothing for one
// lifetime, longer than the restart grace in which clients renew their
// sessions and publish again.
func (s *Server) startCollector(ctx context.Context) error {
	c, err := txn.NewClient(ctx, gcStore{s.store, s.store, s.store, s.store}, oracle.NewClient(s.alloc), sessionLiveness{s.coord},
		txn.Options{Owner: "server-gc/" + coord.NewOwnerID(), Logger: s.log.With(slog.String("role", "gc"))})
	if err != nil {
		return err
	}
	s.gc = c
	cctx, cancel := context.WithCancel(context.Background())
	s.gcStop = cancel
	if s.opts.DisableGC {
		return nil // CollectGarbage still runs a pass
	}
	s.gcDone.Add(1)
	go func() {
		defer s.gcDone.Done()
		_ = c.RunCollector(cctx, s.collectorOptions())
	}()
	return nil
}

func (s *Server) collectorOptions() txn.CollectorOptions {
	return txn.CollectorOptions{Lifetime: s.opts.GCLifetime, Oldest: s.oldestNeeded}
}

// CollectGarbage implements rpcpb.StorageServer: one pass of the
// collector, which may first wait for a sample a lifetime old (after the
// server's start) and for the new safe point's delay.
func (s *storageService) CollectGarbage(ctx context.Context, req *rpcpb.CollectGarbageRequest) (*rpcpb.CollectGarbageResponse, error) {
	p, err := s.srv.gc.CollectOnce(ctx, s.srv.collectorOptions(), req.DryRun)
	if err != nil {
		return nil, grpcStatus(err)
	}
	return &rpcpb.CollectGarbageResponse{SafePoint: p.SafePoint, Rows: int64(p.Rows), Versions: int64(p.Versions), Bytes: int64(p.Bytes),
		Skipped: int64(p.Skipped), DurationNs: int64(p.Duration), Resumed: p.Resumed}, nil
}

// oldestNeeded is the oldest start_ts a live session published.
func (s *Server) oldestNeeded(context.Context) (uint64, bool, error) {
	o, _ := s.coord.oldest()
	return o, o != 0, nil
}

// stopCollector stops the collector and waits for its pass in flight.
func (s *Server) stopCollector() {
	if s.gc == nil {
		return
	}
	s.gcStop()
	s.gcDone.Wait()
	s.gc.Close()
}
