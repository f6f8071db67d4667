package docindex

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
)

// syncMap syncs an in-memory corpus, deletes allowed, and drains the
// pipeline.
func syncMap(t *testing.T, db *percolator.DB, files map[string][]byte) SyncStats {
	t.Helper()
	st, err := Sync(context.Background(), db, MemFiles(files), nil, SyncOptions{AllowDeletes: true})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, db, 2)
	return st
}

// checkNoQuarantine fails if any notification was quarantined: an
// observer kept failing on some input.
func checkNoQuarantine(t *testing.T, db *percolator.DB) {
	t.Helper()
	qs, err := db.Quarantine(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		t.Errorf("quarantined: %q %s %s: %s", q.Row, q.Column, q.Observer, q.Error)
	}
}

// bytesCorpus is user input that a text encoding or a separator-joined key
// would break: non-UTF-8 titles, names and links (Latin-1), NUL and 0xFF
// in paths and link targets, a link whose target contains the old link
// key's separator followed by another path, terms named like the
// pipeline's (observed) columns.
func bytesCorpus() map[string][]byte {
	return map[string][]byte{
		"menu.html":          []byte("<title>Caf\xe9 menu</title><p>caf\xe9 cr\xe8me</p><a href=\"caf%E9.html\">x</a>"),
		"caf\xe9.html":       []byte("<title>Latin-1 name</title><a href=\"menu.html\">menu</a>"),
		"notes\xff.txt":      []byte("Gr\xfc\xdfe \xff\xfe title\nbody words\n"),
		"nul\x00name.html":   []byte("<h1>nul in the name</h1><a href=\"a.html%00b.html\">nul</a>"),
		"b.html":             []byte("<title>b</title><a href=\"a.html%00b.html\">also</a><a href=\"%FF%00%FF.html\">ff</a>"),
		"dir\xff/c.html":     []byte("<title>\xff\x00\xff</title><a href=\"../b.html\">up</a>"),
		"invalid\x80\x80.md": []byte("\x80\x80\x80 first line \xc3\x28\n"),
		"empty.txt":          nil,
		"columns.txt":        []byte("members content canonical posting indexed counted: terms named like the pipeline's columns\n"),
	}
}

