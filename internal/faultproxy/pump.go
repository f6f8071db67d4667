package faultproxy

import (
	"bufio"
	"io"
	"net"
	"sync"
	"time"
)

// readBufSize is the size of a read from a side whose bytes are not
// parsed, and of the server→client read buffer when they are. It only
// saves reads: a frame is forwarded as soon as it is whole, whatever
// follows it.
const readBufSize = 64 << 10

// queueLen bounds the chunks read but not yet written, per direction of a
// connection: a held (delayed or blackholed) direction stops reading once
// it is full, and the sender's writes then back up in TCP as they would
// behind a slow network. It is the most chunks a delay lets through per
// latency, so it is large: a small queue turns latency into a cap on
// throughput (at 16, 200 small frames took ten latencies).
const queueLen = 256

// How a direction ends after a chunk.
const (
	more     = iota // data; the direction goes on
	endEOF          // the source ended cleanly: half-close the destination
	endClose        // error, truncated frame or drop: close both sides
)

// chunk is what a reader hands its writer: bytes read together (a whole
// frame when parsed), or the direction's end, and when it may be written.
type chunk struct {
	b   []byte
	end int
	due time.Time // zero: at once
}

// run proxies the connection until both directions have ended, then
// closes it. Each direction is a reader and a writer joined by a queue,
// so that a delay holds each chunk for its latency without holding back
// the ones read after it.
func (c *Conn) run() {
	up := make(chan chunk, queueLen)
	down := make(chan chunk, queueLen)
	var wg sync.WaitGroup
	wg.Go(func() { c.read(ToServer, rawReader(c.client), up) })
	wg.Go(func() { c.write(ToServer, c.server, up) })
	var next func() ([]byte, bool, error)
	if c.p.passThrough {
		next = rawReader(c.server)
	} else {
		next = frameReader(c.server)
	}
	wg.Go(func() { c.read(ToClient, next, down) })
	c.write(ToClient, c.client, down)
	wg.Wait()
	c.close()
}

// read turns what next returns into chunks on q until the direction ends
// or the connection closes. next returns the bytes read, whether they are
// a response frame, and io.EOF at a clean end.
func (c *Conn) read(dir Direction, next func() ([]byte, bool, error), q chan<- chunk) {
	var last time.Time // the latest due time queued: chunks never overtake
	for {
		b, response, err := next()
		ch := chunk{b: b}
		switch {
		case err == io.EOF:
			ch.end = endEOF
		case err != nil:
			ch.b, ch.end = nil, endClose
		case response && c.p.takeArm(c):
			ch.b, ch.end = nil, endClose
		}
		ch.due, last = c.due(dir, last)
		select {
		case q <- ch:
		case <-c.done:
			return
		}
		if ch.end != more {
			return
		}
	}
}

// due draws a chunk's latency in dir, read now, and returns when it may be
// written: never before last, the due time of the chunk before it.
func (c *Conn) due(dir Direction, last time.Time) (due, newLast time.Time) {
	c.p.mu.Lock()
	i := dir.index()
	lat := c.p.mu.delay[i].sample(c.p.mu.rng) + c.state.delay[i].sample(c.p.mu.rng)
	c.p.mu.Unlock()
	now := time.Now()
	if lat == 0 && !last.After(now) {
		return time.Time{}, last
	}
	due = now.Add(lat)
	if last.After(due) {
		due = last
	}
	return due, due
}

// write writes q's chunks to dst in order, each once it is due and the
// connection is not blackholed, until the direction ends or the
// connection closes.
func (c *Conn) write(dir Direction, dst net.Conn, q <-chan chunk) {
	for {
		var ch chunk
		select {
		case ch = <-q:
		case <-c.done:
			return
		}
		if !c.waitDue(ch.due) || !c.waitOpen() {
			return
		}
		switch ch.end {
		case endEOF:
			closeWrite(dst)
			return
		case endClose:
			c.close()
			return
		}
		if _, err := dst.Write(ch.b); err != nil {
			c.close()
			return
		}
	}
}

// waitDue waits until due; false if the connection closed first.
func (c *Conn) waitDue(due time.Time) bool {
	d := time.Until(due)
	if due.IsZero() || d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.done:
		return false
	}
}

// waitOpen waits while the connection is blackholed; false if it closed
// first.
func (c *Conn) waitOpen() bool {
	for {
		c.p.mu.Lock()
		held, changed := c.heldLocked(), c.p.mu.changed
		c.p.mu.Unlock()
		if !held {
			return true
		}
		select {
		case <-changed:
		case <-c.done:
			return false
		}
	}
}

// rawReader returns the bytes of r as they arrive, unparsed.
func rawReader(r io.Reader) func() ([]byte, bool, error) {
	buf := make([]byte, readBufSize)
	var pending error // an error that came with bytes, returned next
	return func() ([]byte, bool, error) {
		if pending != nil {
			return nil, false, pending
		}
		for {
			n, err := r.Read(buf)
			if n > 0 {
				pending = err
				return append([]byte(nil), buf[:n]...), false, nil
			}
			if err != nil {
				return nil, false, err
			}
		}
	}
}

// frameReader returns r's HTTP/2 frames one by one, whole, and whether
// each is a response frame.
func frameReader(r io.Reader) func() ([]byte, bool, error) {
	br := bufio.NewReaderSize(r, readBufSize)
	return func() ([]byte, bool, error) {
		b, h, err := readFrame(br, nil)
		if err != nil {
			return nil, false, err
		}
		return b, h.isResponse(), nil
	}
}

// closeWrite passes a clean end of stream on to c, keeping the reverse
// direction open.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}
