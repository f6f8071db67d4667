// Package percolator is a Go implementation of Google's Percolator:
// cross-row snapshot-isolation transactions over a Bigtable-model store
// whose only atomic primitive is a single-row conditional mutation.
//
// Open a database, then run transactions:
//
//	db, err := percolator.Open(ctx, percolator.Options{Dir: dir}) // Dir "" = in-memory
//	defer db.Close()
//	err = db.Update(ctx, func(tx *percolator.Txn) error {
//		v, err := tx.Get(ctx, "Bob", "bal")
//		...
//		return tx.Set("Bob", "bal", newValue)
//	})
//
// Update retries write conflicts with jittered back-off until it commits or
// its context ends; View runs a read-only snapshot; Begin hands out a
// transaction to drive by hand. The protocol, its invariants and its
// storage layout are documented in package txn; the store interface in
// package storage.
//
// The embedded deployment (this package's default) keeps the store in
// Pebble under Dir/store, the timestamp oracle's high-water mark and lease
// inside it; one process (and one DB) opens a directory at a time, and the
// next to open it resolves the locks the previous one left at once, without
// waiting out their TTL.
package percolator
