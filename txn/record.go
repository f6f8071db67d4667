package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/seed-992972ee/percolator/storage"
)

// Families of the protocol's metadata columns. A user column c lives as
// qualifier c in each: c:lock is (FamilyLock, c), and so on. Each family is
// a locality group: lock, write and data of a cell are read together in one
// row read, and the lock family can be scanned on its own (rebuilding the
// lock index at open reads only locks).
const (
	FamilyData  = "data"
	FamilyLock  = "lock"
	FamilyWrite = "write"
)

// Op is what a buffered write does to its cell.
type Op uint8

const (
	OpPut Op = iota + 1
	OpDelete
	// OpRollback marks a write record left by a rollback at the rolled-back
	// transaction's start_ts (invariant 5). It is never a lock's op.
	OpRollback
	// OpLock is a lock-only write (Txn.GetForUpdate): a lock, then a commit
	// record, that change no value and point at no data. Prewrite's
	// conflict check counts it as any write; readers skip it (doc.go,
	// "Write skew").
	OpLock
)

func (o Op) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpRollback:
		return "rollback"
	case OpLock:
		return "lock"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Lock is the content of a c:lock cell at the transaction's start_ts.
type Lock struct {
	Op         Op
	PrimaryRow []byte
	PrimaryCol string
	Owner      string
	// WallMS is the owner's wall time in milliseconds when it wrote the
	// lock. The lock expires TTLMS after the newest of WallMS and its
	// heartbeats (FamilyBeat), which never rewrite the record.
	WallMS uint64
	TTLMS  uint64
	// Inline holds a small value; when false and Op is OpPut the value is
	// in c:data at start_ts.
	Inline bool
	Value  []byte
	// Async marks a lock of an async-commit transaction (doc.go, "Async
	// commit"), committed once every row it writes holds its lock, at
	// the greatest MinCommitTS among them. Secondaries, on the primary's
	// lock only, name one cell of each other row the transaction
	// writes. MinCommitTS is the timestamp the store took under the
	// row's latch when it wrote the lock (storage.AsyncPrewriter), in the
	// record's last storage.StampSize bytes.
	Async       bool
	Secondaries []Cell
	MinCommitTS uint64
}

// Cell names one cell (row, column) of a transaction.
type Cell struct {
	Row []byte
	Col string
}

// IsPrimary reports whether the lock at (row, col) is its transaction's
// primary.
func (l *Lock) IsPrimary(row []byte, col string) bool {
	return l.PrimaryCol == col && string(l.PrimaryRow) == string(row)
}

// Write is the content of a c:write cell: a commit record at commit_ts
// pointing at start_ts (a lock-only one, OpLock, points at no data), or a
// rollback record at start_ts.
type Write struct {
	Op      Op
	StartTS uint64
	Inline  bool
	Value   []byte
}

var errCorrupt = errors.New("txn: corrupt record")

const recordVersion = 1

// asyncLockVersion is the version of an async-commit lock record: a
// version-1 record's fields, then the secondaries and the stamp. Only
// async locks are written at it, so a store whose clients never turn
// async commit on holds nothing a build of version-1 records cannot
// read; such a build meets an async lock as a *FormatError, never as a
// lock to roll back (doc.go, "Async commit").
const asyncLockVersion = 2

const (
	flagInline = 1 << iota
	flagAsync
)

// encodeLock serializes l. An async lock ends in its stamp, MinCommitTS
// (zero until the store writes it).
func encodeLock(l *Lock) []byte {
	b := make([]byte, 0, 32+len(l.PrimaryRow)+len(l.PrimaryCol)+len(l.Owner)+len(l.Value)+secondariesSize(l.Secondaries))
	version, flags := byte(recordVersion), inlineFlag(l.Inline)
	if l.Async {
		version, flags = asyncLockVersion, flags|flagAsync
	}
	b = append(b, version, byte(l.Op), flags)
	b = appendBytes(b, l.PrimaryRow)
	b = appendBytes(b, []byte(l.PrimaryCol))
	b = appendBytes(b, []byte(l.Owner))
	b = binary.AppendUvarint(b, l.WallMS)
	b = binary.AppendUvarint(b, l.TTLMS)
	if l.Inline {
		b = appendBytes(b, l.Value)
	}
	if !l.Async {
		return b
	}
	b = binary.AppendUvarint(b, uint64(len(l.Secondaries)))
	for _, s := range l.Secondaries {
		b = appendBytes(b, s.Row)
		b = appendBytes(b, []byte(s.Col))
	}
	return binary.BigEndian.AppendUint64(b, l.MinCommitTS)
}

