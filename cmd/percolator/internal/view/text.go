package view

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
)

// Path is a path (or row key) as printed: as is if it is printable
// UTF-8, Go-quoted otherwise (a file name need not be UTF-8, and may
// hold control bytes), so every path prints on one line and can be told
// apart.
func Path(p string) string {
	if utf8.ValidString(p) && !containsFunc(p, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return p
	}
	return strconv.Quote(p)
}

// Text is text as printed: invalid UTF-8 and control characters
// escaped, everything else as is.
func Text(s string) string {
	if utf8.ValidString(s) && !containsFunc(s, unicode.IsControl) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

func containsFunc(s string, f func(rune) bool) bool {
	for _, r := range s {
		if f(r) {
			return true
		}
	}
	return false
}

// FirstLine is s up to its first newline.
func FirstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// Version prints the build the binary was made from (ok false: it has
// no build information) as text, or JSON.
func Version(w io.Writer, text string, b cli.Build, ok, jsonOut bool) error {
	if !jsonOut {
		_, err := fmt.Fprintln(w, text)
		return err
	}
	if !ok {
		b.Version = "unknown"
	}
	return JSON(w, struct {
		Version  string `json:"version"`
		Revision string `json:"revision,omitempty"`
		Modified bool   `json:"modified"`
		Go       string `json:"go_version,omitempty"`
	}{b.Version, b.Revision, b.Modified, b.Go})
}
