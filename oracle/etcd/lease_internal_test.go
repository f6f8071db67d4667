package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/oracle"
)

// TestLeaseDeadline drives the lease check with a fake monotonic clock:
// usable strictly before send + TTL − margin, not at it; a late
// acknowledgement of an older renewal never moves the deadline back; a
// lost lease is unusable however early.
func TestLeaseDeadline(t *testing.T) {
	l := &lease{id: 7, ttl: 2 * time.Second, margin: 200 * time.Millisecond}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	defer l.cancel(nil)
	l.confirm(10*time.Second, l.ttl) // deadline 11.8s
	for _, c := range []struct {
		now time.Duration
		ok  bool
	}{{0, true}, {11800*time.Millisecond - 1, true}, {11800 * time.Millisecond, false}, {12 * time.Second, false}} {
		err := l.usable(c.now)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, oracle.ErrNotLeader)) {
			t.Errorf("usable at %v: %v; want ok=%v", c.now, err, c.ok)
		}
	}
	l.confirm(9*time.Second, l.ttl) // an older renewal, acknowledged late
	if err := l.usable(11800*time.Millisecond - 1); err != nil {
		t.Errorf("an older renewal moved the deadline back: %v", err)
	}
	l.confirm(11*time.Second, 3*time.Second) // etcd granted a longer TTL
	if err := l.usable(13800*time.Millisecond - 1); err != nil {
		t.Errorf("after a renewal sent at 11s with TTL 3s: %v", err)
	}
	l.lose(errors.New("gone"))
	if err := l.usable(0); !errors.Is(err, oracle.ErrNotLeader) {
		t.Errorf("a lost lease: %v", err)
	}
}

// TestMarkEncoding: stored marks compare bytewise as they do as numbers,
// which the mark write's "below" condition relies on; a value that is not
// 8 bytes is corrupt, never zero.
func TestMarkEncoding(t *testing.T) {
	vals := []uint64{0, 1, 255, 256, 1 << 32, oracle.MaxTimestamp, oracle.MaxTimestamp + 1}
	for i, x := range vals {
		got, err := decodeMark("k", []byte(encodeMark(x)))
		if err != nil || got != x {
			t.Fatalf("round trip %d: %d, %v", x, got, err)
		}
		for _, y := range vals[i+1:] {
			if !(encodeMark(x) < encodeMark(y)) {
				t.Fatalf("%d and %d do not compare as numbers", x, y)
			}
		}
	}
	for _, bad := range [][]byte{nil, {1}, make([]byte, 9), []byte(encodeMark(oracle.MaxTimestamp + 2))} {
		if _, err := decodeMark("k", bad); !errors.Is(err, oracle.ErrCorruptMark) {
			t.Errorf("decode %x: %v; want ErrCorruptMark", bad, err)
		}
	}
}
