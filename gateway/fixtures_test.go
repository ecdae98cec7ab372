package gateway_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/fixtures"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// TestIngestFixtures sends every envelope vector through the relay: each
// envelope the vector expects is recorded (or, if incomplete, rejected with
// E-FORMAT — the relay never records a partial envelope), each expected
// error is rejected with the same code and line, and every outcome is in
// the ledger.
func TestIngestFixtures(t *testing.T) {
	names, err := fixtures.Envelopes()
	if err != nil || len(names) == 0 {
		t.Fatalf("fixtures.Envelopes() = %v, %v", names, err)
	}
	for _, name := range names {
		// A relay per vector: vectors reuse message ids across senders.
		r := gateway.New(memory.New(nil), nil)
		in, _ := fixtures.FS.ReadFile("envelope/" + name + ".txt")
		want, _ := fixtures.FS.ReadFile("envelope/" + name + ".jsonl")
		var expected []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
			if line == "" {
				continue
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatal(err)
			}
			expected = append(expected, v)
		}
		if bytes.Count(in, []byte("\n")) > 10000 {
			continue // size-limit vectors are covered by the HTTP tests
		}
		outs := ingest(t, r, "", string(in))
		if len(expected) == 0 {
			if len(outs) != 1 || outs[0].Reject == nil {
				t.Errorf("%s: no envelope expected, outcomes %+v, want one E-FORMAT rejection", name, outs)
			}
			continue
		}
		if len(outs) != len(expected) {
			t.Errorf("%s: %d outcomes, want %d", name, len(outs), len(expected))
			continue
		}
		for i, exp := range expected {
			o := outs[i]
			if o.Event.ID == "" {
				t.Errorf("%s #%d: outcome not recorded in the ledger", name, i)
			}
			if e, isErr := exp["error"].(map[string]any); isErr {
				if o.Reject == nil || string(o.Reject.Code) != e["code"] || float64(o.Reject.Line) != e["line"] {
					t.Errorf("%s #%d: outcome %+v, want rejection %v at line %v", name, i, o.Reject, e["code"], e["line"])
				}
				continue
			}
			if exp["complete"] == false {
				if o.Reject == nil || o.Reject.Code != "E-FORMAT" {
					t.Errorf("%s #%d: incomplete envelope outcome %+v, want E-FORMAT rejection", name, i, o.Reject)
				}
				continue
			}
			if o.Reject != nil {
				t.Errorf("%s #%d: rejected %v, want recorded", name, i, o.Reject)
			}
		}
	}
}
