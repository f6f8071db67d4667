package remote

import (
	"context"
	"time"

	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
)

var _ storage.Clock = (*Store)(nil)

// Now implements storage.Clock: the time by the server's clock, one call
// (re-sent on failure: it changes nothing).
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if err := s.check(); err != nil {
		return time.Time{}, err
	}
	var resp *rpcpb.NowResponse
	err := s.conn.Do(ctx, func(ctx context.Context, _ int) (err error) {
		resp, err = s.conn.Storage.Now(ctx, &rpcpb.NowRequest{})
		return err
	})
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, resp.UnixNanos), nil
}
