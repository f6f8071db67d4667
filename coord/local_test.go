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
