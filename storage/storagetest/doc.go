// Package storagetest is the conformance suite every storage backend runs:
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) storage.Store { return memory.New() })
//	}
//
// Run gives each subtest a fresh, empty store and closes it afterwards.
// The suite checks the contract in package storage's doc: the read model
// (cell order, time ranges, per-column limits, union filters), the
// mutations, Scan, CheckAndMutate, Increment, bad input, Close, the copying
// of values, and atomicity under concurrency. Optional capabilities
// (Batcher, ApplyHooker) are tested when the store has them.
//
// # What the suite pins down beyond the interface's text
//
//  1. Bad input includes Scan with start > end (both non-empty) or a
//     negative limit, and Increment of a column whose newest value is not
//     8 bytes: ErrInvalidArgument, nothing changed.
//  2. MutateRows validates every row first; one bad row fails the whole
//     call with ErrInvalidArgument and applies nothing.
//  3. Increment leaves exactly one version, at timestamp 0.
//  4. A write with no mutations to apply (an empty Mutate, the empty branch
//     of CheckAndMutate, an empty RowMutation) does not call the apply hook.
//  5. Scan's callback may call back into the store.
//
// # How it checks
//
// Besides hand-written cases, a randomized run compares every operation
// with a deliberately naive model (model.go); it logs its seed and replays
// it from the STORAGETEST_SEED environment variable. Concurrency is checked
// by invariants, not timing: compare-and-set counters on one row must count
// exactly the successful calls, with no two winners from one version; a
// write to three families must never be seen half done; the index rebuilt
// from apply-hook calls must equal the store. The suite's own tests run it
// against deliberately broken stores to show each of these can fail.
package storagetest
