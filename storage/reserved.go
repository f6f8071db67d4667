package storage

import (
	"bytes"
	"errors"
	"fmt"
)

// ReservedPrefix begins every row the system itself owns: the timestamp
// oracle's high-water mark and lease, and whatever else a server or an
// oracle keeps in the store it serves. Since no byte sorts above 0xFF,
// the reserved rows are exactly the rows at or above ReservedPrefix, the
// tail of the keyspace: a range [start, end) leaves them out by ending at
// ReservedPrefix.
//
// No client may read or write them: every storage RPC of the server
// refuses a call that names one (codes.PermissionDenied, nothing changed),
// and the embedded API refuses them too (ErrReserved). The rows a
// client-side package owns (the observer registry, lock, queue and graph
// cells) are not here, since those packages write them over RPC; the
// public API keeps user code from writing their families instead.
const ReservedPrefix = "\xff\xff"

// ErrReserved is returned for a call that names a row (or, through the
// public API, a family) the system reserves. It matches
// ErrInvalidArgument too: nothing was changed.
var ErrReserved = errors.New("storage: reserved for the system")

// reservedError wraps both sentinels.
type reservedError struct{ msg string }

func (e *reservedError) Error() string { return "storage: reserved for the system: " + e.msg }

func (e *reservedError) Is(target error) bool {
	return target == ErrReserved || target == ErrInvalidArgument
}

// ReservedError returns an error matching ErrReserved and
// ErrInvalidArgument with the message.
func ReservedError(format string, args ...any) error {
	return &reservedError{msg: fmt.Sprintf(format, args...)}
}

// IsReserved reports whether row is a reserved row.
func IsReserved(row []byte) bool { return bytes.HasPrefix(row, []byte(ReservedPrefix)) }

// ReservedRow returns the reserved row of the given name: the owning
// package names its rows, this package places them.
func ReservedRow(name string) []byte {
	return append([]byte(ReservedPrefix), name...)
}

// UserRange limits the scan range [start, end) (end nil: to the last
// row) to the rows that are not reserved. ok is false when nothing of the
// range is left.
func UserRange(start, end []byte) (newEnd []byte, ok bool) {
	if IsReserved(start) {
		return nil, false
	}
	if len(end) == 0 || bytes.Compare(end, []byte(ReservedPrefix)) > 0 {
		end = []byte(ReservedPrefix)
	}
	return end, true
}

// CheckNotReserved returns ErrReserved for a reserved row.
func CheckNotReserved(row []byte) error {
	if IsReserved(row) {
		return ReservedError("row %s is reserved (rows beginning %q)", QuoteRow(row), ReservedPrefix)
	}
	return nil
}

// QuoteRow quotes a row key for a message, shortened past 40 bytes (a key
// may have 4 KiB).
func QuoteRow(row []byte) string {
	const most = 40
	if len(row) <= most {
		return fmt.Sprintf("%q", row)
	}
	return fmt.Sprintf("%q… (%d bytes)", row[:most], len(row))
}
