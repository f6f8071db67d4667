// Package rpc holds what the percolator server and its clients share
// beyond the generated code (rpc/rpcpb): conversions between the storage
// model and its wire form, the token header, the status messages both
// sides recognise, and Dial, the client connection every remote client
// (storage/remote, oracle and coord clients) is built on.
package rpc

// TokenHeader is the metadata key carrying the shared token, as
// "Bearer TOKEN".
const TokenHeader = "authorization"

// Status message prefixes of the nonce table's refusals (FailedPrecondition).
const (
	MsgUnknownGroup = "unknown nonce group"
	MsgBelowMark    = "nonce below mark"
)
