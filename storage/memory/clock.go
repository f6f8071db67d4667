package memory

import (
	"context"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

var _ storage.Clock = (*Store)(nil)

// Now implements storage.Clock: this process's clock, the store's.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return time.Time{}, storage.ErrClosed
	}
	return time.Now(), nil
}
