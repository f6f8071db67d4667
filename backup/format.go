package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/seed-992972ee/percolator"
)

// FormatVersion is the version of the file format this build writes, and
// the only one it reads.
const FormatVersion = 1

// magic begins every backup file.
const magic = "\x89PCB\r\n\x1a\n"

// headerSize is the magic, the version, start_ts and time.
const headerSize = len(magic) + 4 + 8 + 8

// Record kinds (a record body's first byte); a record length of 0 ends
// the records.
const (
	kindObserver = 0x01
	kindCell     = 0x02
)

// trailerSize is the record count and the SHA-256.
const trailerSize = 8 + sha256.Size

// DefaultMaxValueSize is the largest value a Reader accepts unless told
// otherwise: above the 100 MiB a Bigtable cell may hold, so a file any
// backend wrote reads.
const DefaultMaxValueSize = 256 << 20

var (
	// ErrCorrupt: the file is not a complete, intact backup (a
	// *CorruptError says where and why): truncated, a byte changed, not
	// a backup at all. Nothing was restored from it.
	ErrCorrupt = errors.New("backup: corrupt or truncated file")
	// ErrVersion: the file is a backup of a format version this build
	// does not read (a newer one).
	ErrVersion = errors.New("backup: unsupported format version")
)

// CorruptError is ErrCorrupt with the byte offset at which the file
// stopped being a backup and what was wrong there.
type CorruptError struct {
	Offset int64
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("backup: corrupt or truncated file at byte %d: %s", e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Header is what a backup file begins with.
type Header struct {
	Version uint32
	StartTS uint64    // the snapshot's start timestamp
	Time    time.Time // when the backup began
}

// Kind is what a Record holds.
type Kind uint8

// The kinds of records.
const (
	KindObserver Kind = kindObserver
	KindCell     Kind = kindCell
)

// Record is one record of a backup: an observer registration (Fn nil) or
// a cell, as Kind says.
type Record struct {
	Kind     Kind
	Observer percolator.Observer
	Cell     percolator.Cell
}

// encoder writes the format: header, records, end and trailer, hashing
// every byte before the trailer.
type encoder struct {
	w       *bufio.Writer
	h       hash.Hash
	n       int64 // bytes written
	records uint64
	scratch []byte
}

func newEncoder(w io.Writer) *encoder {
	return &encoder{w: bufio.NewWriterSize(w, 1<<20), h: sha256.New()}
}

// write writes and hashes b.
func (e *encoder) write(b []byte) error {
	e.h.Write(b)
	n, err := e.w.Write(b)
	e.n += int64(n)
	return err
}

func (e *encoder) header(h Header) error {
	b := append([]byte(magic), make([]byte, headerSize-len(magic))...)
	binary.BigEndian.PutUint32(b[len(magic):], h.Version)
	binary.BigEndian.PutUint64(b[len(magic)+4:], h.StartTS)
	binary.BigEndian.PutUint64(b[len(magic)+12:], uint64(h.Time.UnixNano()))
	return e.write(b)
}

// record writes one record whose body is kind followed by the fields
// given (strs length-prefixed, then rest as it is).
func (e *encoder) record(kind byte, rest []byte, strs ...[]byte) error {
	n := 1 + len(rest)
	for _, s := range strs {
		n += uvarintLen(uint64(len(s))) + len(s)
	}
	b := binary.AppendUvarint(e.scratch[:0], uint64(n))
	b = append(b, kind)
	for _, s := range strs {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = append(b, rest...)
	e.scratch = b[:0]
	e.records++
	return e.write(b)
}

func (e *encoder) observer(o percolator.Observer) error {
	var flags byte
	if o.Weak {
		flags = 1
	}
	return e.record(kindObserver, []byte{flags}, []byte(o.Name), []byte(o.Column))
}

func (e *encoder) cell(c percolator.Cell) error {
	return e.record(kindCell, c.Value, c.Row, []byte(c.Column))
}

// finish writes the end and the trailer, flushes, and returns the
// checksum.
func (e *encoder) finish() ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	if err := e.write([]byte{0}); err != nil {
		return sum, err
	}
	e.h.Sum(sum[:0])
	t := binary.BigEndian.AppendUint64(make([]byte, 0, trailerSize), e.records)
	t = append(t, sum[:]...)
	n, err := e.w.Write(t)
	e.n += int64(n)
	if err == nil {
		err = e.w.Flush()
	}
	return sum, err
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// ReadOptions configures a Reader. The zero value is usable.
type ReadOptions struct {
	// MaxValueSize is the largest value a cell record may hold: a longer
	// record is corrupt. 0 means DefaultMaxValueSize.
	MaxValueSize int
}

// Reader reads a backup file record by record, verifying it as it goes
// (the package doc's invariants). Not safe for concurrent use.
type Reader struct {
	r         *bufio.Reader
	h         hash.Hash
	off       int64 // bytes consumed
	hdr       Header
	maxRecord uint64
	maxValue  int
	records   uint64
	observers int64
	cells     int64
	lastRow   []byte // of the last cell read, for the order
	lastCol   string
	inCells   bool
	done      bool
	sum       [sha256.Size]byte
}

// NewReader reads and checks r's header.
func NewReader(r io.Reader, o ReadOptions) (*Reader, error) {
	if o.MaxValueSize <= 0 {
		o.MaxValueSize = DefaultMaxValueSize
	}
	rd := &Reader{r: bufio.NewReaderSize(r, 1<<20), h: sha256.New(), maxValue: o.MaxValueSize}
	rd.maxRecord = uint64(1 + 2*binary.MaxVarintLen64 + percolator.MaxRowSize + percolator.MaxColumnSize + o.MaxValueSize)
	if err := rd.readHeader(); err != nil {
		return nil, err
	}
	return rd, nil
}

// Header is the file's header.
func (r *Reader) Header() Header { return r.hdr }

func (r *Reader) corrupt(format string, a ...any) error {
	return &CorruptError{Offset: r.off, Reason: fmt.Sprintf(format, a...)}
}

// full reads len(b) bytes into b and hashes them; an early end is
// corrupt (a truncated file), reported as what was being read.
func (r *Reader) full(b []byte, what string) error {
	n, err := io.ReadFull(r.r, b)
	r.h.Write(b[:n])
	r.off += int64(n)
	return r.readErr(err, what)
}

func (r *Reader) readErr(err error, what string) error {
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return r.corrupt("the file ends in %s (truncated: %d records read, no trailer)", what, r.records)
	case err != nil:
		return fmt.Errorf("backup: reading the file at byte %d: %w", r.off, err)
	}
	return nil
}

func (r *Reader) readHeader() error {
	b := make([]byte, headerSize)
	if err := r.full(b[:len(magic)], "its header"); err != nil {
		return err
	}
	if string(b[:len(magic)]) != magic {
		return &CorruptError{Offset: 0, Reason: "not a percolator backup (no magic)"}
	}
	if err := r.full(b[len(magic):], "its header"); err != nil {
		return err
	}
	r.hdr = Header{
		Version: binary.BigEndian.Uint32(b[len(magic):]),
		StartTS: binary.BigEndian.Uint64(b[len(magic)+4:]),
		Time:    time.Unix(0, int64(binary.BigEndian.Uint64(b[len(magic)+12:]))).UTC(),
	}
	if r.hdr.Version != FormatVersion {
		return fmt.Errorf("%w: the file is version %d, this build reads version %d", ErrVersion, r.hdr.Version, FormatVersion)
	}
	return nil
}

// uvarint reads and hashes a uvarint.
func (r *Reader) uvarint(what string) (uint64, error) {
	var buf [binary.MaxVarintLen64]byte
	for i := range buf {
		c, err := r.r.ReadByte()
		if err != nil {
			return 0, r.readErr(err, what)
		}
		buf[i] = c
		r.off++
		if c < 0x80 {
			r.h.Write(buf[:i+1])
			x, n := binary.Uvarint(buf[:i+1])
			if n <= 0 {
				return 0, r.corrupt("%s: a malformed length", what)
			}
			return x, nil
		}
	}
	return 0, r.corrupt("%s: a malformed length", what)
}

// Next returns the next record. After the last it reads and checks the
// trailer and the end of the file, and returns io.EOF; any error is
// final.
func (r *Reader) Next() (Record, error) {
	if r.done {
		return Record{}, io.EOF
	}
	n, err := r.uvarint("a record's length")
	if err != nil {
		return Record{}, err
	}
	if n == 0 {
		return Record{}, r.trailer()
	}
	if n > r.maxRecord {
		return Record{}, r.corrupt("a record of %d bytes, longer than a cell of a value of at most %d bytes (ReadOptions.MaxValueSize) can be", n, r.maxValue)
	}
	body, err := r.body(int64(n))
	if err != nil {
		return Record{}, err
	}
	return r.decode(body)
}

// body reads a record's body of n bytes, allocating as the bytes arrive:
// a corrupt length in a short file costs what the file holds.
func (r *Reader) body(n int64) ([]byte, error) {
	var buf bytes.Buffer
	got, err := io.CopyN(&buf, r.r, n)
	r.h.Write(buf.Bytes())
	r.off += got
	if err != nil {
		return nil, r.readErr(err, "a record")
	}
	return buf.Bytes(), nil
}

// decode decodes a record's body and checks its place in the file.
func (r *Reader) decode(b []byte) (Record, error) {
	start := r.off - int64(len(b))
	d := fields{b: b[1:]}
	var rec Record
	switch b[0] {
	case kindObserver:
		rec.Kind = KindObserver
		name, col := d.str(), d.str()
		if d.bad || len(d.b) != 1 || d.b[0]&^1 != 0 {
			return Record{}, &CorruptError{Offset: start, Reason: "a malformed observer record"}
		}
		if r.inCells {
			return Record{}, &CorruptError{Offset: start, Reason: "an observer record after the cells"}
		}
		rec.Observer = percolator.Observer{Name: string(name), Column: string(col), Weak: d.b[0] == 1}
		r.observers++
	case kindCell:
		rec.Kind = KindCell
		row, col := d.str(), d.str()
		if d.bad {
			return Record{}, &CorruptError{Offset: start, Reason: "a malformed cell record"}
		}
		if err := r.inOrder(row, string(col), start); err != nil {
			return Record{}, err
		}
		rec.Cell = percolator.Cell{Row: row, Column: string(col), Value: d.b}
		r.cells++
	default:
		return Record{}, &CorruptError{Offset: start, Reason: fmt.Sprintf("a record of unknown kind %#x", b[0])}
	}
	r.records++
	return rec, nil
}

// inOrder checks that a cell comes strictly after the one before.
func (r *Reader) inOrder(row []byte, col string, at int64) error {
	if r.inCells {
		c := bytes.Compare(row, r.lastRow)
		if c < 0 || c == 0 && col <= r.lastCol {
			return &CorruptError{Offset: at, Reason: fmt.Sprintf("cell %q/%s out of order (after %q/%s)", row, col, r.lastRow, r.lastCol)}
		}
	}
	r.inCells, r.lastRow, r.lastCol = true, row, col
	return nil
}

// trailer checks the trailer against what was read, and the end of the
// file after it.
func (r *Reader) trailer() error {
	r.h.Sum(r.sum[:0])
	t := make([]byte, trailerSize)
	if n, err := io.ReadFull(r.r, t); err != nil {
		r.off += int64(n)
		return r.readErr(err, "its trailer")
	}
	at := r.off
	r.off += trailerSize
	if count := binary.BigEndian.Uint64(t); count != r.records {
		return &CorruptError{Offset: at, Reason: fmt.Sprintf("the trailer counts %d records, the file holds %d", count, r.records)}
	}
	if !bytes.Equal(t[8:], r.sum[:]) {
		return &CorruptError{Offset: at, Reason: fmt.Sprintf("checksum mismatch: the trailer says %x, the file's bytes hash to %x", t[8:], r.sum[:])}
	}
	if _, err := r.r.ReadByte(); err != io.EOF {
		if err != nil {
			return fmt.Errorf("backup: reading the file at byte %d: %w", r.off, err)
		}
		return r.corrupt("bytes after the trailer")
	}
	r.done = true
	return io.EOF
}

// Summary is what the file held, once Next returned io.EOF.
func (r *Reader) Summary() Summary {
	return Summary{StartTS: r.hdr.StartTS, Time: r.hdr.Time, Cells: r.cells, Observers: r.observers, Bytes: r.off, Checksum: r.sum}
}

// Offset is how many bytes of the file were read so far.
func (r *Reader) Offset() int64 { return r.off }

// fields decodes a record body's length-prefixed fields.
type fields struct {
	b   []byte
	bad bool
}

func (f *fields) str() []byte {
	n, k := binary.Uvarint(f.b)
	if k <= 0 || n > uint64(len(f.b)-k) {
		f.bad = true
		return nil
	}
	s := f.b[k : k+int(n)]
	f.b = f.b[k+int(n):]
	return s
}
