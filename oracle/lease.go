package oracle

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// The lease cell of a store allocator (OpenStoreAllocator, storemark.go):
// where it lives and what it holds, and DescribeLease to read it.
//
// The store's mark lives in the store itself, in one cell: family
// FamilyOracle, qualifier "lease", in a reserved row (StoreMarkRow, under
// storage.ReservedPrefix: no client of a server can read or write it, and
// the embedded API refuses it too). Keeping it beside the data it
// protects means a store carries its own high-water mark wherever it
// goes, and on a store with one ordered log (Pebble) the mark and the data
// recover together: a timestamp found in the data was handed out below a
// mark written (and synced) before it.
//
// Stores written before the reserved namespace kept the cell in row
// "mark", which any client could write or delete. Opening such a store
// moves the cell, its epoch and record unchanged, into the reserved row
// (migrate), once.
//
// The cell holds a lease record (leaseRecord) at a version that counts its
// writes (the epoch). Every change is a CheckAndMutate on the exact
// current epoch that writes epoch+1 and deletes epoch, so of two
// allocators racing for the lease one wins, and a record is never
// overwritten by a writer that had not read it.
const (
	// FamilyOracle holds the store allocator's lease record.
	FamilyOracle = "oracle"
	leaseQual    = "lease"
)

var (
	markRow = storage.ReservedRow("oracle/mark")
	// legacyMarkRow is where stores written before the reserved
	// namespace kept the cell.
	legacyMarkRow = []byte("mark")
)

// StoreMarkRow returns the reserved row that holds the store
// allocator's mark and lease (family FamilyOracle), for inspection.
func StoreMarkRow() []byte { return append([]byte(nil), markRow...) }

// leaseRecord is the stored lease: the mark (every timestamp any
// allocator of this store handed out is below it), who holds the lease
// ("" once released) and since when, and a nonce that tells a write that
// applied from one that did not after an unknown outcome.
type leaseRecord struct {
	Mark   uint64
	Owner  string
	WallMS uint64
	TTLMS  uint64
	Nonce  uint64
}

const leaseMagic = "ptslease"

// encodeLease: magic, mark, wall, ttl, nonce (8 bytes each), owner, and a
// CRC-32C of everything before it.
func encodeLease(r *leaseRecord) []byte {
	b := append([]byte(nil), leaseMagic...)
	for _, v := range []uint64{r.Mark, r.WallMS, r.TTLMS, r.Nonce} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	b = append(b, r.Owner...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeLease(b []byte) (leaseRecord, error) {
	const fixed = len(leaseMagic) + 4*8
	switch {
	case len(b) < fixed+4 || !bytes.Equal(b[:len(leaseMagic)], []byte(leaseMagic)):
		return leaseRecord{}, fmt.Errorf("%w: store lease record of %d bytes", ErrCorruptMark, len(b))
	case binary.BigEndian.Uint32(b[len(b)-4:]) != crc32.Checksum(b[:len(b)-4], castagnoli):
		return leaseRecord{}, fmt.Errorf("%w: store lease record checksum mismatch", ErrCorruptMark)
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(b[len(leaseMagic)+8*i:]) }
	r := leaseRecord{Mark: u(0), WallMS: u(1), TTLMS: u(2), Nonce: u(3), Owner: string(b[fixed : len(b)-4])}
	if r.Mark > MaxTimestamp+1 {
		return leaseRecord{}, fmt.Errorf("%w: store mark %d above MaxTimestamp+1", ErrCorruptMark, r.Mark)
	}
	return r, nil
}

// LeaseInfo is a store allocator's lease record as DescribeLease reads
// it: the mark (every timestamp handed out is below it), the holder ("" once
// released), and when it was last written and for how long.
type LeaseInfo struct {
	Mark  uint64
	Owner string
	Wall  time.Time
	TTL   time.Duration
}

// DescribeLease decodes the value of the lease cell (StoreMarkRow, family
// FamilyOracle), for inspection.
func DescribeLease(value []byte) (LeaseInfo, error) {
	r, err := decodeLease(value)
	if err != nil {
		return LeaseInfo{}, err
	}
	return LeaseInfo{Mark: r.Mark, Owner: r.Owner, Wall: time.UnixMilli(int64(r.WallMS)), TTL: time.Duration(r.TTLMS) * time.Millisecond}, nil
}
