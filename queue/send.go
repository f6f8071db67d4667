package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/seed-992972ee/percolator/storage"
)

// mutate is Mutate, or when lazy and the store can, its deferred variant.
func (q *Queue) mutate(ctx context.Context, lazy bool, row []byte, ms ...storage.Mutation) error {
	if !lazy || q.deferred == nil {
		return q.store.Mutate(ctx, row, ms...)
	}
	errs, err := q.deferred.MutateRowsDeferred(ctx, []storage.RowMutation{{Row: row, Mutations: ms}})
	if err == nil && errs != nil {
		err = errs[0]
	}
	return err
}

// retry runs an idempotent store call until it succeeds, up to attempts
// times when it fails for a reason that may pass.
func (q *Queue) retry(ctx context.Context, call func() error) error {
	var err error
	for try := 0; try < attempts; try++ {
		if err = call(); err == nil || !transient(ctx, err) {
			return err
		}
	}
	return err
}

// transient reports whether a store call that failed with err may
// succeed if sent again: not for bad input, a closed store or an ended
// context.
func transient(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !errors.Is(err, storage.ErrInvalidArgument) && !errors.Is(err, storage.ErrClosed)
}

// attempts bounds the sends of one store call that keeps failing.
const attempts = 8

// unknown wraps the error of a write whose outcome stayed unknown.
func unknown(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnknown, what, err)
}
