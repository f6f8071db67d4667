package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// hooked passes a locker's conditional writes through onCAM, which may
// hold them (a slow network) or apply them and lose the reply; it
// forwards the clock.
type hooked struct {
	storage.Store
	onCAM func(muts []storage.Mutation, apply func() (bool, error)) (bool, error)
}

func (h *hooked) Now(ctx context.Context) (time.Time, error) { return h.Store.(storage.Clock).Now(ctx) }

func (h *hooked) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, a, b []storage.Mutation) (bool, error) {
	apply := func() (bool, error) { return h.Store.CheckAndMutate(ctx, row, p, a, b) }
	if h.onCAM == nil {
		return apply()
	}
	return h.onCAM(append(slices.Clip(a), b...), apply)
}

// writes reports whether muts put a cell of qualifier qual.
func writes(muts []storage.Mutation, qual string) bool {
	for _, m := range muts {
		if m.Kind == storage.Put && m.Qualifier == qual {
			return true
		}
	}
	return false
}

// isGrant and isRenewal tell a locker's conditional writes apart: a grant
// takes a token, a renewal rewrites the holder cell alone.
func isGrant(muts []storage.Mutation) bool { return writes(muts, qualToken) }
func isRenewal(muts []storage.Mutation) bool {
	return writes(muts, qualHolder) && !writes(muts, qualToken)
}

var errLost = errors.New("test: applied, reply lost")

// hangGuard bounds a wait that only a hang can make long.
const hangGuard = 20 * time.Second

func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hangGuard):
		t.Errorf("%s: still waiting after %v", what, hangGuard)
	}
}

// acquired is a lease and the local time its Acquire returned.
type acquired struct {
	l   *Lease
	at  time.Time
	err error
}

func acquireAsync(lk *Locker, name string, ttl time.Duration) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := lk.Acquire(ctx, name, ttl)
		ch <- acquired{l, time.Now(), err}
	}()
	return ch
}

// notBoth fails when the lease of the lower token was still valid by its
// holder's clock when the Acquire of the higher one returned (two holders
// acting at once).
func notBoth(t *testing.T, x, y acquired) {
	t.Helper()
	if x.err != nil || y.err != nil {
		t.Fatal(x.err, y.err)
	}
	if x.l.Token > y.l.Token {
		x, y = y, x
	}
	if x.l.Token == y.l.Token {
		t.Fatalf("token %d granted twice", x.l.Token)
	}
	if x.l.Deadline().After(y.at) {
		t.Fatalf("token %d's holder may act until %v after token %d was granted", x.l.Token, x.l.Deadline().Sub(y.at).Round(time.Millisecond), y.l.Token)
	}
}

