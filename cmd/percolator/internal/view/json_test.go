package view

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

type pairEntry struct {
	Row   UserBytes `json:"row"`
	End   UserBytes `json:"end,omitempty"`
	Title string    `json:"title"`
}

func (e pairEntry) MarshalJSON() ([]byte, error) { return marshalFlat(e) }

// TestJSONNoHTMLEscape: <, > and & print as they are, in plain fields and
// in the pairs of user bytes.
func TestJSONNoHTMLEscape(t *testing.T) {
	var out bytes.Buffer
	if err := JSON(&out, []pairEntry{{Row: UserBytes("a<b>&c"), Title: "x > y"}}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.Contains(got, `\u003c`) || strings.Contains(got, `\u003e`) || strings.Contains(got, `\u0026`) ||
		!strings.Contains(got, `"row": "a<b>&c"`) || !strings.Contains(got, `"title": "x > y"`) {
		t.Fatalf("HTML escaped:\n%s", got)
	}
}

// TestJSONUserBytes: valid UTF-8 prints as x and x_b64; invalid UTF-8
// only as x_b64; nil bytes with omitempty not at all.
func TestJSONUserBytes(t *testing.T) {
	for _, tc := range []struct {
		e    pairEntry
		want map[string]any
	}{
		{pairEntry{Row: UserBytes("café")}, map[string]any{"row": "café", "row_b64": "Y2Fmw6k=", "title": ""}},
		{pairEntry{Row: UserBytes("caf\xe9\x00"), End: UserBytes{0xff}}, map[string]any{"row_b64": "Y2Fm6QA=", "end_b64": "/w==", "title": ""}},
		{pairEntry{Row: UserBytes{}, End: UserBytes("z")}, map[string]any{"row": "", "row_b64": "", "end": "z", "end_b64": "eg==", "title": ""}},
	} {
		var out bytes.Buffer
		if err := JSONLine(&out, tc.e); err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%q: %v", out.String(), err)
		}
		if len(got) != len(tc.want) {
			t.Errorf("%+v: %s, want %v", tc.e, out.String(), tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%+v: %s: %q = %v, want %v", tc.e, out.String(), k, got[k], v)
			}
		}
	}
}
