package workload

import (
	"context"
	"fmt"
	"strconv"

	"github.com/seed-992972ee/percolator"
)

// BankAudit is one audit of the bank: the sum of every balance in one
// snapshot, and how many accounts it found.
type BankAudit struct {
	Total    int64
	Accounts int
}

// WrongTotalError is ErrWrongTotal with what the audit found and what it
// should have.
type WrongTotalError struct {
	Found BankAudit
	Want  BankAudit
}

func (e *WrongTotalError) Error() string {
	return fmt.Sprintf("total %d over %d accounts, want %d over %d", e.Found.Total, e.Found.Accounts, e.Want.Total, e.Want.Accounts)
}

// Is makes a WrongTotalError match ErrWrongTotal.
func (e *WrongTotalError) Is(target error) bool { return target == ErrWrongTotal }

// AuditBank sums every balance of the bank on db in one read-only
// snapshot.
func AuditBank(ctx context.Context, db *percolator.DB) (BankAudit, error) {
	return AuditAccounts(ctx, db, "acct/")
}

// AuditAccounts sums the balances of the accounts whose rows start with
// prefix (which ends in '/') in one read-only snapshot.
func AuditAccounts(ctx context.Context, db *percolator.DB, prefix string) (BankAudit, error) {
	var a BankAudit
	err := db.View(ctx, func(tx *percolator.Txn) error {
		end := prefix[:len(prefix)-1] + "0" // just past the prefix
		kvs, err := tx.Scan(ctx, prefix, end, balanceCol, 0)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			v, err := strconv.ParseInt(string(kv.Value), 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %w", kv.Row, err)
			}
			a.Total += v
		}
		a.Accounts = len(kvs)
		return nil
	})
	return a, err
}

// Check returns nil if the audit found what a bank of accounts opened
// with initial each holds in every snapshot, else a *WrongTotalError.
func (a BankAudit) Check(accounts int, initial int64) error {
	want := BankAudit{Total: int64(accounts) * initial, Accounts: accounts}
	if a != want {
		return &WrongTotalError{Found: a, Want: want}
	}
	return nil
}

// CheckTransfers checks, in one snapshot, that every transfer row a run
// with Record acknowledged (OnCommit) is there, and reads every transfer
// row, which settles the locks a crashed run left on them. A missing row
// is ErrLostTransfer.
func CheckTransfers(ctx context.Context, db *percolator.DB, acked []string) error {
	return db.View(ctx, func(tx *percolator.Txn) error {
		for _, row := range acked {
			if _, err := tx.Get(ctx, row, "amount"); err != nil {
				return fmt.Errorf("%w: %s: %w", ErrLostTransfer, row, err)
			}
		}
		_, err := tx.Scan(ctx, "xfer/", "xfer0", "amount", 0)
		return err
	})
}
