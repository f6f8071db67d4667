// Package view prints what percolator's commands show: the status and
// its tables, the index job's report, the dump of rows as the paper's
// tables, lists of locks and notifications, edges, and the bank's
// progress; as aligned text, or as JSON.
//
// Everything user data reaches the terminal through Path or Text, so a
// row key or a file name with invalid UTF-8 or control bytes prints on
// one line and can be told apart.
//
// With --json, a command prints through JSON (or JSONLine, for a stream)
// the types here, which follow one convention (docs/json.md states it,
// with each command's schema): snake_case keys; durations as seconds
// (Seconds) in keys ending in _s; times as RFC 3339 strings (Time);
// user bytes as a UserBytes field x, which prints as x when the bytes are
// valid UTF-8 and as x_b64 (standard base64) always; no HTML escaping.
// A type with a UserBytes field marshals through marshalFlat.
package view
