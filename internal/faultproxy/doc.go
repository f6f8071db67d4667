// Package faultproxy is a TCP proxy for tests that sits between a gRPC
// client and a gRPC server and can lose a response after the server has
// applied the call. It exists to test nonces (HBase-style): a client
// retries a non-idempotent call whose reply was lost, and the server must
// not apply it twice.
//
// # Use
//
//  1. Start the server, then New(serverAddr); dial the client to
//     Proxy.Addr() (plaintext HTTP/2, e.g. "passthrough:///"+p.Addr()).
//  2. DropNextResponse arms the proxy. The next HEADERS or DATA frame the
//     server sends on a non-zero stream, on any connection, is dropped with
//     everything after it, and both TCP connections of that link are
//     closed. The handler has run by then (a gRPC server sends no frame on
//     a stream before its handler produces one), so the client sees
//     codes.Unavailable for a call the server applied. Dropped counts the
//     responses lost this way. DropNextResponseThenRefuse does the same and,
//     with the drop, refuses new connections as SetRefuse(true): the
//     client's retry waits until the test calls SetRefuse(false), having
//     restarted the server or written through another client meanwhile.
//  3. Cut closes every current connection (a network failure: the client
//     sees Unavailable, the server sees its stream's context canceled).
//     SetRefuse(true) closes each new connection at once without dialing
//     the server (the server is down); SetRefuse(false) undoes it.
//  4. Close closes the listener and every connection and returns only
//     when every goroutine the proxy started has ended.
//
// # Guarantees
//
//  1. Client→server bytes are forwarded unchanged and unparsed.
//  2. Server→client bytes are parsed as HTTP/2 frames from byte 0 (a server
//     sends no connection preface). Each frame is forwarded whole, in one
//     write, as soon as its last byte has arrived: the proxy never waits
//     for a later frame, and a frame that arrives in pieces is reassembled.
//  3. No byte of a dropped frame, nor of anything after it on that
//     connection, reaches the client; every frame before it does.
//  4. One arming drops one response. Frames on stream 0 (SETTINGS, PING,
//     WINDOW_UPDATE, GOAWAY) and frames of other types on any stream
//     (RST_STREAM, WINDOW_UPDATE, PRIORITY) never trigger it. The stream
//     id's reserved top bit is ignored.
//  5. When one side ends its stream cleanly (EOF; at a frame boundary for
//     the server) the proxy half-closes the other side and keeps the
//     reverse direction open; any error, Cut, a drop or Close closes both
//     sides at once.
//  6. Every method is safe for concurrent use.
//
// # Limits
//
//  1. Plaintext HTTP/2 (h2c) only: a TLS stream is not parsed, its frames
//     are garbage to the proxy.
//  2. The drop is the next response frame on the proxy as a whole, not of
//     a particular call: arm it while only the call under test is in
//     flight, or the frame of another stream (say a late trailer) may be
//     the one dropped.
//  3. The proxy does not validate HTTP/2: it trusts the length field (up to
//     2^24-1 bytes, held in memory) and ignores flags and padding. A frame
//     cut short by the server's close is not forwarded.
//  4. SetRefuse accepts and then closes the connection, so the client sees
//     an EOF rather than ECONNREFUSED; connections open before it stay
//     open (call Cut as well to simulate a crash).
//  5. Cut and SetRefuse act on connections the proxy has accepted; one
//     still in the listener's backlog is judged when it is accepted.
//  6. If dialing the target fails, the client's connection is closed.
package faultproxy
