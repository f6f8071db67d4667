package storage

// PrefixEnd is the first key after every key that begins with p: the
// exclusive end of a scan over the prefix. It is nil (unbounded) when p
// is empty or all 0xff, since no key follows every such key.
func PrefixEnd(p []byte) []byte { return AppendPrefixEnd(nil, p) }

// AppendPrefixEnd appends PrefixEnd(p) to dst and returns the result, or
// nil when PrefixEnd(p) is nil; a caller on a hot path passes a buffer
// of its own as dst.
func AppendPrefixEnd(dst, p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] < 0xff {
			dst = append(dst, p[:i+1]...)
			dst[len(dst)-1]++
			return dst
		}
	}
	return nil
}
