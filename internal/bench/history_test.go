package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestHistory runs History on two small ledgers of each backend and
// checks that every read answered, within the page bound of issue 13,
// with ratios for the second size of each, and that the projections were
// built and caught up. It checks no times: they depend on the machine.
func TestHistory(t *testing.T) {
	res, err := History(t.Context(), HistoryOptions{Sizes: []int{300, 900}, Ledgers: []string{"sqlite", "jetstream"}, Runs: 1})
	if err != nil {
		t.Fatalf("History() = %v", err)
	}
	if len(res.Sizes) != 4 {
		t.Fatalf("History() sizes = %d, want 4", len(res.Sizes))
	}
	for i, s := range res.Sizes {
		if s.ImportPerSec <= 0 || len(s.Reads) != 10 || s.RebuildMs <= 0 || s.CatchUpMs <= 0 || s.Ledger != []string{"sqlite", "jetstream"}[i/2] {
			t.Errorf("size %d: %+v; want a %s ledger, a rate, times of the projections and 10 reads", s.Events, s, []string{"sqlite", "jetstream"}[i/2])
		}
		for _, r := range s.Reads {
			if r.Bytes == 0 || r.Bytes > 200<<10 || r.P50ms <= 0 || (i%2 > 0) != (r.Ratio > 0) {
				t.Errorf("size %d: %s = %+v, want an answer of at most 200 KB, a time and a ratio after the first size", s.Events, r.Name, r)
			}
		}
	}
	var out bytes.Buffer
	res.Print(&out)
	if !strings.Contains(out.String(), "web /ui/agents/bob") || !strings.Contains(out.String(), "jetstream 900 events") {
		t.Errorf("Print() = %s, want every read and size", out.String())
	}
}
