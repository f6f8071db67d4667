package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"time"
)

// Sentinel errors. Backends wrap them with %w.
var (
	// ErrInvalidArgument is returned for malformed input; nothing was changed.
	ErrInvalidArgument = errors.New("storage: invalid argument")
	// ErrClosed is returned by any call on a closed store.
	ErrClosed = errors.New("storage: closed")
	// ErrFailed is returned by every call of a store that could not make a
	// write durable (a failed log sync). Such a write may already have been
	// visible in memory; rather than let a read return what a power loss
	// could take back, the store refuses all calls until it is reopened,
	// and recovery then keeps exactly what reached the disk. The write that
	// met the failure has an unknown outcome: its record may have reached
	// the disk before the sync failed, and a reopen may find it.
	ErrFailed = errors.New("storage: store failed (a write could not be made durable); reopen it")
	// ErrInUse is returned when another client holds what a caller asked
	// to own: the apply hook of an exclusive store (one client keeps the
	// in-memory index), or a store directory another process has open.
	ErrInUse = errors.New("storage: in use by another client")
	// ErrUnavailable is wrapped by the errors of a backend reached over a
	// network that could not be reached, or kept failing, until its retry
	// budget ran out (the server restarting or down, a cut connection,
	// Bigtable answering Unavailable). It passes: a later call may
	// succeed. A write that met it has an unknown outcome.
	ErrUnavailable = errors.New("storage: unavailable")
	// ErrBudgetSpent is wrapped, with ErrUnavailable, by the errors of a
	// backend that already retried for its whole retry budget (a server
	// that has not answered for that long, rpc's budgets): the outage has
	// lasted as long as the caller said it would wait, and a long-running
	// caller (an observer worker) ends rather than retry on. A backend
	// without a budget of its own (Bigtable, whose client retries each call
	// briefly) returns ErrUnavailable alone, and its callers ride it out.
	ErrBudgetSpent = errors.New("storage: retry budget spent")
	// ErrNoSpace is returned by the writes of a store whose disk is nearly
	// full (Reserver): nothing was written. It keeps the space left for the
	// writes that free space (WithReserve: the garbage collector's) until
	// collection, or the operator, frees enough; a later write may succeed.
	ErrNoSpace = errors.New("storage: disk nearly full")
)

// MaxTimestamp is the largest timestamp a cell may carry in any backend
// that is not Limited.
const MaxTimestamp = math.MaxUint64 - 1

// Limited is an optional capability of a backend whose cells hold fewer
// bits of timestamp than a uint64 (Bigtable keeps ts×1000 microseconds in
// an int64): MaxTimestamp is the largest timestamp it stores, and a Put
// above it is ErrInvalidArgument. A time range reaching above it selects
// as if unbounded. The oracle's timestamps stay below every backend's
// (oracle.MaxTimestamp).
type Limited interface {
	MaxTimestamp() uint64
}

// MaxTimestampOf returns the largest timestamp s stores.
func MaxTimestampOf(s Store) uint64 {
	if l, ok := s.(Limited); ok {
		return l.MaxTimestamp()
	}
	return MaxTimestamp
}

// Cell is one timestamped version of one column of a row.
type Cell struct {
	Family    string
	Qualifier string
	TS        uint64
	Value     []byte
}

// Row is the result of reading one row: its cells ordered by family,
// then qualifier (bytewise), then timestamp descending (newest first).
type Row struct {
	Key   []byte
	Cells []Cell
}

// TimeRange selects timestamps in [Start, End). End == 0 means no upper
// bound. The zero value selects every timestamp.
type TimeRange struct {
	Start, End uint64
}

// Contains reports whether ts lies in the range.
func (r TimeRange) Contains(ts uint64) bool {
	return ts >= r.Start && (r.End == 0 || ts < r.End)
}

// At returns the range holding exactly ts.
func At(ts uint64) TimeRange { return TimeRange{Start: ts, End: ts + 1} }

// Before returns the range [0, ts).
func Before(ts uint64) TimeRange { return TimeRange{End: ts} }

// From returns the range [ts, ∞).
func From(ts uint64) TimeRange { return TimeRange{Start: ts} }

