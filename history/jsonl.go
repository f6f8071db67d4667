package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Encoder writes events as JSON lines, one event a line, so a history
// torn by a kill loses at most its last line.
type Encoder struct {
	w   io.Writer
	buf bytes.Buffer
	enc *json.Encoder
}

// NewEncoder writes to w. Each Write is one w.Write call.
func NewEncoder(w io.Writer) *Encoder {
	e := &Encoder{w: w}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}

// Write writes one event. Not safe for concurrent use.
func (e *Encoder) Write(o Op) error {
	e.buf.Reset()
	if err := e.enc.Encode(o); err != nil {
		return err
	}
	_, err := e.w.Write(e.buf.Bytes())
	return err
}

// ErrTorn reports that a history's last line is incomplete: its writer
// was killed while writing it.
var ErrTorn = errors.New("history: last line torn")

// ReadAll reads JSON lines. A last line without its newline that does not
// decode is dropped, and ReadAll returns the events before it with
// ErrTorn; any other line that does not decode is an error.
func ReadAll(r io.Reader) ([]Op, error) {
	br := bufio.NewReader(r)
	var out []Op
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var o Op
			if derr := json.Unmarshal(line, &o); derr != nil {
				if err == io.EOF {
					return out, ErrTorn
				}
				return out, fmt.Errorf("history: line %d: %w", n, derr)
			}
			out = append(out, o)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}
