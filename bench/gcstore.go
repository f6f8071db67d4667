package bench

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/bigtable"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/txn"
)

// gcStore is one store of the gc figure: a DB on it, and the store
// beneath the DB read directly, to count what the collector leaves.
type gcStore struct {
	db *percolator.DB
	// raw is the store the DB keeps its cells in, read directly: the
	// embedded Pebble store, the in-process server's, the emulator's
	// table.
	raw storage.Store
	// size is the store's bytes: its directory's (Pebble), or its write
	// and data cells' (the Bigtable emulator, which keeps them in memory);
	// and of those, its write-ahead log's (0 without one).
	size func(context.Context) (total, log int64, err error)
	// sizeOf says what size measures, for the figure's line; withLog
	// whether the store has a log.
	sizeOf  string
	withLog bool
	close   func()
}

// gcSample is what a store holds at one moment: its versions (the cells
// of the write and data families: every write record and every value),
// their bytes (cellBytes: what the store holds for them, whatever its
// files' state), and its bytes as the store measures them, and its log's
// of those (gcStore.size).
type gcSample struct{ versions, cellBytes, bytes, logBytes int64 }

func (s *gcStore) sample(ctx context.Context) (gcSample, error) {
	n, err := countVersions(ctx, s.raw)
	if err != nil {
		return gcSample{}, err
	}
	cb, err := cellBytes(ctx, s.raw)
	if err != nil {
		return gcSample{}, err
	}
	b, log, err := s.size(ctx)
	return gcSample{versions: n, cellBytes: cb, bytes: b, logBytes: log}, err
}

// versionsFilter selects every version of the protocol's write records
// and data: what the collector removes.
var versionsFilter = storage.Filter{
	{Family: txn.FamilyWrite, AllQualifiers: true},
	{Family: txn.FamilyData, AllQualifiers: true},
}

// countVersions counts the cells versionsFilter selects, with one raw
// scan of the whole store.
func countVersions(ctx context.Context, st storage.Store) (int64, error) {
	var n int64
	err := st.Scan(ctx, nil, nil, versionsFilter, 0, func(r storage.Row) bool {
		n += int64(len(r.Cells))
		return true
	})
	return n, err
}

// cellBytes sums, over the cells versionsFilter selects, their row, column
// and value bytes and 8 for the timestamp: the bytes a store without
// files (the emulator) holds for them.
func cellBytes(ctx context.Context, st storage.Store) (int64, error) {
	var n int64
	err := st.Scan(ctx, nil, nil, versionsFilter, 0, func(r storage.Row) bool {
		for _, c := range r.Cells {
			n += int64(len(r.Key) + len(c.Family) + len(c.Qualifier) + 8 + len(c.Value))
		}
		return true
	})
	return n, err
}

// dirBytes returns the size of the regular files under dir, a Pebble
// store's tables, log and manifest, and of its log files (*.log: the live
// log, and those Pebble keeps to recycle, at the size they grew to). A
// file Pebble deletes while it is walked is not counted.
func dirBytes(dir string) func(context.Context) (total, log int64, err error) {
	return func(context.Context) (n, log int64, err error) {
		err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			fi, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err == nil {
				n += fi.Size()
			}
			if err == nil && filepath.Ext(path) == ".log" {
				log += fi.Size()
			}
			return err
		})
		return n, log, err
	}
}

// gcOpener opens a new store of the gc figure, named name: with its
// collector running at lifetime (collect), or with none running (DB.GC
// still runs a pass, at lifetime).
type gcOpener func(ctx context.Context, name string, lifetime time.Duration, collect bool) (*gcStore, error)

// gcOpener returns the suite's opener, and a line saying where the
// figure measures when that is not the suite's target ("" when it is).
func (b *runner) gcOpener() (gcOpener, string) {
	switch b.opts.Suite() {
	case Server:
		return b.openGCServer, "gc:       measured on servers this figure starts in process (server.Open in the scratch directory, on 127.0.0.1), not on " +
			b.opts.Server.Addr + ": each store needs its own collector setting, and the figure reads each store's cells and directory"
	case Bigtable:
		note := ""
		if !b.opts.BigtableEmulator {
			note = "gc:       measured on Bigtable emulators started in process, not on " + b.opts.Bigtable +
				": each measurement needs empty tables, and bench deletes no table"
		}
		return b.openGCBigtable, note
	}
	return b.openGCEmbedded, ""
}

// warnLogger passes the warnings of the figure's stores to Options.Log.
func (b *runner) warnLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b.opts.Log, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// openGCEmbedded opens a Pebble store in a directory of its own and a DB
// on it, as Options.Dir does (the DB then owns it: its collector runs in
// the background unless DisableGC), so that the figure can read it too.
func (b *runner) openGCEmbedded(ctx context.Context, name string, lifetime time.Duration, collect bool) (*gcStore, error) {
	dir := filepath.Join(b.opts.Dir, "gc-"+name)
	st, err := pebble.Open(filepath.Join(dir, "store"), pebble.Options{Logger: b.warnLogger()})
	if err != nil {
		return nil, err
	}
	db, err := percolator.Open(ctx, percolator.Options{Store: st, GCLifetime: lifetime, DisableGC: !collect, Logger: b.warnLogger()})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return &gcStore{db: db, raw: st, size: dirBytes(dir), sizeOf: "directory", withLog: true,
		close: func() { _ = db.Close(); _ = st.Close() }}, nil
}

// openGCServer starts a server in a directory of its own, serving on
// loopback, and opens a DB on it: the server collects in the background
// unless DisableGC, and runs DB.GC's pass.
func (b *runner) openGCServer(ctx context.Context, name string, lifetime time.Duration, collect bool) (*gcStore, error) {
	dir := filepath.Join(b.opts.Dir, "gc-"+name)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv, err := server.Open(ctx, server.Options{Dir: dir, RegistryVersion: observer.StoredVersion, Logger: b.warnLogger(),
		GCLifetime: lifetime, DisableGC: !collect})
	if err != nil {
		_ = lis.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}
	db, err := percolator.Open(ctx, percolator.Options{Server: lis.Addr().String(), Logger: b.warnLogger()})
	if err != nil {
		stop()
		return nil, err
	}
	return &gcStore{db: db, raw: srv.Store(), size: dirBytes(dir), sizeOf: "directory", withLog: true,
		close: func() { _ = db.Close(); stop() }}, nil
}

// openGCBigtable starts an emulator of its own, with the suite's table
// and a DB on it as the other Bigtable figures open theirs; with collect,
// the DB runs the collector in the background as a worker does
// (cluster.DB.RunGC, here without etcd's advisory lock: one collector).
func (b *runner) openGCBigtable(ctx context.Context, _ string, lifetime time.Duration, collect bool) (*gcStore, error) {
	opts := b.btOpts
	var cl closers
	emu, err := bigtable.StartEmulator("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	cl.add(emu.Close)
	opts.Emulator = emu.Addr()
	db, st, err := openBigtableDB(ctx, opts, &rpcCounter{n: map[string]int{}}, percolator.Options{GCLifetime: lifetime, Logger: b.warnLogger()}, nil, &cl)
	if err != nil {
		cl.closeAll()
		return nil, err
	}
	if collect {
		gctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = db.RunGC(gctx, percolator.GCRole{}) }()
		cl.add(func() { stop(); <-done })
	}
	size := func(ctx context.Context) (int64, int64, error) {
		n, err := cellBytes(ctx, st)
		return n, 0, err
	}
	return &gcStore{db: db, raw: st, size: size, sizeOf: "write and data cells", close: cl.closeAll}, nil
}