// Selector picks cells of one family: one qualifier (or every qualifier
// when AllQualifiers is set), within a time range, at most Limit newest
// versions per column (0 = all). It maps onto a Bigtable filter chain
// (family, qualifier, timestamp range, cells-per-column limit).
type Selector struct {
	Family        string
	Qualifier     string
	AllQualifiers bool
	Time          TimeRange
	Limit         int
}

// Filter is the union of its selectors (a Bigtable interleave). A cell is
// selected when any selector selects it. A nil or empty filter selects
// nothing.
type Filter []Selector

// Matches reports whether the filter selects the cell (ignoring Limit,
// which is applied per column by the reader).
func (f Filter) Matches(c *Cell) bool {
	for i := range f {
		if f[i].matches(c) {
			return true
		}
	}
	return false
}

// Touches reports whether m, a mutation of a row, may change what the
// filter selects in that row: a put of a cell the filter selects, a
// delete of versions of a selected column in a range that meets a
// selector's, or a row delete. Limit is ignored: a put below a column's
// newest selected versions, or a delete of them, may still change which
// versions a read returns.
func (f Filter) Touches(m *Mutation) bool {
	switch m.Kind {
	case Put:
		c := Cell{Family: m.Family, Qualifier: m.Qualifier, TS: m.TS}
		return f.Matches(&c)
	case DeleteCells:
		for i := range f {
			s := &f[i]
			if s.Family == m.Family && (s.AllQualifiers || s.Qualifier == m.Qualifier) && s.Time.meets(m.Time) {
				return true
			}
		}
		return false
	}
	return len(f) > 0 // DeleteRow, and any kind added later
}

// meets reports whether two ranges share a timestamp (End 0: unbounded).
func (r TimeRange) meets(o TimeRange) bool {
	return (o.End == 0 || r.Start < o.End) && (r.End == 0 || o.Start < r.End)
}

func (s *Selector) matches(c *Cell) bool {
	return s.Family == c.Family &&
		(s.AllQualifiers || s.Qualifier == c.Qualifier) &&
		s.Time.Contains(c.TS)
}

// MutationKind says what a Mutation does.
type MutationKind uint8

const (
	// Put sets the cell (Family, Qualifier, TS) to Value, replacing any
	// value it had.
	Put MutationKind = iota + 1
	// DeleteCells deletes the versions of (Family, Qualifier) whose
	// timestamp lies in Time. Deleting nothing is not an error.
	DeleteCells
	// DeleteRow deletes every cell of the row in every family.
	DeleteRow
)

// Mutation is one change to one row.
type Mutation struct {
	Kind      MutationKind
	Family    string
	Qualifier string
	TS        uint64    // Put only
	Value     []byte    // Put only; the store keeps its own copy
	Time      TimeRange // DeleteCells only
}

// SetCell returns a Put mutation.
func SetCell(family, qualifier string, ts uint64, value []byte) Mutation {
	return Mutation{Kind: Put, Family: family, Qualifier: qualifier, TS: ts, Value: value}
}

// DeleteCell returns a mutation deleting exactly the version at ts.
func DeleteCell(family, qualifier string, ts uint64) Mutation {
	return Mutation{Kind: DeleteCells, Family: family, Qualifier: qualifier, Time: At(ts)}
}

// RowMutation is a list of mutations of one row, for MutateRows.
type RowMutation struct {
	Row       []byte
	Mutations []Mutation
}

