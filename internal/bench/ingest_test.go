package bench

import (
	"runtime"
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
