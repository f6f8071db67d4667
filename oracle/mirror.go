package oracle

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/seed-992972ee/percolator/storage"
)

// An elected oracle (oracle/etcd) keeps its high-water mark in etcd, and a
// copy in the store it serves, so that restoring etcd from a backup (an
// older mark) cannot make a new leader resume below timestamps already
// handed out: the leader writes both before it hands out a timestamp
// below them, and a new leader resumes at the larger.
//
// The copy is one column of the reserved row StoreMarkRow (no client can
// write it over the server, and the public API refuses it): family FamilyOracle,
// qualifier "elected", each version at min(mark, the store's largest
// timestamp), holding the mark (8 bytes, big-endian). A write puts its
// version and deletes the versions below it, blind: the newest version is
// the largest mark ever written, so a write sent twice, late or out of
// order never lowers it (a late one re-adds a lower version, which reads
// ignore and the next write deletes).
const mirrorQual = "elected"

// WriteMirror raises the copy of an elected oracle's mark in st to mark
// (a copy already higher stays). It is durable on return.
func WriteMirror(ctx context.Context, st storage.Store, mark uint64) error {
	if mark > MaxTimestamp+1 {
		return fmt.Errorf("%w: mark %d above MaxTimestamp+1", ErrInvalidArgument, mark)
	}
	ver := min(mark, storage.MaxTimestampOf(st))
	// Replaced in place, as the lease cell is: it may use the reserve.
	err := st.Mutate(storage.WithReserve(ctx), markRow,
		storage.SetCell(FamilyOracle, mirrorQual, ver, binary.BigEndian.AppendUint64(nil, mark)),
		storage.Mutation{Kind: storage.DeleteCells, Family: FamilyOracle, Qualifier: mirrorQual, Time: storage.Before(ver)})
	if err != nil {
		return fmt.Errorf("oracle: writing the mark's copy in the store: %w", err)
	}
	return nil
}

// ReadMirror returns the copy of an elected oracle's mark in st (0 if
// none).
func ReadMirror(ctx context.Context, st storage.Store) (uint64, error) {
	r, err := st.ReadRow(ctx, markRow, storage.Filter{{Family: FamilyOracle, Qualifier: mirrorQual}})
	if err != nil {
		return 0, fmt.Errorf("oracle: reading the mark's copy in the store: %w", err)
	}
	var mark uint64
	for _, c := range r.Cells { // the newest is the largest; a late lower one may linger
		if len(c.Value) != 8 {
			return 0, fmt.Errorf("%w: the mark's copy in the store holds %d bytes, not 8", ErrCorruptMark, len(c.Value))
		}
		mark = max(mark, binary.BigEndian.Uint64(c.Value))
	}
	if mark > MaxTimestamp+1 {
		return 0, fmt.Errorf("%w: the mark's copy in the store holds %d, above MaxTimestamp+1", ErrCorruptMark, mark)
	}
	return mark, nil
}