// Store is the Bigtable-model store. All methods are safe for concurrent
// use. Every method returns ErrClosed after Close, and an error wrapping
// ErrInvalidArgument for malformed input (changing nothing). Returned slices
// belong to the caller.
//
// Visibility and durability. A write made by a durable call (Mutate,
// CheckAndMutate, Increment, MutateRows, and CheckAndMutateCond with
// deferred false) is returned by no read — ReadRow, Scan, ScanCounted —
// before it is durable, and the call returns only once it is. A store
// whose engine publishes a write before its log sync returns (Pebble)
// makes a read that saw such a write wait for that sync before returning;
// if the sync fails, the store fails (ErrFailed) instead of returning the
// write. Its ApplyHook sees the write once it is applied, durable or
// not. A write made by a Deferred variant may be read (and hooked) before
// it is durable: its caller chose it for writes whose loss is harmless
// until a later durable write covers them. Under a row's latch (a CheckAndMutate predicate, a
// Cond) every earlier write of the row is seen, durable or not: a later
// durable write of the same ordered log covers it.
type Store interface {
	// ReadRow returns the cells of row selected by filter. A row with no
	// selected cell returns a Row with no cells and a nil error.
	ReadRow(ctx context.Context, row []byte, filter Filter) (Row, error)

	// Scan calls fn for each row in [start, end) (end nil = to the last row)
	// that has at least one cell selected by filter, in key order, with
	// those cells. limit > 0 stops after that many rows. fn returning false
	// stops the scan early. Scan reads a consistent view of each row, not
	// of the whole range.
	Scan(ctx context.Context, start, end []byte, filter Filter, limit int, fn func(Row) bool) error

	// Mutate applies mutations to one row, atomically and durably.
	Mutate(ctx context.Context, row []byte, mutations ...Mutation) error

	// CheckAndMutate reads row through predicate and, atomically with
	// respect to every other call on row, applies ifTrue when the predicate
	// selected at least one cell and ifFalse otherwise. It reports which
	// branch ran. Both lists may be empty. One round trip; durable on
	// return.
	CheckAndMutate(ctx context.Context, row []byte, predicate Filter, ifTrue, ifFalse []Mutation) (matched bool, err error)

	// Increment atomically adds delta to the 8-byte big-endian integer in
	// the newest version of (family, qualifier) (absent = 0), writes the
	// sum as a new version at timestamp 0 replacing the old, and returns
	// it. It is not idempotent: a retry after an unknown outcome may add
	// twice.
	Increment(ctx context.Context, row []byte, family, qualifier string, delta int64) (int64, error)

	// Close releases the store. Calls after Close return ErrClosed.
	Close() error
}

// Batcher is an optional capability: MutateRows applies mutations to many
// rows in one durable write. Each row's mutations are atomic; the rows are
// not atomic together (as Bigtable's MutateRows). The returned slice has one
// error per RowMutation (nil for success), or is nil when all succeeded; err
// is set when the call failed as a whole.
//
// A batch is not assumed safe to apply twice: puts at given timestamps and
// deletes are idempotent, but a late copy of a batch that deletes (or
// re-puts) a cell undoes a later write of it. Over a server (Idempotent)
// MutateRows carries a nonce, so the server applies it once; a caller
// whose batch is safe under any reordering declares it with
// IdempotentBatcher instead. A store without nonces (Bigtable, whose
// client re-sends a failed MutateRows) may still apply it again, late:
// there, every caller's batch must be safe under reordering.
type Batcher interface {
	MutateRows(ctx context.Context, rows []RowMutation) (errs []error, err error)
}

// Exclusive is an optional capability: a store whose every write passes
// through this process (an embedded store, or the server's own store). Only
// such a store may back in-memory indexes of its contents.
type Exclusive interface {
	// Exclusive reports whether this process is the store's only writer.
	Exclusive() bool
}

// ApplyHook is called with the mutations a write applied to a row, while
// the row's latch is still held, once the write is visible to writes of
// the row (under their latches) — for a durable call too, before its log
// sync returns: a hook that ran after the sync, with the latch released
// meanwhile, could see two writes of a row out of order. An in-memory
// index the hook keeps is lost with the process in a crash, and a failed
// sync fails the store (ErrFailed), so nothing is served from an entry a
// crash took back. It must be fast and must not call back into the
// store. The mutations belong to the store: the hook must not retain or
// modify them.
type ApplyHook func(row []byte, mutations []Mutation)

// ApplyHooker is an optional capability of exclusive stores: it lets the
// one owner keep an in-memory index in step with every write, in the
// order the writes were applied to each row.
type ApplyHooker interface {
	// SetApplyHook installs hook and returns the function that removes it
	// (idempotent). One hook at a time: while one is installed it fails
	// with an error wrapping ErrInUse, since a second owner's index would
	// miss the first's writes and the first's would go stale. Install it
	// before any concurrent use: writes that run while it is being
	// installed may not be hooked.
	SetApplyHook(hook ApplyHook) (remove func(), err error)
}

