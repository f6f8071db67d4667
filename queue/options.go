package queue

import (
	"fmt"
	"time"
)

// Options configures a Queue. The zero value is the defaults.
type Options struct {
	// MaxDeliveries is how many times an item is delivered before it
	// moves to the dead letters; 0 means 5.
	MaxDeliveries int
	// Drift is ρ, the relative drift of this process's monotonic clock
	// against the store's that a lease tolerates: a worker stops acting
	// at its Pop's send time + TTL × (1 − Drift) (Delivery.Valid). 0
	// means 0.01.
	Drift float64
	// Grace is L, the longest an index entry's write may take from the
	// clock reading its time came from (past that time) to its reply
	// before the writer deletes it and writes it anew from a fresh
	// reading; the shared cursor stays twice Grace behind the store's
	// time, and an entry written for a state change that has not applied
	// after twice Grace is fenced off (the change can no longer apply)
	// and deleted. 0 means 2s.
	Grace time.Duration
	// CatchUp is how often the shared cursor is advanced (by one
	// process at a time); entries written late are delivered within
	// Grace + CatchUp. 0 means 1s.
	CatchUp time.Duration
	// Retention is how long an acked item's mark stays (a re-sent Ack or
	// PushAgain finds it there: a PushAgain after it is gone pushes the
	// item again); 0 means 1 minute.
	Retention time.Duration
	// MaxBackOff bounds an idle Pop's wait between looks; 0 means 100ms.
	MaxBackOff time.Duration
}

// validate refuses options out of range (ErrInvalidArgument).
func (o *Options) validate() error {
	switch {
	case o.MaxDeliveries < 0:
		return fmt.Errorf("%w: MaxDeliveries %d", ErrInvalidArgument, o.MaxDeliveries)
	case o.Drift < 0 || o.Drift >= 0.5:
		return fmt.Errorf("%w: Drift %v (0 to 0.5)", ErrInvalidArgument, o.Drift)
	case o.Grace < 0 || o.CatchUp < 0 || o.Retention < 0 || o.MaxBackOff < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidArgument)
	}
	return nil
}

// ensureDefaults sets the zero fields to their defaults.
func (o *Options) ensureDefaults() {
	if o.MaxDeliveries == 0 {
		o.MaxDeliveries = 5
	}
	if o.Drift == 0 {
		o.Drift = 0.01
	}
	if o.Grace == 0 {
		o.Grace = 2 * time.Second
	}
	if o.CatchUp == 0 {
		o.CatchUp = time.Second
	}
	if o.Retention == 0 {
		o.Retention = time.Minute
	}
	if o.MaxBackOff == 0 {
		o.MaxBackOff = 100 * time.Millisecond
	}
}
