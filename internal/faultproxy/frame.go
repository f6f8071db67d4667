package faultproxy

import (
	"encoding/binary"
	"io"
)

// frameHeaderLen is the size of an HTTP/2 frame header (RFC 9113 §4.1):
// a 24-bit length, an 8-bit type, 8-bit flags and a 31-bit stream id
// behind one reserved bit, all big-endian.
const frameHeaderLen = 9

// HTTP/2 frame types the proxy tells apart; every other type is forwarded
// without a look.
const (
	frameData    = 0x0
	frameHeaders = 0x1
)

// frameHeader is the part of a frame header the proxy acts on.
type frameHeader struct {
	length   uint32
	typ      uint8
	streamID uint32
}

// parseFrameHeader decodes the first frameHeaderLen bytes of b.
func parseFrameHeader(b []byte) frameHeader {
	return frameHeader{
		length:   uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]),
		typ:      b[3],
		streamID: binary.BigEndian.Uint32(b[5:9]) &^ (1 << 31),
	}
}

// isResponse reports whether the frame carries part of a call's response:
// HEADERS or DATA on a stream. Connection-level frames (stream 0) and
// control frames on a stream are not responses.
func (h frameHeader) isResponse() bool {
	return h.streamID != 0 && (h.typ == frameData || h.typ == frameHeaders)
}

// readFrame reads one whole frame from r into buf, growing it if needed,
// and returns the frame's bytes (header and payload) and its header.
// It returns io.EOF only when r ends at a frame boundary, and
// io.ErrUnexpectedEOF when it ends inside a frame.
func readFrame(r io.Reader, buf []byte) ([]byte, frameHeader, error) {
	buf = grow(buf, frameHeaderLen)
	if _, err := io.ReadFull(r, buf); err != nil {
		return buf, frameHeader{}, err
	}
	h := parseFrameHeader(buf)
	buf = grow(buf, frameHeaderLen+int(h.length))
	if _, err := io.ReadFull(r, buf[frameHeaderLen:]); err != nil {
		return buf, h, noEOF(err)
	}
	return buf, h, nil
}

// grow returns buf resized to n bytes, keeping its first bytes.
func grow(buf []byte, n int) []byte {
	if cap(buf) >= n {
		return buf[:n]
	}
	return append(buf[:cap(buf)], make([]byte, n-cap(buf))...)
}

// noEOF turns an EOF after a frame's header into io.ErrUnexpectedEOF: the
// stream did not end at a frame boundary.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