// Deferred is an optional capability of a store whose writes all pass
// through one ordered write-ahead log (the embedded Pebble store): making a
// write durable makes every write applied before it durable too. Its
// deferred variants apply and publish a write at once, exactly as the plain
// calls do, but return without waiting for it to be durable; the next
// durable write of any caller covers it. A caller uses them only for writes
// whose loss in a crash is harmless until a durable write of its own
// follows (the protocol's prewrites, which its durable commit point
// follows; and roll-forwards that the durable commit point can redo).
type Deferred interface {
	CheckAndMutateDeferred(ctx context.Context, row []byte, predicate Filter, ifTrue, ifFalse []Mutation) (matched bool, err error)
	MutateRowsDeferred(ctx context.Context, rows []RowMutation) (errs []error, err error)
}

// Conditioned is an optional capability of exclusive stores with an
// ApplyHook: CheckAndMutate whose predicate the hook's owner may decide
// from memory, sparing the store its read.
type Conditioned interface {
	// CheckAndMutateCond is CheckAndMutate in which cond decides the
	// predicate first: if decided, holds is the predicate's value and the
	// store reads nothing; otherwise the store reads predicate. cond runs
	// under the row latch, after every earlier write of the row was applied
	// and its ApplyHook called and before any later one, so an index kept
	// by the hook is exact there for this row. cond must be fast, must not
	// retain row and must not call the store; nil is never decided.
	// deferred selects the durability of the Deferred variant (a store
	// that is not Deferred makes the write durable anyway).
	CheckAndMutateCond(ctx context.Context, row []byte, cond Cond, predicate Filter, ifTrue, ifFalse []Mutation, deferred bool) (matched bool, err error)
}

// Cond decides a CheckAndMutateCond predicate from memory, or declines.
type Cond func() (holds, decided bool)

// Unlessed is an optional capability: a conditional write with a second,
// negative condition. CheckAndMutateUnless is CheckAndMutate that applies
// ifTrue only when predicate selects at least one cell and unless selects
// none, both read atomically with respect to every other call on row,
// and ifFalse otherwise; matched reports which branch ran. A nil or empty
// unless selects nothing (it is then CheckAndMutate). One round trip;
// durable on return. (The protocol's commit point: its primary lock is
// there and no reader pushed its commit timestamp past the one it
// commits at; txn/doc.go, "Reads through locks".)
type Unlessed interface {
	CheckAndMutateUnless(ctx context.Context, row []byte, predicate, unless Filter, ifTrue, ifFalse []Mutation) (matched bool, err error)
}

// CondUnlessed is the Conditioned counterpart of Unlessed: cond decides
// predicate as in CheckAndMutateCond, but unless is always read from the
// store under the row latch (the hook's owner keeps no index of it).
type CondUnlessed interface {
	CheckAndMutateCondUnless(ctx context.Context, row []byte, cond Cond, predicate, unless Filter, ifTrue, ifFalse []Mutation, deferred bool) (matched bool, err error)
}

// Counted is an optional capability: a Scan that also reports what it cost,
// as the number of stored keys it visited, selected or not: every version,
// and every deletion marker a store keeps until it compacts (so a caller
// can tell when deleted cells are still being paid for).
type Counted interface {
	// ScanCounted is Scan, returning the keys visited.
	ScanCounted(ctx context.Context, start, end []byte, filter Filter, limit int, fn func(Row) bool) (visited uint64, err error)
}

// Clock is an optional capability: the time by the store's own clock —
// the store server's, not the caller's (the embedded stores': this
// process's; the single server's: the server process's; Bigtable's: its
// servers'). Leases that several processes judge are stamped and judged in
// it, so that one fast client clock cannot break them. Its resolution is
// the store's (Bigtable: milliseconds); it is not monotonic across calls
// beyond what the server's clock is.
type Clock interface {
	Now(ctx context.Context) (time.Time, error)
}

// SharedRows is an optional capability of a backend without locality
// groups (Cloud Bigtable): its families share their rows' storage, so a
// read or scan of one family reads every family of the rows it passes,
// and a Counted scan counts them all. Protocol data that must be found
// without reading its neighbours (notifications) is then laid out in rows
// of its own by the caller.
type SharedRows interface {
	SharedRows() bool
}

