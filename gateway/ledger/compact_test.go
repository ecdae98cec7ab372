package ledger

import (
	"bytes"
	"encoding/json"
	"testing"
)

// compactCases are JSON texts for TestCompactJSON and FuzzCompactJSON's seed
// corpus.
var compactCases = []string{
	`{}`,
	`{"a":1}`,
	`{"a": 1}`,
	"{\"a\":1\n}",
	`{"text":"with spaces, \"quotes\" and a \\ backslash"}`,
	`{"text":"ends with a backslash \\","b":[1, 2]}`,
	`{"t":"\t tab escaped","n":null}`,
	`[1,2]`,
	`"a string"`,
	`null`,
	`{"x_crosstalk":{"envelope":{"body":"line one\nline two"}},"to":["bob"]}`,
}

// TestCompactJSON checks compactJSON against NormalizeData: on valid JSON
// it is true exactly when NormalizeData returns the text unchanged.
func TestCompactJSON(t *testing.T) {
	for _, in := range compactCases {
		checkCompact(t, []byte(in))
	}
}

func FuzzCompactJSON(f *testing.F) {
	for _, in := range compactCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if json.Valid(b) {
			checkCompact(t, b)
		}
	})
}

func checkCompact(t *testing.T, b []byte) {
	t.Helper()
	norm, err := NormalizeData(b)
	want := err == nil && bytes.Equal(norm, b)
	if got := compactJSON(b); got != want {
		t.Errorf("compactJSON(%q) = %v, want %v (NormalizeData = %q, %v)", b, got, want, norm, err)
	}
}
