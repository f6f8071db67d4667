package view

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// JSON prints v as indented JSON, without escaping HTML characters (a
// row key "a<b" prints as "a<b"). What --json prints follows one
// convention, which docs/json.md states: snake_case keys, durations in
// seconds as numbers named *_s (Seconds), times as RFC 3339 strings
// (Time), and user bytes as the pair x and x_b64 (UserBytes).
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// JSONLine prints v as JSON on one line (a stream of items, one a line),
// without escaping HTML characters.
func JSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// UserBytes is user bytes (a row key, a column, a queue item's body, a
// path) in JSON. A field of this type tagged `json:"x"` in a struct whose
// MarshalJSON is marshalFlat prints as two fields: "x", the bytes as a
// string, only when they are valid UTF-8, and "x_b64", the bytes in
// standard base64, always; so a reader that wants the exact bytes reads
// x_b64, and one that shows them reads x when it is there. With
// omitempty, nil bytes print neither.
type UserBytes []byte

// Seconds is a duration as --json prints it: seconds, as a number.
func Seconds(d time.Duration) float64 { return d.Seconds() }

// Time is a time as --json prints it: RFC 3339 in UTC, with the
// fraction of the second; "" for the zero time.
func Time(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

var bytesType = reflect.TypeFor[UserBytes]()

// marshalFlat marshals the struct v as encoding/json would (the fields'
// json tags, with omitempty; no embedded structs), except that a UserBytes
// field x prints as x and x_b64, and nothing is HTML-escaped.
func marshalFlat(v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case !f.IsExported() || name == "-":
			continue
		case f.Anonymous || name == "":
			return nil, fmt.Errorf("view: field %s of %s has no json name", f.Name, rv.Type())
		case opts == "omitempty" && isEmpty(rv.Field(i)):
			continue
		}
		if err := appendField(&buf, name, rv.Field(i)); err != nil {
			return nil, err
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// appendField appends the field name with the value v to the object in
// buf: a UserBytes value as its pair.
func appendField(buf *bytes.Buffer, name string, v reflect.Value) error {
	if v.Type() != bytesType {
		return appendMember(buf, name, v.Interface())
	}
	b := v.Bytes()
	if utf8.Valid(b) {
		if err := appendMember(buf, name, string(b)); err != nil {
			return err
		}
	}
	return appendMember(buf, name+"_b64", base64.StdEncoding.EncodeToString(b))
}

// appendMember appends "name": and v's JSON to the object in buf.
func appendMember(buf *bytes.Buffer, name string, v any) error {
	if buf.Len() > 1 {
		buf.WriteByte(',')
	}
	fmt.Fprintf(buf, "%q:", name) // names are snake_case ASCII
	return encodeNoHTML(buf, v)
}

// isEmpty is encoding/json's omitempty test.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return v.IsZero()
	}
	return false // a struct is never empty
}

// encodeNoHTML appends v's JSON to buf without escaping HTML characters
// (json.Marshal would, and the encoder printing the result keeps the
// escapes it finds).
func encodeNoHTML(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	return nil
}

// marshalNoHTML is json.Marshal without escaping HTML characters, for a
// MarshalJSON method (the encoder printing its result keeps the escapes
// it finds).
func marshalNoHTML(v any) ([]byte, error) {
	var buf bytes.Buffer
	err := encodeNoHTML(&buf, v)
	return buf.Bytes(), err
}