// Compacter is an optional capability of a store that keeps deletion
// markers until a compaction drops them (an LSM tree): CompactFamily
// compacts one family's keyspace, so that cells deleted before the call no
// longer cost its scans. It changes no cell; it may take long on a large
// family and is meant to run in the background.
type Compacter interface {
	CompactFamily(ctx context.Context, family string) error
}

// Reserver is an optional capability of a store on a local disk that
// keeps a reserve of space for the writes that free space: while the disk
// is nearly full (LowOnSpace) it refuses every other write with
// ErrNoSpace, and lets those whose context WithReserve marks use the
// reserve, so that garbage collection, which needs log space to free
// space, still works.
type Reserver interface {
	LowOnSpace() bool
}

type reserveKey struct{}

// WithReserve marks ctx's writes as ones a Reserver lets use its reserve
// of disk space: writes that free space (the garbage collector's removals
// and the lock resolutions they need).
func WithReserve(ctx context.Context) context.Context {
	return context.WithValue(ctx, reserveKey{}, true)
}

// UsesReserve reports whether WithReserve marked ctx.
func UsesReserve(ctx context.Context) bool {
	v, _ := ctx.Value(reserveKey{}).(bool)
	return v
}

// Idempotent is an optional capability of a store reached over a network,
// whose client resends a call whose outcome it did not learn, with a nonce
// for calls that are not safe to apply twice (storage/remote). A caller
// whose CheckAndMutate is safe to apply twice, in any order — a late
// duplicate changes nothing once the first has applied, whatever was
// written since (DESIGN invariant 6: the protocol's prewrites, commits and
// rollbacks) — sends it through this variant, which carries no nonce and
// so keeps the server's nonce table small. The call site says why it is
// safe.
type Idempotent interface {
	CheckAndMutateIdempotent(ctx context.Context, row []byte, predicate Filter, ifTrue, ifFalse []Mutation) (matched bool, err error)
}

// IdempotentBatcher is the Batcher counterpart of Idempotent: a caller
// whose batch is safe to apply twice under any reordering — a late copy,
// landing after any later write, changes nothing that write made (the
// protocol's secondary commits: a commit record at commit_ts, and a lock
// erased only at its exact start_ts) — sends it through this variant,
// without the nonce plain MutateRows carries over a server. The call site
// says why it is safe. A store implements it where plain MutateRows
// carries a nonce (storage/remote); elsewhere the caller uses MutateRows.
type IdempotentBatcher interface {
	MutateRowsIdempotent(ctx context.Context, rows []RowMutation) (errs []error, err error)
}

// RowCheck is one row's CheckAndMutate within a batch of them
// (Epoched.CheckAndMutateRowsDeferred, Epoched.CheckAndMutateInEpoch).
type RowCheck struct {
	Row       []byte
	Predicate Filter
	// Unless, when not empty, makes the check as Unlessed's: the
	// predicate holds only when Predicate selects a cell and Unless
	// selects none. Every Epoched store honours it.
	Unless          Filter
	IfTrue, IfFalse []Mutation
}

// ErrEpochChanged is returned by Epoched.CheckAndMutateInEpoch when the
// server has restarted since the epoch the caller gave: nothing was
// applied.
var ErrEpochChanged = errors.New("storage: the server restarted since the epoch given")

// Epoched is an optional capability of a store reached over a network
// whose server commits every write through one ordered write-ahead log (a
// percolator server over Pebble). The server counts its runs, its epoch,
// raised durably at each start before it serves. A write the server
// applied without waiting for its log sync is durable once a synced write
// it applied later in the same run has returned; a restart may lose it,
// and ends the run. So a caller that holds acknowledgements of deferred
// writes made in epoch e, and makes a durable write in epoch e, knows all
// of them durable with it; CheckAndMutateInEpoch refuses the durable
// write in any other epoch. (txn/doc.go, "Durability over RPC", argues
// the protocol's use.)
type Epoched interface {
	// CheckAndMutateRowsDeferred runs each check as CheckAndMutate would,
	// every row under its latch, and applies the branches chosen in one
	// write, without waiting for its log sync. matched[i] reports checks[i]'s
	// branch; epoch is the server's run that applied them. The rows must be
	// distinct. Each check stands on its own: a matched predicate in one
	// row changes nothing in another.
	CheckAndMutateRowsDeferred(ctx context.Context, checks []RowCheck) (matched []bool, epoch uint64, err error)
	// CheckAndMutateInEpoch runs check as CheckAndMutate would and, when
	// its predicate matched, also applies then (mutations of other rows,
	// each row once) in the same durable write; all of it only while the
	// server's run is still epoch, else it applies nothing and fails with
	// ErrEpochChanged.
	CheckAndMutateInEpoch(ctx context.Context, epoch uint64, check RowCheck, then []RowMutation) (matched bool, err error)
}

