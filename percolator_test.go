package percolator_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
)

func open(t *testing.T, opts percolator.Options) *percolator.DB {
	t.Helper()
	db, err := percolator.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestAPITour(t *testing.T) {
	ctx := context.Background()
	db := open(t, percolator.Options{})
	err := db.Update(ctx, func(tx *percolator.Txn) error {
		if err := tx.Set("Bob", "bal", []byte("10")); err != nil {
			return err
		}
		return tx.Set("Joe", "bal", []byte("2"))
	})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tx.StartTS() == 0 {
		t.Fatal("zero start_ts")
	}
	v, err := tx.Get(ctx, "Bob", "bal")
	if err != nil || string(v) != "10" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if _, err := tx.Get(ctx, "Nobody", "bal"); !errors.Is(err, percolator.ErrNotFound) {
		t.Fatalf("absent cell: %v", err)
	}
	_ = tx.Set("Bob", "bal", []byte("3"))
	_ = tx.Delete("Joe", "bal")
	if v, _ := tx.Get(ctx, "Bob", "bal"); string(v) != "3" {
		t.Fatalf("read-your-own-write: %q", v)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); !errors.Is(err, percolator.ErrTxnFinished) || !errors.Is(err, percolator.ErrInvalidArgument) {
		t.Fatalf("second commit: %v", err)
	}
	err = db.View(ctx, func(tx *percolator.Txn) error {
		if v, err := tx.Get(ctx, "Bob", "bal"); err != nil || string(v) != "3" {
			t.Errorf("Bob = %q, %v", v, err)
		}
		if _, err := tx.Get(ctx, "Joe", "bal"); !errors.Is(err, percolator.ErrNotFound) {
			t.Errorf("deleted Joe: %v", err)
		}
		if err := tx.Set("x", "y", nil); !errors.Is(err, percolator.ErrReadOnly) {
			t.Errorf("write in View: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	ctx := context.Background()
	db := open(t, percolator.Options{MaxValueSize: 1024})
	bad := []struct {
		row, col string
		value    []byte
	}{
		{"", "c", nil},
		{strings.Repeat("r", 4097), "c", nil},
		{"r", "", nil},
		{"r", "c:lock", nil},
		{"r", "c:write", nil},
		{"r", "__meta", nil},
		{"r", "c", make([]byte, 1025)},
	}
	tx, _ := db.Begin(ctx)
	for _, b := range bad {
		if err := tx.Set(b.row, b.col, b.value); !errors.Is(err, percolator.ErrInvalidArgument) {
			t.Errorf("Set(%.10q, %q, %d bytes) = %v", b.row, b.col, len(b.value), err)
		}
	}
	if err := tx.Set("r", "c", make([]byte, 1024)); err != nil {
		t.Fatalf("value at the limit: %v", err)
	}
	_ = tx.Rollback(ctx)
	if err := tx.Set("r", "c", nil); !errors.Is(err, percolator.ErrTxnFinished) {
		t.Fatalf("Set after Rollback: %v", err)
	}
	rows, err := db.Rows(ctx, "", 0)
	if err != nil || len(rows) != 0 {
		t.Fatalf("bad input wrote rows %v (%v)", rows, err)
	}
	if _, err := percolator.Open(ctx, percolator.Options{MaxValueSize: -1}); !errors.Is(err, percolator.ErrInvalidArgument) {
		t.Fatalf("bad options: %v", err)
	}
}

// TestUpdateRetriesConflicts: concurrent increments of one counter all
// land exactly once, through conflicts and retries.
func TestUpdateRetriesConflicts(t *testing.T) {
	ctx := context.Background()
	db := open(t, percolator.Options{})
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				err := db.Update(ctx, func(tx *percolator.Txn) error {
					v, err := tx.Get(ctx, "counter", "n")
					if err != nil && !errors.Is(err, percolator.ErrNotFound) {
						return err
					}
					n, _ := strconv.Atoi(string(v))
					return tx.Set("counter", "n", []byte(strconv.Itoa(n+1)))
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	_ = db.View(ctx, func(tx *percolator.Txn) error {
		v, err := tx.Get(ctx, "counter", "n")
		if err != nil || string(v) != strconv.Itoa(workers*each) {
			t.Errorf("counter = %q, %v; want %d", v, err, workers*each)
		}
		return nil
	})
	if db.Stats().Conflicts == 0 {
		t.Log("no conflict happened; the retry path went untested this run")
	}
}

// TestUpdateMaxAttemptsAndContext: MaxAttempts counts the runs of Update's
// function (the deprecated MaxRetries sets it), a cancelled context ends
// Update, and a user's error is returned as it is.
func TestUpdateMaxAttemptsAndContext(t *testing.T) {
	ctx := context.Background()
	for _, opts := range []percolator.Options{{MaxAttempts: 2}, {MaxRetries: 2}, {MaxAttempts: 2, MaxRetries: 5}} {
		db := open(t, opts)
		calls := 0
		err := db.Update(ctx, func(tx *percolator.Txn) error {
			calls++
			// Conflict every time: commit a newer write to the cell under it.
			if err := db.Update(ctx, func(in *percolator.Txn) error { return in.Set("k", "c", []byte("x")) }); err != nil {
				return err
			}
			return tx.Set("k", "c", []byte("mine"))
		})
		if !errors.Is(err, percolator.ErrConflict) || calls != 2 {
			t.Fatalf("%+v: err %v after %d calls; want ErrConflict after 2", opts, err, calls)
		}
	}
	db := open(t, percolator.Options{MaxAttempts: 2})
	err := db.Update(ctx, func(tx *percolator.Txn) error {
		if err := db.Update(ctx, func(in *percolator.Txn) error { return in.Set("k", "c", []byte("x")) }); err != nil {
			return err
		}
		return tx.Set("k", "c", []byte("mine"))
	})
	var ce *percolator.ConflictError
	if !errors.As(err, &ce) || string(ce.Row) != "k" {
		t.Fatalf("conflict error lacks the cell: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := db.Update(cctx, func(tx *percolator.Txn) error { return nil }); err == nil {
		t.Fatal("Update on a cancelled context succeeded")
	}
	sentinel := errors.New("user error")
	if err := db.Update(ctx, func(tx *percolator.Txn) error { return sentinel }); !errors.Is(err, sentinel) {
		t.Fatalf("user error not returned: %v", err)
	}
}

func TestScan(t *testing.T) {
	ctx := context.Background()
	db := open(t, percolator.Options{})
	_ = db.Update(ctx, func(tx *percolator.Txn) error {
		for _, r := range []string{"a", "b", "c", "d"} {
			_ = tx.Set(r, "v", []byte(r))
		}
		return nil
	})
	_ = db.Update(ctx, func(tx *percolator.Txn) error { return tx.Delete("c", "v") })
	tx, _ := db.Begin(ctx)
	_ = tx.Set("bb", "v", []byte("own"))
	_ = tx.Delete("d", "v")
	kvs, err := tx.Scan(ctx, "a", "", "v", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range kvs {
		got = append(got, string(kv.Row)+"="+string(kv.Value))
	}
	if strings.Join(got, " ") != "a=a b=b bb=own" {
		t.Fatalf("scan = %v", got)
	}
	kvs, _ = tx.Scan(ctx, "b", "c", "v", 1)
	if len(kvs) != 1 || string(kvs[0].Row) != "b" {
		t.Fatalf("bounded scan = %v", kvs)
	}
}

// TestScanRows: every column of whole rows in pages, deletions left out
// (but counted towards a page's limit: b's page ends at b); the stored
// observers listed;
// the transaction limits with their defaults.
func TestScanRows(t *testing.T) {
	ctx := context.Background()
	db := open(t, percolator.Options{MaxTxnWrites: 7})
	_ = db.Update(ctx, func(tx *percolator.Txn) error {
		for _, r := range []string{"a", "b", "c"} {
			_ = tx.Set(r, "x", []byte(r+"x"))
			_ = tx.Set(r, "y", []byte(r+"y"))
		}
		return nil
	})
	_ = db.Update(ctx, func(tx *percolator.Txn) error { return tx.Delete("b", "x") })
	tx, _ := db.BeginReadOnly(ctx)
	defer tx.Rollback(ctx)
	var got []string
	for start, page := "", 0; ; page++ {
		cells, next, err := tx.ScanRows(ctx, start, "", 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cells {
			got = append(got, fmt.Sprintf("%d:%s/%s=%s", page, c.Row, c.Column, c.Value))
		}
		if next == "" {
			break
		}
		start = next
	}
	if want := "0:a/x=ax 0:a/y=ay 1:b/y=by 2:c/x=cx 2:c/y=cy"; strings.Join(got, " ") != want {
		t.Fatalf("pages: %v, want %s", got, want)
	}
	if _, _, err := tx.ScanRows(ctx, "", "", 0, 0); !errors.Is(err, percolator.ErrInvalidArgument) {
		t.Fatalf("limit 0: %v", err)
	}
	if err := percolator.ValidateCell("r", "__ack"); !errors.Is(err, percolator.ErrInvalidArgument) {
		t.Fatalf("ValidateCell of a reserved column: %v", err)
	}
	noop := func(context.Context, *percolator.Txn, string, string) error { return nil }
	_ = db.Observe(ctx, percolator.Observer{Name: "up", Column: "x", Fn: noop})
	_ = db.Observe(ctx, percolator.Observer{Name: "sig", Column: "s", Weak: true})
	obs, err := db.Observers(ctx)
	if err != nil || fmt.Sprintf("%+v", obs) != "[{Name:sig Column:s Weak:true Fn:<nil>} {Name:up Column:x Weak:false Fn:<nil>}]" {
		t.Fatalf("Observers = %+v, %v", obs, err)
	}
	if w, b := db.TxnLimits(); w != 7 || b != 100<<20 {
		t.Fatalf("TxnLimits = %d, %d", w, b)
	}
}

// TestDurableAcrossReopen: a commit that returned survives Close/Open,
// and timestamps keep increasing across reopens.
func TestDurableAcrossReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var last uint64
	for i := range 5 {
		db, err := percolator.Open(ctx, percolator.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		tx, _ := db.Begin(ctx)
		if tx.StartTS() <= last {
			t.Fatalf("start_ts %d after %d: went backwards across reopen", tx.StartTS(), last)
		}
		last = tx.StartTS()
		if i > 0 {
			v, err := tx.Get(ctx, "k", "c")
			if err != nil || string(v) != strconv.Itoa(i-1) {
				t.Fatalf("reopen %d: %q, %v", i, v, err)
			}
		}
		_ = tx.Set("k", "c", []byte(strconv.Itoa(i)))
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := percolator.Open(ctx, percolator.Options{Dir: dir}); err == nil {
			t.Fatal("a second Open of an open directory succeeded")
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	_ = time.Second
}

// TestObserversThroughTheFacade: Load writes, an observer reacts, a
// restart keeps the registration (a writer in a later process still sets
// notifications) and the pending work.
func TestObserversThroughTheFacade(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	upper := func(ctx context.Context, tx *percolator.Txn, row, col string) error {
		v, err := tx.Get(ctx, row, col)
		if err != nil {
			return err
		}
		return tx.Set(row, "upper", bytes.ToUpper(v))
	}
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Observe(ctx, percolator.Observer{Name: "upper", Column: "text", Fn: upper}); err != nil {
		t.Fatal(err)
	}
	var progress []int
	err = db.Load(ctx, 10, percolator.LoadOptions{Concurrency: 3, Progress: func(n, _ int) { progress = append(progress, n) }},
		func(tx *percolator.Txn, i int) error {
			return tx.Set(fmt.Sprint("doc", i), "text", []byte(fmt.Sprint("hello ", i)))
		})
	if err != nil || len(progress) != 10 || progress[9] != 10 {
		t.Fatalf("Load: %v, progress %v", err, progress)
	}
	if _, err := db.RunWorkers(ctx, percolator.WorkerOptions{Scanners: 2, Drain: true}); err != nil {
		t.Fatal(err)
	}
	err = db.View(ctx, func(tx *percolator.Txn) error {
		v, err := tx.Get(ctx, "doc7", "upper")
		if err == nil && string(v) != "HELLO 7" {
			err = fmt.Errorf("doc7 upper = %q", v)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A later process that never registers the observer still notifies.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = percolator.Open(ctx, percolator.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("doc1", "text", []byte("again")) }); err != nil {
		t.Fatal(err)
	}
	st, err := db.ObserverStatus(ctx)
	if err != nil || len(st.Columns) != 1 || st.Columns[0].Pending != 1 {
		t.Fatalf("status after a write by a process without the observer: %+v, %v", st, err)
	}
	if c := st.Observers[0].Counts; c["commits"] != 10 {
		t.Fatalf("stored counters %v, want 10 commits", c)
	}
	if err := db.Observe(ctx, percolator.Observer{Name: "upper", Column: "text", Fn: upper}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RunWorkers(ctx, percolator.WorkerOptions{Drain: true}); err != nil {
		t.Fatal(err)
	}
	err = db.View(ctx, func(tx *percolator.Txn) error {
		v, err := tx.Get(ctx, "doc1", "upper")
		if err == nil && string(v) != "AGAIN" {
			err = fmt.Errorf("doc1 upper = %q", v)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStartTSContextFixesTheSnapshot: a read-only transaction's
// timestamp, once asked for, is the one its reads use and stays put, and
// it sees every commit that returned before it began.
func TestStartTSContextFixesTheSnapshot(t *testing.T) {
	ctx := context.Background()
	db := open(t, percolator.Options{})
	if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("joe", "bal", []byte("10")) }); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginReadOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := tx.StartTSContext(ctx)
	if err != nil || ts == 0 {
		t.Fatalf("StartTSContext = %d, %v", ts, err)
	}
	if v, err := tx.Get(ctx, "joe", "bal"); err != nil || string(v) != "10" {
		t.Fatalf("Get = %q, %v; want 10", v, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if got, err := tx.StartTSContext(cancelled); got != ts || err != nil || tx.StartTS() != ts {
		t.Fatalf("StartTSContext after a read = %d, %v (StartTS %d); want %d", got, err, tx.StartTS(), ts)
	}
	_ = tx.Rollback(ctx)
}
