package etcd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage"
)

// markTimeout bounds one mark write, retries included.
const markTimeout = 5 * time.Second

// etcdMark is an oracle.Mark: the oracle's high-water mark in etcd, written
// only by the leader of one term (invariant 3), and its copy in the
// deployment's store (oracle.WriteMirror; invariant 8). Write runs on the
// Allocator's extension goroutine, one at a time; Usable on any.
type etcdMark struct {
	cli *clientv3.Client
	// st holds the mark's copy: the store the oracle's clients write.
	st  storage.Store
	key string // <prefix>oracle/mark
	// leaderKey and rev are the term's election key and its create
	// revision: a write is applied only while that key exists with that
	// revision, that is, while this term's election stands.
	leaderKey string
	rev       int64
	lease     *lease
	// now is the monotonic clock (the candidate's).
	now func() time.Duration
}

var _ oracle.Mark = (*etcdMark)(nil)

func encodeMark(mark uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], mark)
	return string(b[:])
}

func decodeMark(key string, v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: etcd key %s holds %d bytes, not 8", oracle.ErrCorruptMark, key, len(v))
	}
	mark := binary.BigEndian.Uint64(v)
	if mark > oracle.MaxTimestamp+1 {
		return 0, fmt.Errorf("%w: etcd key %s holds %d, above MaxTimestamp+1", oracle.ErrCorruptMark, key, mark)
	}
	return mark, nil
}

// read returns where a new term resumes: the larger of the mark in etcd
// and its copy in the store (0 if neither exists). etcd restored from a
// backup holds an older mark; the store's copy was written before any
// timestamp below it was handed out.
func (m *etcdMark) read(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, markTimeout)
	defer cancel()
	resp, err := m.cli.Get(ctx, m.key)
	if err != nil {
		return 0, fmt.Errorf("reading the oracle's mark: %w", err)
	}
	var inEtcd uint64
	if len(resp.Kvs) > 0 {
		if inEtcd, err = decodeMark(m.key, resp.Kvs[0].Value); err != nil {
			return 0, err
		}
	}
	inStore, err := oracle.ReadMirror(ctx, m.st)
	if err != nil {
		return 0, err
	}
	return max(inEtcd, inStore), nil
}

// Write implements oracle.Mark: the store's copy first (it only rises),
// then one Txn, if the term's election stands and the stored mark is
// below mark (or, the first time, absent), puts mark. A refusal because
// the election no longer stands ends the term and is oracle.ErrNotLeader.
// A stored mark already at or above mark is success: it is durable (an
// earlier attempt whose answer was lost).
func (m *etcdMark) Write(mark uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	if err := oracle.WriteMirror(ctx, m.st, mark); err != nil {
		return err
	}
	val := encodeMark(mark)
	stands := clientv3.Compare(clientv3.CreateRevision(m.leaderKey), "=", m.rev)
	below := clientv3.Compare(clientv3.Value(m.key), "<", val)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		done, missing, err := m.writeOnce(ctx, val, mark, stands, below)
		switch {
		case done:
			return nil
		case missing: // the first mark: create the key
			below = clientv3.Compare(clientv3.CreateRevision(m.key), "=", 0)
			continue
		case errors.Is(err, oracle.ErrNotLeader), errors.Is(err, oracle.ErrCorruptMark):
			return err
		case ctx.Err() != nil:
			return fmt.Errorf("writing the oracle's mark: %w", err)
		}
		select { // an unknown outcome: send again (the conditions make it safe)
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
}

// writeOnce sends one conditional put. done: the mark is durable;
// missing: the mark key does not exist yet.
func (m *etcdMark) writeOnce(ctx context.Context, val string, mark uint64, stands, below clientv3.Cmp) (done, missing bool, err error) {
	resp, err := m.cli.Txn(ctx).If(stands, below).
		Then(clientv3.OpPut(m.key, val)).
		Else(clientv3.OpGet(m.leaderKey), clientv3.OpGet(m.key)).
		Commit()
	if err != nil {
		return false, false, err
	}
	if resp.Succeeded {
		return true, false, nil
	}
	leader := resp.Responses[0].GetResponseRange().Kvs
	if len(leader) == 0 || leader[0].CreateRevision != m.rev {
		err := fmt.Errorf("%w: mark write refused: the election of revision %d no longer stands", oracle.ErrNotLeader, m.rev)
		m.lease.lose(err)
		return false, false, err
	}
	cur := resp.Responses[1].GetResponseRange().Kvs
	if len(cur) == 0 {
		return false, true, nil
	}
	stored, err := decodeMark(m.key, cur[0].Value)
	if err != nil {
		return false, false, err
	}
	if stored < mark { // equal-width big-endian values compare as numbers
		return false, false, fmt.Errorf("%w: etcd key %s: %d stored, not below %d", oracle.ErrCorruptMark, m.key, stored, mark)
	}
	return true, false, nil // durable already
}

// Usable implements oracle.Mark: nil while the term's lease is provably
// live (invariant 1).
func (m *etcdMark) Usable() error { return m.lease.usable(m.now()) }

// Close implements oracle.Mark. The mark stays in etcd; the term's lease
// is the candidate's to end.
func (m *etcdMark) Close() error { return nil }