// EpochStamper is an optional capability of an Epoched store whose
// process also runs the timestamp oracle (a percolator server): a commit
// point whose commit timestamp the store takes (txn/doc.go, "Durability
// over RPC", step 2). CommitInEpoch runs as CheckAndMutateInEpoch and,
// when check's predicate matched (and its Unless selected nothing),
// takes a timestamp from its process's oracle under the latches of every
// row it writes, after the predicate was read, and applies check.IfTrue,
// then, and stamped (puts only, each of check's row or a row of then;
// each mutation's Time replaced by the timestamp) in one durable write.
// commitTS is the timestamp, 0 when the predicate did not match (nothing
// applied, none taken). If observers is not nil, the store reads the
// observer registry's stored version once the timestamp is taken and
// fails with ErrObserversMoved, applying nothing, unless it is
// *observers. ErrNoOnePhase: the store cannot take a timestamp or read
// the version (an older server), nothing applied.
type EpochStamper interface {
	CommitInEpoch(ctx context.Context, epoch uint64, check RowCheck, then, stamped []RowMutation, observers *uint64) (commitTS uint64, matched bool, err error)
}

// ErrNoOnePhase is returned by OnePhaser.CommitOnePhase when the store
// cannot take a commit timestamp itself (no oracle of its process was
// attached to it): nothing was applied, and the caller commits in two
// phases.
var ErrNoOnePhase = errors.New("storage: this store takes no one-phase commits")

// Stamper is the oracle of the process that owns a store, as the store
// sees it for one-phase commits (oracle.Allocator): Allocate(ctx, 1)
// hands out a timestamp above every one handed out before.
type Stamper interface {
	Allocate(ctx context.Context, n int) (uint64, error)
}

// ErrObserversMoved is returned by OnePhaser.CommitOnePhase when the
// observer registry's version is no longer the one the commit was built
// under: nothing was applied, and the caller commits in two phases.
var ErrObserversMoved = errors.New("storage: the observer registry changed since the commit was built")

// AppendStamped appends to dst every mutation of stamped with its
// timestamp replaced by ts: a one-phase commit's commit records.
func AppendStamped(dst, stamped []Mutation, ts uint64) []Mutation {
	for _, m := range stamped {
		m.TS = ts
		dst = append(dst, m)
	}
	return dst
}

// OnePhaser is an optional capability of a store owned by one process
// that also runs the timestamp oracle (an embedded Pebble store, a
// percolator server): a one-row transaction commits in one call
// (txn/doc.go, "One-phase commit"). Under row's latch, if predicate
// selects no cell, the store takes a commit timestamp from its process's
// oracle (a Stamper); then, if observers is not nil, it reads the
// observer registry's stored version and fails with ErrObserversMoved
// unless it is *observers; then it applies mutations, and stamped with
// every mutation's Time replaced by the timestamp, in one durable write.
// Every read of the store that begins after the timestamp was handed out
// returns the write (it waits while the commit is in flight). conflict reports
// that predicate selected a cell: nothing was applied, no timestamp
// taken. A conflict is final: it is reported only where no other copy
// of the call may still apply; a store that sends a call again (over a
// network) reports a refusal answered to a copy sent again as
// ErrUnavailable, since the earlier copy may have applied or may land
// later, once what refused this one is gone. ErrNoOnePhase: the store
// has no oracle attached, or cannot read the registry's version.
type OnePhaser interface {
	CommitOnePhase(ctx context.Context, row []byte, predicate Filter, mutations, stamped []Mutation, observers *uint64) (commitTS uint64, conflict bool, err error)
}

