package bench

import (
	"testing"
	"time"
)

// TestScale runs a short Scale, with the
// relays of (c) sharing groups and with groups of their own, and checks
// that every setup did work without errors, with the relays and ratios it
// should have. It checks no figures: they depend on the machine.
func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four NATS servers and five relays")
	}
	for _, groups := range []string{"shared", "disjoint"} {
		t.Run(groups, func(t *testing.T) { testBenchScale(t, groups) })
	}
}

func testBenchScale(t *testing.T, groups string) {
	// A request counts only when it starts after its slice's warm-up
	// (the first tenth) and ends within the slice (a quarter of the
	// duration), so a client needs a slice of more than about two
	// request latencies to count one. JetStream with sync always under
	// -race on a loaded 2-CPU machine took 100-240 ms a request (p99),
	// so 400ms (100 ms slices) counted nothing now and then; 4s gives
	// 1 s slices, room for twice that.
	res, err := Scale(t.Context(), ScaleOptions{Clients: 6, Duration: 4 * time.Second, SyncAlways: true, Disjoint: groups == "disjoint"})
	if err != nil {
		t.Fatalf("Scale() = %v", err)
	}
	want := []struct {
		key    string
		relays int
		js     bool
	}{{"sqlite", 1, false}, {"js-1", 1, true}, {"js-3x3", 3, true}}
	if len(res.Setups) != len(want) {
		t.Fatalf("Scale() setups = %d, want %d", len(res.Setups), len(want))
	}
	for i, s := range res.Setups {
		w := want[i]
		if s.Key != w.key || s.Relays != w.relays {
			t.Errorf("setup %d = %s with %d relays, want %s with %d", i, s.Key, s.Relays, w.key, w.relays)
		}
		if s.Count == 0 || s.Errors != 0 || s.PerSec <= 0 || s.Ratio <= 0 || s.CPUms <= 0 || s.P99ms < s.P50ms {
			t.Errorf("%s = %d done, %d errors, %.0f/s, ratio %.2f, %.3f CPU ms, p50 %.2f p99 %.2f; want work, no errors, ratio, CPU and p99 ≥ p50",
				s.Key, s.Count, s.Errors, s.PerSec, s.Ratio, s.CPUms, s.P50ms, s.P99ms)
		}
		if wantPer := map[bool]int{true: s.Relays, false: 0}[s.Relays > 1]; len(s.PerRelay) != wantPer {
			t.Errorf("%s per-relay figures = %d, want %d", s.Key, len(s.PerRelay), wantPer)
		}
		if w.js != (s.PerBatch > 0) {
			t.Errorf("%s records per batch = %.1f, want > 0 exactly for JetStream", s.Key, s.PerBatch)
		}
	}
	if r := res.Setups[0].Ratio; r != 1 {
		t.Errorf("sqlite ratio vs itself = %v, want 1", r)
	}
	if !res.SyncAlways || res.Clients != 6 || res.Machine.NumCPU == 0 || res.Disjoint != (groups == "disjoint") {
		t.Errorf("result = %+v, want sync always, 6 clients, the machine, disjoint %v", res, groups == "disjoint")
	}
	// Relays that write to groups of their own never race for a seq.
	if c := res.Setups[2].Conflicts; groups == "disjoint" && c != 0 {
		t.Errorf("js-3x3 with disjoint groups: conflicts = %d, want 0", c)
	}
}
