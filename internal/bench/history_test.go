package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestHistory runs History on two small ledgers and checks that every
// read answered, within the page bound of issue 13, with ratios for the
// second size. It checks no times: they depend on the machine.
func TestHistory(t *testing.T) {
	res, err := History(t.Context(), HistoryOptions{Sizes: []int{300, 900}, Runs: 1})
	if err != nil {
		t.Fatalf("History() = %v", err)
	}
	if len(res.Sizes) != 2 {
		t.Fatalf("History() sizes = %d, want 2", len(res.Sizes))
	}
	for i, s := range res.Sizes {
		if s.ImportPerSec <= 0 || len(s.Reads) != 10 {
			t.Errorf("size %d: import %.0f/s, %d reads; want a rate and 10 reads", s.Events, s.ImportPerSec, len(s.Reads))
		}
		for _, r := range s.Reads {
			if r.Bytes == 0 || r.Bytes > 200<<10 || r.P50ms <= 0 || (i > 0) != (r.Ratio > 0) {
				t.Errorf("size %d: %s = %+v, want an answer of at most 200 KB, a time and a ratio after the first size", s.Events, r.Name, r)
			}
		}
	}
	var out bytes.Buffer
	res.Print(&out)
	if !strings.Contains(out.String(), "web /ui/agents/bob") || !strings.Contains(out.String(), "900 events") {
		t.Errorf("Print() = %s, want every read and size", out.String())
	}
}
