// Package rpc holds what the percolator server and its clients share
// beyond the generated code (rpc/rpcpb): conversions between the storage
// model and its wire form, the token header, the status messages both
// sides recognise, and Dial, the client connection every remote client
// (storage/remote, oracle and coord clients) is built on.
//
// # Budgets
//
// Every call a client makes is bounded, whatever the server does (down,
// restarting, shutting down, or behind a blackholed connection, where
// TCP stays open and only deadlines notice):
//
//  1. Each attempt by DialOptions.CallTimeout (default 10s), or by what is
//     left of the budgets below if less. For a stream (Conn.Stream) it
//     bounds each wait for the next message, not the stream.
//  2. A call's retries by DialOptions.RetryBudget (default 30s,
//     DefaultRetryBudget; the CLI's --retry-budget, percolator.Options
//     RetryBudget): a call the server does not answer for that long fails
//     with ErrUnavailable, naming the server and saying which budget ran
//     out. A stream's budget counts from its last message, so a long scan
//     is resumed after any number of breaks while it receives, and fails
//     within the budget once it does not.
//  3. An operation (WithOperation: txn marks a commit with its abort and
//     cleanup, a read with its lock waits) shares one retry budget among
//     its calls, counted from its last answer: once spent, its later calls
//     fail at once, so a caller that re-sends does not multiply it. A
//     commit whose server stays away therefore fails within the budget,
//     not a budget per call.
//  4. After an operation's context ends (a signal, a caller's deadline),
//     its calls under context.WithoutCancel (cleanup: a rollback, a
//     commit point finishing, counters flushed) have
//     DialOptions.CleanupBudget (default 1s) left, attempts in flight
//     included. WithCleanup gives a long-lived context (a command's) this
//     bound alone.
//  5. Dial retries its Ping within the retry budget (a server restarting),
//     honouring its context; what fails the same way every time (the
//     token, the certificate, a TLS server dialed in plaintext) fails at
//     once. A connection closed before the server's HTTP/2 preface is
//     blamed on TLS only when the address completes a TLS handshake: a
//     connection cut for another reason (a restart, the network) gets no
//     TLS hint.
//
// A failure that says the request was refused (any status but
// Unavailable, DeadlineExceeded, Aborted) is an answer: it is returned at
// once and counts as the server answering.
package rpc

// TokenHeader is the metadata key carrying the shared token, as
// "Bearer TOKEN".
const TokenHeader = "authorization"

// ReserveHeader is the metadata key that carries storage.WithReserve's
// mark across a call: a Conn sends it (as "1") on every unary call whose
// context is so marked, and the server marks the call's context in turn,
// so that a write that frees space or finishes a transaction already
// prewritten may use a nearly full store's reserve.
const ReserveHeader = "percolator-reserve"

// Status message prefixes of the nonce table's refusals (FailedPrecondition).
const (
	MsgUnknownGroup = "unknown nonce group"
	MsgBelowMark    = "nonce below mark"
)

// MsgEpochChanged begins the message of the FailedPrecondition status that
// refuses a write in an epoch the server no longer runs
// (storage.ErrEpochChanged).
const MsgEpochChanged = "epoch changed"

// MsgObserversMoved and MsgNoOnePhase begin the messages of the
// FailedPrecondition statuses that refuse a one-phase commit, having
// applied nothing (storage.ErrObserversMoved, storage.ErrNoOnePhase).
const (
	MsgObserversMoved = "observers moved"
	MsgNoOnePhase     = "no one-phase commit"
)
