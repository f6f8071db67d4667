package statuspage

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/observer"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func get(t *testing.T, h http.Handler, target string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("GET", target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func mustContain(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("the page lacks %q:\n%s", w, body)
		}
	}
}

// TestPageShowsWhatTheProcessKnows: the sections a worker can fill show
// its figures, with a rate from two samples; those it cannot say so.
func TestPageShowsWhatTheProcessKnows(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	runs := int64(100)
	p, err := New(Options{Process: "worker", About: "on 127.0.0.1:7420", Interval: 5 * time.Second, Now: clock.now,
		Read: func(context.Context) Snapshot {
			return Snapshot{Observers: &percolator.ObserverStatus{
				Columns:     []observer.ColumnStatus{{Column: "raw:doc", Pending: 7, Oldest: 3 * time.Second}},
				Observers:   []observer.ObserverStatus{{Name: "tokenize", Column: "raw:doc", Counts: map[string]int64{"runs": runs, "failures": 2}}},
				Quarantined: 1,
			}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	rec := get(t, p, "/")
	mustContain(t, rec.Body.String(), "No sample yet")
	p.Sample(context.Background())
	clock.t, runs = clock.t.Add(5*time.Second), 150
	p.Sample(context.Background())
	rec = get(t, p, "/")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	body := rec.Body.String()
	mustContain(t, body, `<meta http-equiv="refresh" content="5">`, `<tr data-observer="tokenize">`,
		`<td class="runs">150</td>`, `<td class="rate">10.00/s</td>`, `<td class="pending">7</td>`,
		`<dd id="lag">3s</dd>`, `<dd id="quarantined">1</dd>`,
		"This process is not a server", "Not known to this process", "No worker publishes a partition",
		`id="chart-backlog"`, `<polyline points=`, "every 5s, charts over the last 1h.")
	if strings.Contains(body, `id="chart-sessions"`) || strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Errorf("the page draws a chart it has no figures for, or links elsewhere:\n%s", body)
	}
	if rec := get(t, p, "/other"); rec.Code != http.StatusNotFound {
		t.Errorf("GET /other: %d", rec.Code)
	}
}

// TestPageReadFailure: a read that fails shows its error, not zeros.
func TestPageReadFailure(t *testing.T) {
	p, err := New(Options{Process: "serve", Read: func(context.Context) Snapshot {
		return Snapshot{ObserversErr: errors.New("server unavailable"), Server: &Server{Sessions: 3}, Store: &Store{Dir: "/d", Bytes: 3 << 20}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	p.Sample(context.Background())
	body := get(t, p, "/").Body.String()
	mustContain(t, body, "could not read them: server unavailable", `<dd id="sessions">3</dd>`, `<dd id="store-size">3.0 MiB</dd>`)
	if strings.Contains(body, `<dd id="lag">`) {
		t.Errorf("the page shows a lag it could not read:\n%s", body)
	}
}

// TestRingKeepsTheWindow: the ring holds Window/Interval+1 samples, the
// newest last.
func TestRingKeepsTheWindow(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	n := 0
	p, err := New(Options{Process: "serve", Interval: time.Second, Window: 3 * time.Second, Now: clock.now,
		Read: func(context.Context) Snapshot { n++; return Snapshot{Server: &Server{Sessions: n}} }})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		p.Sample(context.Background())
		clock.t = clock.t.Add(time.Second)
	}
	pts, _, _ := p.history()
	if len(pts) != 4 || pts[0].sessions != 7 || pts[3].sessions != 10 {
		t.Fatalf("ring: %d points, first %v, last %v", len(pts), pts[0].sessions, pts[len(pts)-1].sessions)
	}
}

// TestProtect: with a token every request needs it, as a header, a
// cookie, or a ?token= query that sets the cookie and redirects.
func TestProtect(t *testing.T) {
	h := Protect(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }), "s3cret")
	if rec := get(t, h, "/"); rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") == "" {
		t.Fatalf("no token: %d", rec.Code)
	}
	if rec := get(t, h, "/metrics", "Authorization", "Bearer wrong"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", rec.Code)
	}
	if rec := get(t, h, "/metrics", "Authorization", "Bearer s3cret"); rec.Code != http.StatusOK || rec.Body.String() != "ok" {
		t.Fatalf("bearer: %d %q", rec.Code, rec.Body.String())
	}
	if rec := get(t, h, "/?token=wrong"); rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("?token=wrong: %d, cookies %v", rec.Code, rec.Result().Cookies())
	}
	rec := get(t, h, "/?token=s3cret&x=1")
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/?x=1" || len(cookies) != 1 || !cookies[0].HttpOnly {
		t.Fatalf("?token=: %d to %q, cookies %v", rec.Code, rec.Header().Get("Location"), cookies)
	}
	if rec := get(t, h, "/", "Cookie", cookies[0].String()); rec.Code != http.StatusOK {
		t.Fatalf("cookie: %d", rec.Code)
	}
}

// TestRunSamplesAtStartAndWake: Run samples at once, again on Wake (an
// hour before its interval), and returns when its context ends.
func TestRunSamplesAtStartAndWake(t *testing.T) {
	reads := make(chan struct{})
	p, err := New(Options{Process: "oracle", Interval: time.Hour, Read: func(ctx context.Context) Snapshot {
		select {
		case reads <- struct{}{}:
		case <-ctx.Done():
		}
		return Snapshot{}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	<-reads
	p.Wake()
	<-reads
	cancel()
	<-done
}
