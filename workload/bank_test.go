package workload

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
)

func openDB(t *testing.T) *percolator.DB {
	t.Helper()
	db, err := percolator.Open(context.Background(), percolator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestBankRun: a run with auditors keeps every snapshot's total, every
// committed transfer is acknowledged once and found afterwards, and the
// run leaves no goroutine behind.
func TestBankRun(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	before := runtime.NumGoroutine()
	var acked []string
	var progress int
	opts := BankOptions{Accounts: 20, Initial: 100, Workers: 4, Readers: 2, Duration: 300 * time.Millisecond, Record: true,
		OnCommit:   func(row string) { acked = append(acked, row) },
		OnWrong:    func(a BankAudit) { t.Errorf("wrong audit %+v", a) },
		OnProgress: func(BankCounts, time.Duration) { progress++ },
	}
	res, err := RunBank(ctx, db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Wrong != 0 || int64(len(acked)) != res.Commits {
		t.Fatalf("result %+v, %d acknowledged", res, len(acked))
	}
	a, err := AuditBank(ctx, db)
	if err != nil || a.Check(20, 100) != nil {
		t.Fatalf("audit after the run: %+v, %v, %v", a, err, a.Check(20, 100))
	}
	if err := CheckTransfers(ctx, db, acked); err != nil {
		t.Fatal(err)
	}
	checkGoroutines(t, before)
}

// checkGoroutines fails the test if the goroutine count does not come
// back down to before within a few seconds.
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutine leak: %d goroutines, %d before\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBankAccountsRefused: a bank opened with 20 accounts refuses a run
// with 30, saying so.
func TestBankAccountsRefused(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	if _, err := RunBank(ctx, db, BankOptions{Accounts: 20, Workers: 1, Duration: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	_, err := RunBank(ctx, db, BankOptions{Accounts: 30, Workers: 1, Duration: time.Millisecond})
	var ae *AccountsError
	if !errors.Is(err, ErrAccounts) || !errors.As(err, &ae) || ae.Have != "20" || ae.Want != 30 {
		t.Fatalf("second run: %v", err)
	}
}

// TestBankAuditFindsWrongTotal: the check fails on a bank whose total
// moved, and a run counts (and reports) every audit that sees it.
func TestBankAuditFindsWrongTotal(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	opts := BankOptions{Accounts: 5, Initial: 10, Workers: 1, Duration: time.Millisecond}
	if _, err := RunBank(ctx, db, opts); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set(accountRow(0), balanceCol, []byte("1000")) }); err != nil {
		t.Fatal(err)
	}
	a, err := AuditBank(ctx, db)
	var we *WrongTotalError
	if err != nil || !errors.Is(a.Check(5, 10), ErrWrongTotal) || !errors.As(a.Check(5, 10), &we) || we.Want.Total != 50 {
		t.Fatalf("audit %+v, %v: check %v", a, err, a.Check(5, 10))
	}
	var reported int64
	opts.Readers, opts.Duration = 1, 100*time.Millisecond
	opts.OnWrong = func(BankAudit) { reported++ }
	res, err := RunBank(ctx, db, opts)
	if err != nil || res.Wrong != res.Snapshots || reported != res.Wrong {
		t.Fatalf("run on a wrong bank: %+v (%d reported), %v", res, reported, err)
	}
}

// TestCheckTransfersLost: an acknowledged transfer that is not there is
// ErrLostTransfer.
func TestCheckTransfersLost(t *testing.T) {
	err := CheckTransfers(context.Background(), openDB(t), []string{"xfer/never/0/0"})
	if !errors.Is(err, ErrLostTransfer) {
		t.Fatalf("CheckTransfers of a missing row: %v", err)
	}
}

// TestBankOptions: the zero value takes the defaults; values out of range
// are ErrInvalidArgument.
func TestBankOptions(t *testing.T) {
	var o BankOptions
	o.EnsureDefaults()
	if err := o.Validate(); err != nil || o.Accounts != 1000 || o.Workers != 64 || o.Duration != 10*time.Second {
		t.Fatalf("defaults %+v: %v", o, err)
	}
	for _, bad := range []BankOptions{
		{Accounts: 1, Workers: 1, Duration: time.Second},
		{Accounts: 2, Workers: 0, Duration: time.Second},
		{Accounts: 2, Workers: 1, Readers: -1, Duration: time.Second},
		{Accounts: 2, Workers: 1},
		{Accounts: 2, Workers: 1, Duration: time.Second, Initial: -1},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Validate(%+v) = %v", bad, err)
		}
	}
}
