package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/internal/ctxwait"
	"github.com/seed-992972ee/percolator/workload"
)

// The rival sides of the rivals figure: the bank of pgAccounts accounts,
// opened with pgInitial each, on badger, bbolt and etcd, each in a
// directory of its own under the scratch directory. An account is the
// key rivalKey(i), its balance in decimal, as percolator's cells hold
// it. Each side's methods are safe for concurrent use (bankSide).

// rivalKey is account i's key on a rival side.
func rivalKey(i int) []byte { return fmt.Appendf(nil, "acct/%06d", i) }

// rivalPrefix begins every account's key on a rival side.
const rivalPrefix = "acct/"

// retryConflicts runs try until it fails with something other than a
// conflict (errors.Is conflict), waiting conflictBackoff after each
// conflicted attempt as db.Update does; a retry after stop is set is
// given up (errStopped). It returns the conflicts met.
func retryConflicts(ctx context.Context, stop *atomic.Bool, conflict error, try func() error) (int, error) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 && stop.Load() {
			return attempt, errStopped
		}
		err := try()
		if !errors.Is(err, conflict) {
			return attempt, err
		}
		if err := ctxwait.Sleep(ctx, conflictBackoff(attempt)); err != nil {
			return attempt + 1, err
		}
	}
}

// moveBalance is a transfer's body on a rival side: read both balances
// with get, write both back moved with put.
func moveBalance(a, b int, amount int64, get func(key []byte) (string, error), put func(key []byte, balance int64) error) error {
	var bal [2]int64
	for i, acct := range [2]int{a, b} {
		v, err := get(rivalKey(acct))
		if err != nil {
			return err
		}
		if bal[i], err = strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("account %d: %w", acct, err)
		}
	}
	if err := put(rivalKey(a), bal[0]-amount); err != nil {
		return err
	}
	return put(rivalKey(b), bal[1]+amount)
}

// addBalance adds a balance as stored to a.
func addBalance(a *workload.BankAudit, v []byte) error {
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return err
	}
	a.Total += n
	a.Accounts++
	return nil
}

func balanceText(n int64) []byte { return strconv.AppendInt(nil, n, 10) }

// badgerBank is the bank on badger: transactions through db.Update (its
// optimistic concurrency, serializable snapshot isolation), each commit
// synced (SyncWrites).
type badgerBank struct{ db *badger.DB }

func openBadgerBank(dir string, cl *closers) (badgerBank, error) {
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "rivals-badger")).WithSyncWrites(true).WithLogger(nil))
	if err != nil {
		return badgerBank{}, err
	}
	cl.add(func() { _ = db.Close() })
	return badgerBank{db}, db.Update(func(txn *badger.Txn) error {
		for i := range pgAccounts {
			if err := txn.Set(rivalKey(i), balanceText(pgInitial)); err != nil {
				return err
			}
		}
		return nil
	})
}

func badgerGet(txn *badger.Txn, key []byte) (string, error) {
	item, err := txn.Get(key)
	if err != nil {
		return "", err
	}
	v, err := item.ValueCopy(nil)
	return string(v), err
}

func (s badgerBank) transfer(ctx context.Context, a, b int, amount int64, stop *atomic.Bool) (int, error) {
	return retryConflicts(ctx, stop, badger.ErrConflict, func() error {
		return s.db.Update(func(txn *badger.Txn) error {
			return moveBalance(a, b, amount, func(k []byte) (string, error) { return badgerGet(txn, k) },
				func(k []byte, n int64) error { return txn.Set(k, balanceText(n)) })
		})
	})
}

func (s badgerBank) audit(context.Context) (a workload.BankAudit, err error) {
	err = s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 100, Prefix: []byte(rivalPrefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := it.Item().Value(func(v []byte) error { return addBalance(&a, v) }); err != nil {
				return err
			}
		}
		return nil
	})
	return a, err
}

func (s badgerBank) read(_ context.Context, i int) error {
	return s.db.View(func(txn *badger.Txn) error {
		_, err := badgerGet(txn, rivalKey(i))
		return err
	})
}

// boltBank is the bank on bbolt: one db.Update per transfer (bbolt runs
// one writer at a time, so nothing conflicts), each commit synced (its
// default).
type boltBank struct{ db *bolt.DB }

var boltBucket = []byte("accounts")

