package storagetest

import "github.com/seed-992972ee/percolator/storage/shared"

// SharedStore is a store as one of several processes sees a store they
// share (shared.Store, which a program outside the tests can use too):
// every call passes through, and so do the capabilities a shared store can
// have (Batcher, Counted, SharedRows), but not those of a store one
// process owns. Tests embed it to run several clients on one store as
// separate processes would.
type SharedStore = shared.Store