// TestBytesStayBytes: titles, paths and link targets with any bytes are
// indexed exactly as the batch build indexes them (JSON used to turn
// invalid UTF-8 into U+FFFD), and targets with NUL are counted as
// themselves (the link key used to join target and source with NUL).
func TestBytesStayBytes(t *testing.T) {
	db := openIndex(t, t.TempDir())
	defer db.Close()
	files := bytesCorpus()
	syncMap(t, db, files)
	checkEqualsBatch(t, db, files, "non-UTF-8 corpus")
	checkNoQuarantine(t, db)
	ctx := context.Background()
	// (The HTML tokenizer reads a NUL in text as U+FFFD, as HTML does.)
	for p, want := range map[string]string{"menu.html": "Caf\xe9 menu", "dir\xff/c.html": "\xff\ufffd\xff", "notes\xff.txt": "Gr\xfc\xdfe \xff\xfe title"} {
		if got, err := Title(ctx, db, p); err != nil || got != want {
			t.Errorf("Title(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
	ix, err := Export(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if ix.InLinks["a.html\x00b.html"] != 2 || ix.InLinks["a.html"] != 0 || ix.InLinks["caf\xe9.html"] != 1 {
		t.Errorf("InLinks = %v", ix.InLinks)
	}
	if got, err := Query(ctx, db, "a/b"); err != nil || got != nil {
		t.Errorf("Query(a/b) = %q, %v; want nothing (not a term)", got, err)
	}
}

// longLinks returns a document at src linking to targets of the given
// lengths (each a distinct indexable path in the corpus root).
func longLinks(lengths ...int) []byte {
	var b strings.Builder
	b.WriteString("<title>long links</title>")
	for i, n := range lengths {
		name := fmt.Sprintf("%d-", i)
		name += strings.Repeat("x", n-len(name)-len(".html")) + ".html"
		fmt.Fprintf(&b, "<a href=\"/%s\">l</a>", name)
	}
	return []byte(b.String())
}

// TestLongLinksAndPaths: link targets around the longest kept whole in a
// key and far past the row key limit, from sources at the longest path the
// index takes, are indexed like the batch build and quarantine nothing
// (a link over about 4 KiB used to make a row key over the limit, and
// the terms observer's failures quarantined the whole document).
func TestLongLinksAndPaths(t *testing.T) {
	db := openIndex(t, t.TempDir())
	defer db.Close()
	longest := strings.Repeat("d/", (MaxPathSize-len("x.html"))/2)
	longest += strings.Repeat("p", MaxPathSize-len(longest)-len(".html")) + ".html"
	if len(longest) != MaxPathSize {
		t.Fatalf("test path of %d bytes", len(longest))
	}
	links := longLinks(maxKeyTarget-1, maxKeyTarget, maxKeyTarget+1, 4096, 5000, 64<<10)
	files := map[string][]byte{
		"a.html": links,
		longest:  append([]byte("from the longest path "), links...),
		"b.html": []byte("<a href=\"a.html\">same as from the long path</a>"),
	}
	syncMap(t, db, files)
	checkEqualsBatch(t, db, files, "long links")
	checkNoQuarantine(t, db)
	ix, err := Export(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	for target, n := range ix.InLinks {
		if n != 2 && target != "a.html" {
			t.Errorf("InLinks[%d-byte target] = %d, want 2", len(target), n)
		}
	}
	// One past the longest path: a bad file, and the rest indexed.
	tooLong := "q" + longest
	files[tooLong] = []byte("too long")
	st, err := Sync(context.Background(), db, MemFiles(files), nil, SyncOptions{})
	if err != nil || len(st.Bad) != 1 || st.Bad[0].Path != tooLong || !strings.Contains(st.Bad[0].Reason, fmt.Sprint(MaxPathSize)) {
		t.Fatalf("sync with a path of %d bytes: %+v, %v", len(tooLong), st.Bad, err)
	}
	delete(files, tooLong)
	drain(t, db, 1)
	checkEqualsBatch(t, db, files, "after a path one past the limit")
}

// TestEncodingRoundTrip: every Doc, list and loaded record decodes to what
// was encoded, whatever bytes its strings hold; truncated and random
// values fail with ErrCorrupt and never panic.
func TestEncodingRoundTrip(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	str := func() string {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = []byte{0, 0xff, '/', 'a', 0x80, 0xe9}[rng.IntN(6)]
		}
		return string(b)
	}
	list := func() []string {
		set := map[string]bool{}
		for range rng.IntN(20) {
			set[str()] = true
		}
		return union(nil, keys(set))
	}
	for range 2000 {
		d := Doc{Title: str(), Hash: str(), Words: list(), Links: list()}
		got, err := decodeDoc(encodeDoc(d))
		if err != nil || !reflect.DeepEqual(got, d) {
			t.Fatalf("Doc %q: decoded %q, %v", d, got, err)
		}
		l := list()
		if got, err := decodeList(encodeList(l)); err != nil || !reflect.DeepEqual(got, l) {
			t.Fatalf("list %q: decoded %q, %v", l, got, err)
		}
		rec := loadedRecord{hash: str(), stat: Stat{Size: rng.Int64(), ModTime: -rng.Int64(), Inode: rng.Uint64()}}
		if got, err := decodeLoaded(encodeLoaded(rec.hash, rec.stat)); err != nil || got != rec {
			t.Fatalf("loaded %+v: decoded %+v, %v", rec, got, err)
		}
		enc := encodeDoc(d)
		for _, bad := range [][]byte{enc[:rng.IntN(len(enc))], append(enc, 0), randomBytes(rng)} {
			if _, err := decodeDoc(bad); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeDoc(%q) = %v, want ErrCorrupt", bad, err)
			}
			if _, err := decodeList(bad); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeList(%q) = %v, want ErrCorrupt", bad, err)
			}
		}
	}
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func randomBytes(rng *rand.Rand) []byte {
	b := make([]byte, rng.IntN(30))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestLinkKeysBounded: a link row's key never exceeds the row key limit,
// and distinct (target, source) pairs never share a key, for targets
// around the hashing threshold and with the bytes a key could confuse.
func TestLinkKeysBounded(t *testing.T) {
	targets := []string{"", "a", "a\x00b", "a\x00", "\xff", strings.Repeat("t", maxKeyTarget), strings.Repeat("t", maxKeyTarget+1), strings.Repeat("\xff", 1<<20)}
	sources := []string{"s", "\x00s", "p" + strings.Repeat("s", MaxPathSize-1)}
	seen := map[string][2]string{}
	for _, tg := range targets {
		for _, src := range sources {
			k := linkRow(tg, src)
			if len(k) > percolator.MaxRowSize {
				t.Errorf("link key of %d bytes for a %d-byte target and %d-byte source", len(k), len(tg), len(src))
			}
			if prev, dup := seen[k]; dup {
				t.Errorf("(%q, %q) and (%q, %q) share a key", prev[0], prev[1], tg, src)
			}
			seen[k] = [2]string{tg, src}
		}
	}
}

// TestFoldCacheStale: a fold uses the flags an earlier batch of its
// CountIndex wrote only if no other fold committed since (the fold count
// says); a stale cache that claims a present term is not counted yet
// would count it twice.
func TestFoldCacheStale(t *testing.T) {
	db := openIndex(t, t.TempDir())
	defer db.Close()
	ctx := context.Background()
	files := map[string][]byte{"a.txt": []byte("alpha beta"), "b.txt": []byte("beta")}
	syncMap(t, db, files)
	checkEqualsBatch(t, db, files, "first") // folds everything
	files["b.txt"] = []byte("beta alpha")   // alpha set again, by b.txt
	syncMap(t, db, files)
	c, err := StoredCounts(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var folds int64
	if err := db.View(ctx, func(tx *percolator.Txn) error {
		s, err := readCounts(ctx, tx)
		folds = s.folds
		return err
	}); err != nil {
		t.Fatal(err)
	}
	stale := &flagCache{folds: folds - 1, flags: map[cell]bool{cellOf(termFlagCell("alpha")): false}}
	if err := db.Update(ctx, func(tx *percolator.Txn) error { _, err := foldOnce(ctx, tx, stale); return err }); err != nil {
		t.Fatal(err)
	}
	if got, err := StoredCounts(ctx, db); err != nil || got != c {
		t.Fatalf("counts %+v after a fold with a stale cache, want %+v (%v)", got, c, err)
	}
}

func cellOf(row, col string) cell { return cell{row, col} }
