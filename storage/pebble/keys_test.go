package pebble

import (
	"bytes"
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

// tricky rows: NUL and 0xFF bytes, and rows that are prefixes of others.
var trickyRows = [][]byte{
	{0x00}, {0x00, 0x00}, {0x00, 0x01}, {0x00, 0xFF}, {0x01}, {0xFF}, {0xFF, 0x00},
	[]byte("a"), []byte("a\x00"), []byte("a\x00b"), []byte("a\x01"), []byte("a\xff"),
	[]byte("ab"), []byte("abc"), []byte("b"),
}

var trickyQualifiers = []string{"", "\x00", "\x00\x00", "\x01", "\xff", "q", "q\x00", "q\x00\xff", "qq"}

func TestKeyRoundTrip(t *testing.T) {
	for _, row := range trickyRows {
		for _, q := range trickyQualifiers {
			for _, ts := range []uint64{0, 1, 1 << 40, 1<<64 - 2} {
				k := appendKey(nil, "fam", row, q, ts)
				if len(k) != keyLen("fam", row, q) {
					t.Fatalf("keyLen(%q, %q) = %d, key has %d bytes", row, q, keyLen("fam", row, q), len(k))
				}
				got, err := decodeKey(k)
				if err != nil {
					t.Fatalf("decode(%q): %v", k, err)
				}
				if got.family != "fam" || !bytes.Equal(got.row, row) || got.qualifier != q || got.ts != ts {
					t.Fatalf("round trip of (%q, %q, %d) gave %+v", row, q, ts, got)
				}
			}
		}
	}
}

func TestDecodeKeyRejectsMalformed(t *testing.T) {
	for _, k := range [][]byte{
		nil,
		[]byte("\x00row"),
		[]byte("fam\x00row"),
		[]byte("fam\x00row\x00\x05q\x00\x01" + "12345678"),
		[]byte("fam\x00row\x00\x01q\x00\x01" + "123"),
	} {
		if _, err := decodeKey(k); err == nil {
			t.Errorf("decodeKey(%q) succeeded", k)
		}
	}
}

type tuple struct {
	row []byte
	q   string
	ts  uint64
}

// compareTuples is the order the store promises: row, qualifier, ts desc.
func compareTuples(a, b tuple) int {
	if c := bytes.Compare(a.row, b.row); c != 0 {
		return c
	}
	if c := cmp.Compare(a.q, b.q); c != 0 {
		return c
	}
	return cmp.Compare(b.ts, a.ts)
}

func randomTuple(r *rand.Rand) tuple {
	pick := func() []byte {
		b := make([]byte, r.IntN(4))
		for i := range b {
			b[i] = []byte{0x00, 0x01, 0xFE, 0xFF, 'a'}[r.IntN(5)]
		}
		return b
	}
	row := pick()
	if len(row) == 0 {
		row = []byte{0x00}
	}
	return tuple{row: row, q: string(pick()), ts: r.Uint64N(4) * (1 << 62)}
}

func TestKeyOrdering(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	var tuples []tuple
	for _, row := range trickyRows {
		for _, q := range trickyQualifiers {
			tuples = append(tuples, tuple{row, q, 7}, tuple{row, q, 8})
		}
	}
	for range 300 {
		tuples = append(tuples, randomTuple(r))
	}
	for _, a := range tuples {
		ka := appendKey(nil, "f", a.row, a.q, a.ts)
		for _, b := range tuples {
			kb := appendKey(nil, "f", b.row, b.q, b.ts)
			if got, want := bytes.Compare(ka, kb), compareTuples(a, b); got != want {
				t.Fatalf("compare(%+v, %+v) = %d, want %d", a, b, got, want)
			}
		}
	}
}

// TestRowBounds checks the bounds Scan and ReadRow iterate: a row's cells
// lie in [rowPrefix, prefixEnd(rowPrefix)), and a row range [start, end)
// maps to [rowPrefix(start), rowPrefix(end)).
func TestRowBounds(t *testing.T) {
	for _, a := range trickyRows {
		pa := appendRowPrefix(nil, "f", a)
		ea := storage.AppendPrefixEnd(nil, pa)
		for _, b := range trickyRows {
			for _, q := range trickyQualifiers {
				for _, ts := range []uint64{0, 1<<64 - 2} {
					k := appendKey(nil, "f", b, q, ts)
					in := bytes.Compare(k, pa) >= 0 && bytes.Compare(k, ea) < 0
					if in != bytes.Equal(a, b) {
						t.Fatalf("key of row %q in bounds of row %q: %v", b, a, in)
					}
					if got, want := bytes.Compare(k, pa) >= 0, bytes.Compare(b, a) >= 0; got != want {
						t.Fatalf("row %q >= start %q: key says %v", b, a, got)
					}
					if got, want := bytes.Compare(k, ea) >= 0, bytes.Compare(b, a) > 0; got != want {
						t.Fatalf("row %q > row %q: key says %v", b, a, got)
					}
				}
			}
		}
	}
}

func TestFamilyKeyspaces(t *testing.T) {
	fams := []string{"a", "a\x01", "ab", "b", "\xff"}
	for _, f := range fams {
		lo, hi := appendFamilyStart(nil, f), appendFamilyEnd(nil, f)
		for _, g := range fams {
			for _, row := range trickyRows {
				k := appendKey(nil, g, row, "\xff", 0)
				in := bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0
				if in != (f == g) {
					t.Fatalf("key of family %q in keyspace of %q: %v", g, f, in)
				}
			}
		}
		if bytes.HasPrefix(lo, []byte{0}) || !bytes.HasPrefix(familyMetaPrefix, []byte{0}) {
			t.Fatal("metadata keys must begin with 0x00 and cell keys must not")
		}
	}
}

// TestCellComparer checks the split against pebble's rules for a Split (a column
// alone sorts before its versions; columns order keys before timestamps)
// over tricky columns and timestamps, and that metadata keys are unsplit.
func TestCellComparer(t *testing.T) {
	var prefixes, suffixes [][]byte
	for _, row := range trickyRows {
		for _, q := range trickyQualifiers {
			prefixes = append(prefixes, appendEscapedString(appendRowPrefix(nil, "f", row), q))
		}
	}
	for _, ts := range []uint64{0, 1, 2, 255, 256, 1 << 40, 1<<62 - 1} {
		suffixes = append(suffixes, appendTS(nil, ts))
	}
	suffixes = append(suffixes, nil) // a column alone
	cmpKeys := cellComparer.Compare
	for _, ap := range prefixes {
		for _, as := range suffixes {
			a := slices.Concat(ap, as)
			if n := splitCell(a); n != len(ap) {
				t.Fatalf("splitCell(%x) = %d, want %d", a, n, len(ap))
			}
			for _, bp := range prefixes {
				for _, bs := range suffixes {
					b := slices.Concat(bp, bs)
					want := cmp.Or(bytes.Compare(ap, bp), bytes.Compare(as, bs))
					if got := cmpKeys(a, b); got != want {
						t.Fatalf("Compare(%x, %x) = %d, want %d (columns first, then timestamps)", a, b, got, want)
					}
				}
			}
		}
	}
	for _, k := range [][]byte{formatKey, append(familyMetaPrefix, "data"...), {0x00}, {}} {
		if got := splitCell(k); got != len(k) {
			t.Errorf("splitCell(%q) = %d, want the whole key", k, got)
		}
	}
	key := appendKey(nil, "f", []byte("row"), "q", 7)
	if got, want := splitCell(key), len(key)-tsLen; got != want {
		t.Errorf("splitCell(cell key) = %d, want %d", got, want)
	}
}
