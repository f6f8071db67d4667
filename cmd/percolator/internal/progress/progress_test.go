package progress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a Meter's clock that moves only when told; the
// heartbeat reads it too.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestMeter(ctx context.Context, b *bytes.Buffer, tty bool) (*Meter, *fakeClock) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	m := New(ctx, b, false)
	m.tty, m.every, m.now, m.hold, m.tick = tty, time.Second, clk.now, "", neverTick
	return m, clk
}

// neverTick is a ticker that never fires: a test's lines come from its
// own calls alone.
func neverTick(time.Duration) (<-chan time.Time, func()) { return nil, func() {} }

func lines(b *bytes.Buffer) []string {
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

// TestPlainLines: off a terminal a phase prints a line when it starts,
// at most one per period with the count and the rate, and a summary.
func TestPlainLines(t *testing.T) {
	var b bytes.Buffer
	m, clk := newTestMeter(context.Background(), &b, false)
	if isTerminal(&b) {
		t.Fatal("a buffer is not a terminal")
	}
	m.Start("loading edges", 100)
	for i := range 100 {
		clk.advance(50 * time.Millisecond) // 5 s in all: a line a second
		m.Set(int64(i + 1))
	}
	m.End(nil)
	want := []string{
		"loading edges: 0 of 100",
		"loading edges: 20 of 100, 20/s",
		"loading edges: 40 of 100, 20/s",
		"loading edges: 60 of 100, 20/s",
		"loading edges: 80 of 100, 20/s",
		"loading edges: 100 of 100, 20/s",
		"loading edges: done, 100 of 100 in 5s, 20/s",
	}
	if got := lines(&b); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("plain lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPlainSpinner: a phase of unknown length counts without a total,
// with Detail's words; the next phase has its own label and count.
func TestPlainSpinner(t *testing.T) {
	var b bytes.Buffer
	m, clk := newTestMeter(context.Background(), &b, false)
	m.Start("observers: runs", Unknown)
	clk.advance(2 * time.Second)
	m.Detail(10, "4 notifications left")
	m.Start("counting: entities folded", Unknown) // ends the one before
	clk.advance(time.Second)
	m.Set(3)
	m.End(nil)
	want := []string{
		"observers: runs: 0",
		"observers: runs: 10 (4 notifications left), 5/s",
		"observers: runs: done, 10 (4 notifications left) in 2s, 5/s",
		"counting: entities folded: 0",
		"counting: entities folded: 3, 3/s",
		"counting: entities folded: done, 3 in 1s, 3/s",
	}
	if got := lines(&b); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("plain lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestInterruptDoesNotComplete: a phase ended by an interrupt, or by an
// error, says where it stopped and is never shown complete, on a
// terminal or off one.
func TestInterruptDoesNotComplete(t *testing.T) {
	for _, tty := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		var b bytes.Buffer
		m, clk := newTestMeter(ctx, &b, tty)
		m.Start("loading edges", 10)
		clk.advance(time.Second)
		m.Set(4)
		cancel()
		m.End(nil) // a phase may end early, without an error, once interrupted
		out := b.String()
		if !strings.Contains(out, "loading edges: interrupted at 4 of 10 after 1s\n") ||
			strings.Contains(out, "100%") || strings.Contains(out, "10/10") || strings.Contains(out, "done") {
			t.Errorf("tty %v: interrupted phase printed %q", tty, out)
		}

		b.Reset()
		m, _ = newTestMeter(context.Background(), &b, tty)
		m.Start("counting", Unknown)
		m.Set(2)
		m.End(errors.New("store failed"))
		if out := b.String(); !strings.Contains(out, "counting: stopped at 2 after 0s\n") || strings.Contains(out, "done") {
			t.Errorf("tty %v: failed phase printed %q", tty, out)
		}
	}
}

// TestTerminalBarOrSpinner: on a terminal a known total is a bar (with a
// percentage), an unknown one a spinner (without), each ending in a
// summary line.
func TestTerminalBarOrSpinner(t *testing.T) {
	var b bytes.Buffer
	m, _ := newTestMeter(context.Background(), &b, true)
	m.Start("loading", 4)
	m.Set(2)
	bar := b.String()
	m.End(nil)
	if !strings.Contains(bar, "%") || !strings.HasSuffix(b.String(), "loading: done, 2 of 4 in 0s, 0/s\n") {
		t.Errorf("bar printed %q", b.String())
	}
	b.Reset()
	m.Start("counting", Unknown)
	m.Detail(2, "")
	spin := b.String()
	m.End(nil)
	if strings.Contains(spin, "%") || !strings.Contains(spin, "counting") || strings.Contains(spin, "()") || strings.Contains(spin, "/-") || !strings.HasSuffix(b.String(), "counting: done, 2 in 0s, 0/s\n") {
		t.Errorf("spinner printed %q", b.String())
	}
}

// TestQuiet: a quiet meter prints nothing.
func TestQuiet(t *testing.T) {
	var b bytes.Buffer
	m := New(context.Background(), &b, true)
	m.Start("loading", 2)
	m.Set(1)
	m.Detail(2, "more")
	m.End(nil)
	m.Set(3) // outside a phase: nothing
	if b.Len() != 0 {
		t.Fatalf("quiet meter printed %q", b.String())
	}
}

// TestHold: the held phase's Start returns once the context ends, after
// its first line is out.
func TestHold(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var b bytes.Buffer
	m, _ := newTestMeter(ctx, &b, false)
	m.hold = "counting"
	m.Start("loading", 1) // not held
	started := make(chan struct{})
	go func() {
		defer close(started)
		m.Start("counting", Unknown)
	}()
	cancel()
	<-started
	m.End(ctx.Err())
	if !strings.Contains(b.String(), "counting: interrupted at 0 after") {
		t.Fatalf("held phase printed %q", b.String())
	}
}

// TestHeartbeat: off a terminal a phase whose count stands still still
// prints a line every period, with its rate falling; none once it ended.
func TestHeartbeat(t *testing.T) {
	var b bytes.Buffer
	m, clk := newTestMeter(context.Background(), &b, false)
	ticks := make(chan time.Time)
	m.tick = func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }
	// waitLines waits until the heartbeat printed n lines in all.
	waitLines := func(n int) {
		for {
			m.mu.Lock()
			got := strings.Count(b.String(), "\n")
			m.mu.Unlock()
			if got >= n {
				return
			}
			runtime.Gosched()
		}
	}
	m.Start("gc: waiting", Unknown)
	m.Set(4)
	clk.advance(time.Second)
	ticks <- clk.now()
	waitLines(2)
	clk.advance(time.Second)
	ticks <- clk.now()
	waitLines(3)
	ticks <- clk.now() // within the period of the last line: nothing
	ticks <- clk.now() // taken once the one before was handled
	m.End(nil)
	want := []string{
		"gc: waiting: 0",
		"gc: waiting: 4, 4/s",
		"gc: waiting: 4, 2/s",
		"gc: waiting: done, 4 in 2s, 2/s",
	}
	if got := lines(&b); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("heartbeat lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWriterBesideHeartbeat: lines written through the Meter's Writer
// while its heartbeat prints come out whole, one per line, beside the
// heartbeat's (under -race, the two writers share one buffer safely).
func TestWriterBesideHeartbeat(t *testing.T) {
	var b bytes.Buffer
	m, clk := newTestMeter(context.Background(), &b, false)
	m.every = time.Nanosecond
	ticks := make(chan time.Time)
	m.tick = func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }
	m.Start("run", Unknown)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			clk.advance(time.Second)
			ticks <- clk.now()
			m.Set(int64(i))
		}
	}()
	const logged = 50
	for i := range logged {
		fmt.Fprintf(m.Writer(), "log line %d of a command\n", i)
	}
	<-done
	m.End(nil)
	n := 0
	for _, l := range lines(&b) {
		if strings.Contains(l, "log line") {
			if !strings.HasPrefix(l, "log line") || !strings.HasSuffix(l, "of a command") {
				t.Fatalf("a logged line interleaved with the meter's: %q", l)
			}
			n++
		}
	}
	if n != logged {
		t.Fatalf("%d logged lines in the output, want %d:\n%s", n, logged, b.String())
	}
}

// TestListThenDo: the listing phase ends counting what it listed, the
// doing phase has that total from its start, and none follows an empty
// list.
func TestListThenDo(t *testing.T) {
	var b bytes.Buffer
	m, _ := newTestMeter(context.Background(), &b, false)
	report := m.ListThenDo("listing locks", "resolving locks")
	report(0, 3)
	for i := 1; i <= 3; i++ {
		report(i, 3)
	}
	m.End(nil)
	want := []string{"listing locks: 0", "listing locks: done, 3 in", "resolving locks: 0 of 3", "resolving locks: done, 3 of 3"}
	got := lines(&b)
	if len(got) != len(want) {
		t.Fatalf("got %q, want lines starting %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("line %d: %q, want it to start %q", i, got[i], want[i])
		}
	}

	b.Reset()
	report = m.ListThenDo("listing locks", "resolving locks")
	report(0, 0)
	m.End(nil)
	if got := lines(&b); len(got) != 2 || !strings.HasPrefix(got[1], "listing locks: done, 0 in") {
		t.Errorf("an empty list: %q", got)
	}
}