// StampSize is the size of the timestamp an AsyncPrewriter writes into
// the end of each stamped value: big-endian.
const StampSize = 8

// AsyncCheck is one row of an async-commit transaction's prewrites
// (AsyncPrewriter): applied only where Predicate selects no cell of Row.
type AsyncCheck struct {
	Row       []byte
	Predicate Filter
	// Mutations apply as they are. Stamped are puts whose value ends in
	// StampSize bytes that the store overwrites with the timestamp it
	// took (a lock's min_commit_ts: the record is the caller's, the
	// store writes only those bytes).
	Mutations, Stamped []Mutation
}

// AsyncPrewriter is an optional capability of a store owned by one
// process that also runs the timestamp oracle (an embedded Pebble store,
// a percolator server): the prewrites of an async-commit transaction
// (txn/doc.go, "Async commit"). PrewriteAsync latches every row of
// checks (distinct rows), marks them as committing, and reads each
// predicate; if some select no cell, the store takes a timestamp ts from
// its process's oracle (a Stamper); then, if observers is not nil, it
// fails with ErrObserversMoved unless the observer registry's stored
// version is *observers; then it applies, in one durable write, the
// Mutations and the Stamped puts (their values' last StampSize bytes set
// to ts) of every check whose predicate selected nothing. Every read of
// the store that begins after ts was handed out returns the write (it
// waits while the call is in flight). conflict[i] reports that checks[i]'s
// predicate selected a cell: nothing was applied to its row. When every
// predicate did, nothing is applied and ts is 0. ErrNoOnePhase: the
// store has no oracle attached, or cannot read the registry's version.
type AsyncPrewriter interface {
	PrewriteAsync(ctx context.Context, checks []AsyncCheck, observers *uint64) (ts uint64, conflict []bool, err error)
}

// StampValues appends to dst every mutation of stamped with a copy of its
// value whose last StampSize bytes are ts, big-endian: an async
// prewrite's stamped puts as the store writes them. Each value must be
// at least StampSize long (CheckAsyncChecks).
func StampValues(dst, stamped []Mutation, ts uint64) []Mutation {
	for _, m := range stamped {
		v := append([]byte(nil), m.Value...)
		binary.BigEndian.PutUint64(v[len(v)-StampSize:], ts)
		m.Value = v
		dst = append(dst, m)
	}
	return dst
}

// RowRead is one row's read within MultiReader.ReadRows.
type RowRead struct {
	Row    []byte
	Filter Filter
}

// FreshReader is an optional capability of a store reached over a
// network whose process also runs the timestamp oracle (a percolator
// server): ReadRowsFresh takes a timestamp ts from that oracle, and then
// reads each row as MultiReader.ReadRows would, with every selector's
// time range cut to the versions below ts: a transaction's start
// timestamp and its first reads in one round trip (txn/doc.go,
// "Durability over RPC"). Every read waits, as a read does, for the
// commits in flight that a reader at ts must see, and names at least
// one selector (ErrInvalidArgument). ErrNoOnePhase: the store cannot
// take a timestamp (an older server), nothing read.
type FreshReader interface {
	ReadRowsFresh(ctx context.Context, reads []RowRead) (ts uint64, rows []Row, err error)
}

// CutBefore returns f with every selector's time range cut to the
// versions below ts, leaving out a selector left with none: a
// FreshReader's filters once it took ts. An empty result of a filter
// that was not empty selects nothing (an empty filter would select
// every cell).
func CutBefore(f Filter, ts uint64) Filter {
	out := make(Filter, 0, len(f))
	for _, s := range f {
		if s.Time.Start >= ts {
			continue
		}
		if s.Time.End == 0 || s.Time.End > ts {
			s.Time.End = ts
		}
		out = append(out, s)
	}
	return out
}

// MultiReader is an optional capability of a store reached over a
// network: ReadRows reads several rows in one round trip, each as ReadRow
// would (rows[i] answers reads[i]). Each row's read is consistent on its
// own; the rows are not read at one instant together.
type MultiReader interface {
	ReadRows(ctx context.Context, reads []RowRead) ([]Row, error)
}
