package server

import "context"

// FlushNonces writes what the nonce table has collected now, as the
// background flush does every FlushInterval (tests).
func (s *Server) FlushNonces(ctx context.Context) error { return s.nonces.flush(ctx) }
