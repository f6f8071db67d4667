package percolator

import (
	"context"
	"fmt"

	"github.com/seed-992972ee/percolator/txn"
)

// Upgrade moves the store described by opts (Dir or Store) to
// FormatVersion and returns the format it was of; a store already of this
// format is left as it is. It refuses, changing nothing, a store of a
// newer format (ErrFormat) and a server (Options.Server: stop the server
// and upgrade its directory, since the server is what holds it).
//
// No process of the old format may run on the store while it is
// upgraded, or after: it would write without the checks the new format
// needs (txn.FormatVersion). On a directory, Upgrade holds the store's
// lock, so a running process makes it fail with ErrInUse. On a store
// shared with other processes (Options.Store) the caller must make sure
// of it: cluster.Upgrade refuses while any process is registered in etcd.
func Upgrade(ctx context.Context, opts Options) (from uint64, err error) {
	if opts.Server != "" {
		return 0, fmt.Errorf("%w: a server holds its store: stop it, upgrade its directory (percolator upgrade --dir), and start it again", ErrInvalidArgument)
	}
	if opts.Dir == "" && opts.Store == nil {
		return 0, fmt.Errorf("%w: Upgrade needs a Dir or a Store", ErrInvalidArgument)
	}
	opts.EnsureDefaults()
	opts.MustExist = true
	db := &DB{opts: opts}
	defer func() { _ = db.Close() }()
	if err := db.openStore(); err != nil {
		return 0, apiErr(err)
	}
	from, err = txn.Upgrade(ctx, db.store)
	if err != nil {
		return from, apiErr(err)
	}
	return from, apiErr(db.Close())
}
