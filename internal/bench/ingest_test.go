package bench

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestIngest runs a short Ingest and checks
// that every measurement did work without errors. It checks no figures:
// they depend on the machine.
func TestIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three short load measurements")
	}
	// A request counts only when it starts after its slice's warm-up and
	// ends within the slice (a quarter of the duration): 300ms left 75 ms
	// slices, too short for a counted request when a loaded machine
	// stalls the relay; 1s gives 250 ms slices.
	res, err := Ingest(t.Context(), IngestOptions{Clients: 4, Duration: time.Second})
	if err != nil {
		t.Fatalf("Ingest() = %v", err)
	}
	for _, p := range []Phase{res.Ceiling, res.Relay, res.Single, res.Raw} {
		if p.Count == 0 || p.Errors != 0 || p.PerSec <= 0 {
			t.Errorf("%s = %d done, %d errors, %.0f/s; want work and no errors", p.Name, p.Count, p.Errors, p.PerSec)
		}
	}
	if res.Relay.P99ms < res.Relay.P50ms || res.RelayCommits == 0 || res.CeilingRatio <= 0 || res.FsyncRatio <= 0 || res.RawRatio <= 0 {
		t.Errorf("result = %+v, want p99 ≥ p50, commits and ratios", res)
	}
	if runtime.GOOS == "linux" && (res.Ceiling.CPUMicros <= 0 || res.Relay.CPUMicros <= 0) {
		t.Errorf("CPU per envelope: ceiling %v µs, relay %v µs; want both measured", res.Ceiling.CPUMicros, res.Relay.CPUMicros)
	}
	if res.Machine.NumCPU == 0 || res.Machine.Go == "" {
		t.Errorf("machine = %+v, want nproc and go version", res.Machine)
	}
}

// TestIngestPrintVerdicts checks the verdicts Print gives the disk goals:
// met, missed, and missed where the goal lies above the ceiling itself
// (a disk whose fsync rate times the goal is more than the ceiling can
// do), which it must call out of reach rather than a plain miss.
func TestIngestPrintVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name          string
		relay, raw    float64
		want, wantNot string
	}{
		{"met", 9000, 5000, "relay / raw fsync     1.80  (goal ≥ 1.5: met)", "out of reach"},
		{"missed, within reach", 6000, 5000, "relay / raw fsync     1.20  (goal ≥ 1.5: MISSED)\n", "out of reach"},
		{"missed, out of reach", 5000, 8000, "relay / raw fsync     0.62  (goal ≥ 1.5: MISSED, out of reach on this machine: 12000/s needed, above the ceiling's 10000/s)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &IngestResult{
				Ceiling: Phase{Name: "ceiling", PerSec: 10000},
				Relay:   Phase{Name: "relay", PerSec: tc.relay},
				Single:  Phase{Name: "single", PerSec: tc.relay / 4},
				Raw:     Phase{Name: "raw", PerSec: tc.raw},
			}
			r.Goals.CeilingRatio, r.Goals.FsyncRatio, r.Goals.RawRatio = goalCeilingRatio, goalFsyncRatio, goalRawRatio
			r.RawRatio, r.FsyncRatio = tc.relay/tc.raw, 4
			var b strings.Builder
			r.Print(&b)
			out := b.String()
			if !strings.Contains(out, tc.want) {
				t.Errorf("Print() =\n%s\nwant a line %q", out, tc.want)
			}
			if line := out[strings.Index(out, "relay / raw fsync"):]; tc.wantNot != "" && strings.Contains(line[:strings.Index(line, "\n")], tc.wantNot) {
				t.Errorf("Print() raw line = %q, want no %q", line[:strings.Index(line, "\n")], tc.wantNot)
			}
		})
	}
}
