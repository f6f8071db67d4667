package coord

import (
	"context"
	"testing"
)

func TestLocalLiveness(t *testing.T) {
	ctx := context.Background()
	l := NewLocal()
	a, b := NewOwnerID(), NewOwnerID()
	if a == b {
		t.Fatalf("owner ids repeat: %q", a)
	}
	l.Register(a)
	if ok, _ := l.Alive(ctx, a); !ok {
		t.Fatal("registered owner reported dead")
	}
	if ok, _ := l.Alive(ctx, b); ok {
		t.Fatal("unknown owner reported alive")
	}
	l.Unregister(a)
	if ok, _ := l.Alive(ctx, a); ok {
		t.Fatal("unregistered owner reported alive")
	}
}

func TestLocalLocker(t *testing.T) {
	ctx := context.Background()
	l := NewLocalLocker()
	unlock, held, err := l.TryLock(ctx, "row", "a")
	if err != nil || held {
		t.Fatalf("first TryLock: held %v, err %v", held, err)
	}
	for _, owner := range []string{"b", "a"} {
		if _, held, _ := l.TryLock(ctx, "row", owner); !held {
			t.Fatalf("TryLock by %s of a held key succeeded", owner)
		}
	}
	if _, held, _ := l.TryLock(ctx, "other", "b"); held {
		t.Fatal("an unrelated key was held")
	}
	unlock()
	unlock() // idempotent: must not release b's later lock
	unlockB, held, _ := l.TryLock(ctx, "row", "b")
	if held {
		t.Fatal("released key still held")
	}
	unlock()
	if _, held, _ := l.TryLock(ctx, "row", "c"); !held {
		t.Fatal("a stale unlock released another owner's lock")
	}
	unlockB()
	if n := l.Held(); n != 1 {
		t.Fatalf("Held = %d, want 1 (other)", n)
	}
}