// TestDelayedRenewalSeenByGrant: a renewal sent while the lease was live
// but landing after a waiter judged it expired, between the waiter's read
// and its grant: the grant must see the renewal (and fail), or the
// renewal must fail; never both succeed.
func TestDelayedRenewalSeenByGrant(t *testing.T) {
	st := memory.New()
	defer st.Close()
	const ttl = 150 * time.Millisecond
	grantSent, renewed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	aStore := &hooked{Store: st}
	bStore := &hooked{Store: st, onCAM: func(muts []storage.Mutation, apply func() (bool, error)) (bool, error) {
		first := false
		if isGrant(muts) {
			once.Do(func() { first = true })
		}
		if first { // the waiter has read the row and judged the lease expired
			close(grantSent)
			await(t, renewed, "the renewal")
		}
		return apply()
	}}
	a, err := New(aStore, Options{Holder: "a", MaxBackOff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(bStore, Options{Holder: "b", MaxBackOff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	la, err := a.Acquire(ctx, "r", ttl)
	if err != nil {
		t.Fatal(err)
	}
	aStore.onCAM = func(muts []storage.Mutation, apply func() (bool, error)) (bool, error) {
		if !isRenewal(muts) {
			return apply()
		}
		await(t, grantSent, "the waiter's grant") // in the network until the waiter's grant is on its way
		defer close(renewed)
		return apply()
	}
	bGot := acquireAsync(b, "r", ttl)
	time.Sleep(ttl * 2 / 3) // renewed late in the lease: its new deadline lies well past the old expiry
	if err := a.Renew(ctx, la); err != nil && !errors.Is(err, ErrNotHeld) {
		t.Fatal(err)
	}
	notBoth(t, acquired{l: la}, <-bGot)
}

// TestLostGrantReplyDeadline: a grant whose reply is lost and comes back
// late is found by Acquire's next read; the lease's deadline is still
// measured from the grant's first send, so it ends before the store's
// expiry hands the lock to the next waiter.
func TestLostGrantReplyDeadline(t *testing.T) {
	st := memory.New()
	defer st.Close()
	const ttl = 400 * time.Millisecond
	granted := make(chan struct{})
	var once sync.Once
	aStore := &hooked{Store: st, onCAM: func(muts []storage.Mutation, apply func() (bool, error)) (bool, error) {
		first := false
		if isGrant(muts) {
			once.Do(func() { first = true })
		}
		if !first {
			return apply()
		}
		m, err := apply()
		close(granted)
		time.Sleep(ttl * 3 / 4) // the reply is lost after a long delay
		if err != nil {
			return m, err
		}
		return false, errLost
	}}
	a, err := New(aStore, Options{Holder: "a", MaxBackOff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b := newLocker(t, st, "b")
	aGot := acquireAsync(a, "g", ttl)
	await(t, granted, "a's grant")
	bGot := acquireAsync(b, "g", ttl)
	notBoth(t, <-aGot, <-bGot)
}

// TestLostRenewalReplyDeadline: a renewal whose reply is lost after a
// long delay and is re-sent: the lease's deadline is measured from the
// renewal's first send, before the store's new expiry.
func TestLostRenewalReplyDeadline(t *testing.T) {
	st := memory.New()
	defer st.Close()
	const ttl = 100 * time.Millisecond
	aStore := &hooked{Store: st}
	a, err := New(aStore, Options{Holder: "a", MaxBackOff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b := newLocker(t, st, "b")
	la, err := a.Acquire(ctx, "n", ttl)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	aStore.onCAM = func(muts []storage.Mutation, apply func() (bool, error)) (bool, error) {
		first := false
		if isRenewal(muts) {
			once.Do(func() { first = true })
		}
		if !first {
			return apply()
		}
		m, err := apply()
		time.Sleep(3 * ttl)
		if err != nil {
			return m, err
		}
		return false, errLost
	}
	bGot := acquireAsync(b, "n", ttl)
	time.Sleep(ttl / 2)
	sent := time.Now()
	if err := a.Renew(ctx, la); err != nil && !errors.Is(err, ErrNotHeld) {
		t.Fatal(err)
	}
	if la.Deadline().After(sent.Add(ttl)) {
		t.Fatalf("renewal sent at %v: the lease's deadline is %v after, beyond its TTL", sent, la.Deadline().Sub(sent))
	}
	notBoth(t, acquired{l: la}, <-bGot)
}

// TestFairnessShortTTL: waiters asking for leases much shorter than
// their back-off are still served in ticket order: a live waiter's
// ticket does not expire while it sleeps.
func TestFairnessShortTTL(t *testing.T) {
	st := memory.New()
	defer st.Close()
	main := newLocker(t, st, "main")
	held, err := main.Acquire(ctx, "s", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 6
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lk, err := New(st, Options{Holder: fmt.Sprint("w", i), MaxBackOff: 50 * time.Millisecond})
			if err != nil {
				t.Error(err)
				return
			}
			l, err := lk.Acquire(ctx, "s", 5*time.Millisecond)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = lk.Release(ctx, l)
		}()
		for { // wait for waiter i's ticket before the next queues
			s, err := main.read(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			if len(s.tickets) == i+1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(150 * time.Millisecond) // the waiters sleep and wake while the lock is held
	if err := main.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !slices.Equal(order, []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("served in order %v, want ticket order", order)
	}
}

// TestCancelAfterLostGrant: a waiter whose grant applied but lost its
// reply, and whose context then ended, releases the grant it never saw
// rather than leave the lock held by no one for the lease's TTL.
func TestCancelAfterLostGrant(t *testing.T) {
	st := memory.New()
	defer st.Close()
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	aStore := &hooked{Store: st, onCAM: func(muts []storage.Mutation, apply func() (bool, error)) (bool, error) {
		first := false
		if isGrant(muts) {
			once.Do(func() { first = true })
		}
		m, err := apply()
		if first && err == nil {
			cancel()
			return false, errLost
		}
		return m, err
	}}
	a, err := New(aStore, Options{Holder: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(actx, "c", time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("an acquire cancelled after its grant's reply was lost: %v", err)
	}
	s, err := a.Show(ctx, "c")
	if err != nil || s.Held || len(s.Waiters) != 0 {
		t.Fatalf("after the cancelled acquire: %+v, %v; want free, no waiters", s, err)
	}
}
