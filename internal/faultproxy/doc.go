// Package faultproxy is a TCP proxy for tests that sits between clients
// and a server (gRPC over h2c, or any TCP stream in pass-through mode) and
// gives the faults a network gives: it loses a response after the server
// applied the call (to test nonces, HBase-style: a client retries a
// non-idempotent call whose reply was lost, and the server must not apply
// it twice), cuts connections, refuses new ones, blackholes them (a
// partition in which TCP stays open) and delays them. A Nemesis does all
// of it at random, from a seed.
//
// # Use
//
//  1. Start the server, then New(serverAddr), or NewWithOptions(serverAddr,
//     Options{PassThrough: true}) in front of TLS or anything that is not
//     h2c; dial the client to Proxy.Addr() (e.g. "passthrough:///"+p.Addr()
//     for gRPC, "http://"+p.Addr() for etcd's client).
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
//     SetBlackhole(true) holds every connection, current and new, without
//     closing any (the server is unreachable, and the clients only learn
//     it from deadlines and keepalives); SetBlackhole(false) lets the held
//     bytes go on. SetDelay adds latency to every connection.
//  4. One connection: Conns lists the open ones (oldest first), WaitConns
//     waits until there are n, RandomConn picks one with a given
//     generator. A Conn can be cut (Cut), blackholed and resumed
//     (Blackhole, Resume), delayed (SetDelay, per direction, fixed or
//     uniformly random latency) and armed to lose its own next response
//     (DropNextResponse). Done tells when it has closed.
//  5. StartNemesis(opts, proxies...) cuts, blackholes and delays random
//     connections of the proxies at the given rates for opts.Duration or
//     until Stop, logging each action and its seed; Stop heals what it
//     did and waits for its goroutine.
//  6. Close closes the listener and every connection and returns only
//     when every goroutine the proxy started has ended.
//
// # Guarantees
//
//  1. Client→server bytes are forwarded unchanged and unparsed; so are
//     server→client bytes in pass-through mode.
//  2. Otherwise server→client bytes are parsed as HTTP/2 frames from byte 0
//     (a server sends no connection preface). Each frame is forwarded
//     whole, in one write; without a delay or blackhole, as soon as its
//     last byte has arrived: the proxy never waits for a later frame, and
//     a frame that arrives in pieces is reassembled.
//  3. No byte of a dropped frame, nor of anything after it on that
//     connection, reaches the client; every frame before it does (after
//     its delay, if any), and then both sides are closed.
//  4. One arming drops one response. Frames on stream 0 (SETTINGS, PING,
//     WINDOW_UPDATE, GOAWAY) and frames of other types on any stream
//     (RST_STREAM, WINDOW_UPDATE, PRIORITY) never trigger it. The stream
//     id's reserved top bit is ignored. A connection's own arming is taken
//     before the proxy's, which then waits for the next response.
//  5. When one side ends its stream cleanly (EOF; at a frame boundary for
//     the server when parsed) the proxy half-closes the other side, after
//     the bytes before the end, and keeps the reverse direction open. A
//     read error or a drop closes both sides after the bytes before it
//     have been forwarded; a failed write, Cut or Close closes both sides
//     at once, losing what the proxy holds.
//  6. Bytes of one connection and direction are written in the order they
//     were read, whatever the delays: each chunk (a read, or a frame when
//     parsed) waits for its own latency, drawn when it is read, and for the
//     chunk before it. Up to 256 chunks per direction are in flight at
//     once, so a delay caps throughput only beyond that.
//  7. A blackholed connection writes nothing either way, ends included
//     (FIN or a close the other side caused), and closes nothing; what it
//     holds is forwarded in order when the blackhole lifts. Cut and Close
//     still close it.
//  8. Random delays are drawn from Options.Seed; a nemesis's plan (when
//     each fault comes, which kind, for how long, which connection by
//     position) from its seed alone.
//  9. Every method is safe for concurrent use; methods of a closed Conn
//     that would change it fail with ErrConnClosed, and bad arguments with
//     ErrInvalidArgument, changing nothing.
//
// # Limits
//
//  1. In parsing mode, a TLS stream's frames are garbage to the proxy: use
//     pass-through, which refuses drops (ErrPassThrough), for TLS.
//  2. The proxy-wide drop is the next response frame on the proxy as a
//     whole, not of a particular call: arm it while only the call under
//     test is in flight, or the frame of another stream (say a late
//     trailer) may be the one dropped. A Conn's drop narrows it to one
//     connection, not one call.
//  3. The proxy does not validate HTTP/2: it trusts the length field (up to
//     2^24-1 bytes, held in memory) and ignores flags and padding. A frame
//     cut short by the server's close is not forwarded.
//  4. SetRefuse accepts and then closes the connection, so the client sees
//     an EOF rather than ECONNREFUSED; connections open before it stay
//     open (call Cut as well to simulate a crash).
//  5. Cut and SetRefuse act on connections the proxy has accepted; one
//     still in the listener's backlog is judged when it is accepted. A
//     Conn is listed, and can be acted on alone, only once its dial to the
//     target has succeeded.
//  6. If dialing the target fails, the client's connection is closed.
//  7. A blackhole holds bytes, it does not stop the proxy reading them:
//     up to 256 chunks per direction are read and held (a frame whose
//     reading completes while held is judged for a drop then), after
//     which TCP's own buffers fill and the sender blocks. A connection
//     accepted under SetBlackhole(true) is dialed to the target at once
//     (the server sees an idle connection, where a real partition would
//     lose the SYN). A blackholed connection whose client gave up stays
//     open until resumed, cut or closed.
//  8. Which connection a random choice hits depends on which are open,
//     which depends on timing: a replay repeats the plan, not necessarily
//     the run.
//  9. A Conn's own blackhole and delay are shared with a nemesis running
//     on its proxy, which resets them when it heals: use the proxy-wide
//     faults beside a nemesis.
package faultproxy