func openBoltBank(dir string, cl *closers) (boltBank, error) {
	path := filepath.Join(dir, "rivals-bbolt")
	if err := os.MkdirAll(path, 0o755); err != nil {
		return boltBank{}, err
	}
	db, err := bolt.Open(filepath.Join(path, "bank.db"), 0o600, nil)
	if err != nil {
		return boltBank{}, err
	}
	cl.add(func() { _ = db.Close() })
	return boltBank{db}, db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucket(boltBucket)
		if err != nil {
			return err
		}
		for i := range pgAccounts {
			if err := bk.Put(rivalKey(i), balanceText(pgInitial)); err != nil {
				return err
			}
		}
		return nil
	})
}

func boltGet(bk *bolt.Bucket, key []byte) (string, error) {
	v := bk.Get(key)
	if v == nil {
		return "", fmt.Errorf("bbolt: no key %s", key)
	}
	return string(v), nil
}

func (s boltBank) transfer(_ context.Context, a, b int, amount int64, _ *atomic.Bool) (int, error) {
	return 0, s.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(boltBucket)
		return moveBalance(a, b, amount, func(k []byte) (string, error) { return boltGet(bk, k) },
			func(k []byte, n int64) error { return bk.Put(k, balanceText(n)) })
	})
}

func (s boltBank) audit(context.Context) (a workload.BankAudit, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(boltBucket).ForEach(func(_, v []byte) error { return addBalance(&a, v) })
	})
	return a, err
}

func (s boltBank) read(_ context.Context, i int) error {
	return s.db.View(func(tx *bolt.Tx) error {
		_, err := boltGet(tx.Bucket(boltBucket), rivalKey(i))
		return err
	})
}

// etcdBank is the bank on etcd: a member started in this process (its
// WAL synced on every commit, its default), one STM transaction per
// transfer at the STM's default isolation (serializable snapshot).
type etcdBank struct{ cli *clientv3.Client }

// errSTMConflict: an STM transaction's commit found what it read
// changed. NewSTM would retry at once; the bank's transfers back off
// first, as on the other sides.
var errSTMConflict = errors.New("bench: etcd STM conflict")

// etcdTxnOps is the puts of one etcd transaction opening the bank,
// under etcd's default limit of 128 operations.
const etcdTxnOps = 100

func openEtcdBank(ctx context.Context, dir string, cl *closers) (etcdBank, error) {
	m, err := etcd.StartEmbedded(ctx, etcd.EmbedOptions{Dir: filepath.Join(dir, "rivals-etcd")})
	if err != nil {
		return etcdBank{}, err
	}
	cl.add(m.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: m.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return etcdBank{}, err
	}
	cl.add(func() { _ = cli.Close() })
	for i := 0; i < pgAccounts; i += etcdTxnOps {
		var puts []clientv3.Op
		for j := i; j < min(i+etcdTxnOps, pgAccounts); j++ {
			puts = append(puts, clientv3.OpPut(string(rivalKey(j)), strconv.Itoa(pgInitial)))
		}
		if _, err := cli.Txn(ctx).Then(puts...).Commit(); err != nil {
			return etcdBank{}, err
		}
	}
	return etcdBank{cli}, nil
}

// transfer runs each attempt as an STM of its own: its apply refuses to
// run twice, so a conflict ends NewSTM with errSTMConflict and the retry
// waits its back-off. It reads both balances in one Get (the STM keeps
// what a Get fetched for the later Gets of its keys).
func (s etcdBank) transfer(ctx context.Context, a, b int, amount int64, stop *atomic.Bool) (int, error) {
	return retryConflicts(ctx, stop, errSTMConflict, func() error {
		ran := false
		_, err := concurrency.NewSTM(s.cli, func(stm concurrency.STM) error {
			if ran {
				return errSTMConflict
			}
			ran = true
			stm.Get(string(rivalKey(a)), string(rivalKey(b))) // both in one round trip, as percolator's GetMany
			return moveBalance(a, b, amount, func(k []byte) (string, error) { return stm.Get(string(k)), nil },
				func(k []byte, n int64) error { stm.Put(string(k), string(balanceText(n))); return nil })
		}, concurrency.WithAbortContext(ctx))
		return err
	})
}

// audit reads every balance in one Get, at one revision.
func (s etcdBank) audit(ctx context.Context) (a workload.BankAudit, err error) {
	resp, err := s.cli.Get(ctx, rivalPrefix, clientv3.WithPrefix())
	if err != nil {
		return a, err
	}
	for _, kv := range resp.Kvs {
		if err := addBalance(&a, kv.Value); err != nil {
			return a, err
		}
	}
	return a, nil
}

func (s etcdBank) read(ctx context.Context, i int) error {
	_, err := s.cli.Get(ctx, string(rivalKey(i)))
	return err
}
