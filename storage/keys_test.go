package storage

import (
	"bytes"
	"testing"
)

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ p, want []byte }{
		{nil, nil},
		{[]byte{}, nil},
		{[]byte("a"), []byte("b")},
		{[]byte("doc/"), []byte("doc0")},
		{[]byte{'a', 0xff}, []byte("b")},
		{[]byte{0xff, 0xfe, 'n'}, []byte{0xff, 0xfe, 'o'}},
		{[]byte{0xff, 0xff}, nil},
		{[]byte{0x00, 0x01}, []byte{0x00, 0x02}},
	} {
		got := PrefixEnd(c.p)
		if !bytes.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("PrefixEnd(%q) = %q, want %q", c.p, got, c.want)
		}
		// Every key with the prefix sorts below the end.
		if got != nil {
			for _, k := range [][]byte{c.p, append(bytes.Clone(c.p), 0xff, 0xff, 0xff)} {
				if bytes.Compare(k, got) >= 0 {
					t.Errorf("PrefixEnd(%q) = %q does not follow %q", c.p, got, k)
				}
			}
		}
	}
	buf := make([]byte, 0, 16)
	if got := AppendPrefixEnd(buf[:0], []byte("ab")); string(got) != "ac" || &got[0] != &buf[:1][0] {
		t.Errorf("AppendPrefixEnd into a buffer = %q, not in the buffer", got)
	}
	p := []byte("ab")
	_ = PrefixEnd(p)
	if string(p) != "ab" {
		t.Errorf("PrefixEnd changed its argument to %q", p)
	}
}
