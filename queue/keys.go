package queue

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// Keys. A queue's rows share the prefix "queue/NAME\x00" (names hold no
// NUL); then "i"+ID for items, "v"+at+ID+req for index entries (at: 16
// hex digits of store milliseconds, so entries sort by the time their
// item becomes available, then by item), "d"+ID for dead letters and "c"
// for the shared cursor. An ID is 16 hex digits of the push's store time
// and 16 random ones.
func prefix(name string) string { return "queue/" + name + "\x00" }

func itemRow(name, id string) []byte { return []byte(prefix(name) + "i" + id) }
func deadRow(name, id string) []byte { return []byte(prefix(name) + "d" + id) }
func cursorRow(name string) []byte   { return []byte(prefix(name) + "c") }

func entryKey(at int64, id string, req uint64) string {
	return fmt.Sprintf("%016x%s%016x", uint64(at), id, req)
}

func entryRow(name, key string) []byte { return []byte(prefix(name) + "v" + key) }

const idLen = 32

// entry is an index entry as scanned.
type entry struct {
	key   string // after the "v"
	at    int64
	id    string
	req   uint64
	epoch uint64
}

func parseEntry(name string, r storage.Row) (entry, bool) {
	k := string(r.Key)
	p := prefix(name) + "v"
	if !strings.HasPrefix(k, p) || len(k) != len(p)+16+idLen+16 || len(r.Cells) == 0 || len(r.Cells[0].Value) != 8 {
		return entry{}, false
	}
	k = k[len(p):]
	at, err1 := hex.DecodeString(k[:16])
	req, err2 := hex.DecodeString(k[16+idLen:])
	if err1 != nil || err2 != nil {
		return entry{}, false
	}
	return entry{key: k, at: int64(binary.BigEndian.Uint64(at)), id: k[16 : 16+idLen], req: binary.BigEndian.Uint64(req),
		epoch: binary.BigEndian.Uint64(r.Cells[0].Value)}, true
}

// newID returns a new item's ID and its push time: the store time ms, or
// the last ID's if that is later, so that one process's pushes sort in
// the order it made them.
func (q *Queue) newID(ms int64) (string, int64) {
	q.mu.Lock()
	if ms <= q.lastMS {
		ms, q.seq = q.lastMS, q.seq+1
	} else {
		q.lastMS, q.seq = ms, 0
	}
	seq := q.seq
	q.mu.Unlock()
	return fmt.Sprintf("%016x%08x%08x", uint64(ms), seq, rand.Uint32()), ms
}

// PushedAt returns the store time an item was pushed, from its ID.
func PushedAt(id string) time.Time {
	b, err := hex.DecodeString(id[:min(16, len(id))])
	if err != nil || len(b) != 8 {
		return time.Time{}
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(b)))
}

func epochValue(e uint64) []byte { return binary.BigEndian.AppendUint64(nil, e) }

// key is the index entry key of item id's state st.
func (st *state) key(id string) string { return entryKey(st.At, id, st.Req) }