// secondariesSize is about what a list of secondaries weighs in a lock
// record.
func secondariesSize(cells []Cell) int {
	n := 0
	for _, c := range cells {
		n += len(c.Row) + len(c.Col) + 4
	}
	return n
}

// decodeLock parses a lock record. One of a newer version, or with an
// operation this build does not know, fails with a *FormatError: readers
// stop at it, and no resolver rolls it back.
func decodeLock(b []byte) (Lock, error) {
	var l Lock
	d := decoder{b: b}
	version, err := d.versionUpTo("lock record", asyncLockVersion)
	if err != nil {
		return l, err
	}
	l.Op = Op(d.byte())
	flags := d.byte()
	l.Inline = flags&flagInline != 0
	l.Async = flags&flagAsync != 0
	l.PrimaryRow = d.bytes()
	l.PrimaryCol = string(d.bytes())
	l.Owner = string(d.bytes())
	l.WallMS = d.uvarint()
	l.TTLMS = d.uvarint()
	if l.Inline {
		l.Value = d.bytes()
	}
	if l.Async != (version == asyncLockVersion) {
		return l, errCorrupt
	}
	if l.Async {
		l.Secondaries = d.cells()
		l.MinCommitTS = d.stamp()
	}
	if !d.err && l.Op > OpLock {
		return l, &FormatError{What: "lock record", Found: recordVersion, Build: recordVersion, Detail: "operation " + strconv.Itoa(int(l.Op))}
	}
	if d.err || l.Op < OpPut || l.Op == OpRollback {
		return l, errCorrupt
	}
	return l, nil
}

// encodeWrite serializes w.
func encodeWrite(w *Write) []byte {
	b := make([]byte, 0, 16+len(w.Value))
	b = append(b, recordVersion, byte(w.Op), inlineFlag(w.Inline))
	b = binary.AppendUvarint(b, w.StartTS)
	if w.Inline {
		b = appendBytes(b, w.Value)
	}
	return b
}

// DecodeWrite parses a write record. One of a newer version, or with an
// operation this build does not know, fails with a *FormatError.
func DecodeWrite(b []byte) (Write, error) {
	var w Write
	d := decoder{b: b}
	if err := d.version("write record"); err != nil {
		return w, err
	}
	w.Op = Op(d.byte())
	w.Inline = d.byte()&flagInline != 0
	w.StartTS = d.uvarint()
	if w.Inline {
		w.Value = d.bytes()
	}
	if !d.err && w.Op > OpLock {
		return w, &FormatError{What: "write record", Found: recordVersion, Build: recordVersion, Detail: "operation " + strconv.Itoa(int(w.Op))}
	}
	if d.err || w.Op < OpPut {
		return w, errCorrupt
	}
	return w, nil
}

// writeOp returns the op of an encoded write record without decoding it
// whole (the index hook runs under the row latch).
func writeOp(b []byte) Op {
	if len(b) < 2 {
		return 0
	}
	return Op(b[1])
}

// valueOp reports whether a write record of op is a version of the cell's
// value (a put or a delete), what readers read; rollback and lock-only
// records are not.
func valueOp(op Op) bool { return op == OpPut || op == OpDelete }

func inlineFlag(inline bool) byte {
	if inline {
		return flagInline
	}
	return 0
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.err = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// version reads a record's version byte: recordVersion, or a newer one
// (a *FormatError naming the record kind what), or a corrupt record.
func (d *decoder) version(what string) error {
	_, err := d.versionUpTo(what, recordVersion)
	return err
}

// versionUpTo reads a record's version byte, one of recordVersion to
// newest, and returns it; a newer one is a *FormatError naming the record
// kind what.
func (d *decoder) versionUpTo(what string, newest byte) (byte, error) {
	switch v := d.byte(); {
	case d.err || v == 0:
		return 0, errCorrupt
	case v > newest:
		return 0, &FormatError{What: what, Found: uint64(v), Build: uint64(newest)}
	case v < recordVersion:
		return 0, errCorrupt
	default:
		return v, nil
	}
}

// cells reads a count and that many (row, column) pairs.
func (d *decoder) cells() []Cell {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return nil
	}
	cells := make([]Cell, n)
	for i := range cells {
		cells[i] = Cell{Row: d.bytes(), Col: string(d.bytes())}
	}
	return cells
}

// stamp reads the record's last storage.StampSize bytes, which must be
// all that is left.
func (d *decoder) stamp() uint64 {
	if len(d.b) != storage.StampSize {
		d.err = true
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = nil
	return v
}
