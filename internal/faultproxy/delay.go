package faultproxy

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Direction selects which way bytes flow through a connection. Values
// combine with |.
type Direction uint8

const (
	// ToServer is the client→server direction.
	ToServer Direction = 1 << iota
	// ToClient is the server→client direction.
	ToClient
	// BothWays is both directions.
	BothWays = ToServer | ToClient
)

// String names d for logs.
func (d Direction) String() string {
	switch d {
	case ToServer:
		return "to-server"
	case ToClient:
		return "to-client"
	case BothWays:
		return "both-ways"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// validate accepts a non-empty combination of ToServer and ToClient.
func (d Direction) validate() error {
	if d == 0 || d&^BothWays != 0 {
		return fmt.Errorf("%w: direction %d (want ToServer, ToClient or BothWays)", ErrInvalidArgument, uint8(d))
	}
	return nil
}

// dirs are the single directions, in the order of the per-direction
// arrays below (index 0: ToServer, 1: ToClient).
var dirs = [2]Direction{ToServer, ToClient}

// index returns a single direction's index in dirs.
func (d Direction) index() int {
	if d == ToServer {
		return 0
	}
	return 1
}

// Delay is the latency added to every chunk of bytes read from one side
// before it is written to the other: Min when Max is zero or equal to
// Min, otherwise drawn uniformly from [Min, Max] for each chunk. The zero
// Delay adds none. A chunk is never written before the chunk read before
// it on the same connection and direction, whatever their draws.
type Delay struct {
	Min, Max time.Duration
}

// Fixed returns a Delay of exactly d.
func Fixed(d time.Duration) Delay { return Delay{Min: d} }

// Uniform returns a Delay drawn uniformly from [lo, hi] for each chunk.
func Uniform(lo, hi time.Duration) Delay { return Delay{Min: lo, Max: hi} }

// String formats d for logs.
func (d Delay) String() string {
	if d.Max <= d.Min {
		return d.Min.String()
	}
	return fmt.Sprintf("%v..%v", d.Min, d.Max)
}

func (d Delay) validate() error {
	if d.Min < 0 || d.Max < 0 || (d.Max != 0 && d.Max < d.Min) {
		return fmt.Errorf("%w: delay %v..%v (want 0 <= Min <= Max, or Max 0)", ErrInvalidArgument, d.Min, d.Max)
	}
	return nil
}

// sample draws one chunk's latency from rng.
func (d Delay) sample(rng *rand.Rand) time.Duration {
	if d.Max <= d.Min {
		return d.Min
	}
	return d.Min + time.Duration(rng.Int64N(int64(d.Max-d.Min)+1))
}
