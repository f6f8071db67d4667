package pebble

import (
	"context"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

var _ storage.Clock = (*Store)(nil)

// Now implements storage.Clock: the clock of the process that owns the
// store (embedded, or the single server's).
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if err := s.guard.enter(); err != nil {
		return time.Time{}, err
	}
	defer s.guard.exit()
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}
