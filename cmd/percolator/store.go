package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/storage/pebble"
)

// openStore opens the store in dir for a command that must not create
// one: "no store at D" if there is none, and, if another process has it
// open, which (from what it publishes).
func openStore(ctx context.Context, dir string) (*percolator.DB, error) {
	if err := requireDir(dir); err != nil {
		return nil, err
	}
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir, MustExist: true})
	if errors.Is(err, pebble.ErrLocked) {
		return nil, fmt.Errorf("%w\n%s (only 'percolator status' reads what it publishes while it runs)", err, holder(dir))
	}
	return db, err
}

// createStore opens the store in dir, creating it if needed (index and
// bank).
func createStore(ctx context.Context, dir string) (*percolator.DB, error) {
	if err := requireDir(dir); err != nil {
		return nil, err
	}
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir})
	if errors.Is(err, pebble.ErrLocked) {
		return nil, fmt.Errorf("%w\n%s", err, holder(dir))
	}
	return db, err
}

// holder describes the process that holds dir's store, from what it
// publishes.
func holder(dir string) string {
	p, err := readPublished(dir)
	if err != nil || p.Finished || !processAlive(p.PID) {
		return "the process holding it publishes no status (not a running 'percolator index' or 'bank')"
	}
	return fmt.Sprintf("it is held by pid %d: %s", p.PID, p.Command)
}
