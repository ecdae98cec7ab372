package bench

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestIngest runs two short Ingests in a row (IngestRuns) and checks that
// every measurement of each did work without errors and that the medians
// lie between the runs. It checks no figures: they depend on the machine.
func TestIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three short load measurements")
	}
	// A request counts only when it starts after its slice's warm-up and
	// ends within the slice (a quarter of the duration): 300ms left 75 ms
	// slices, too short for a counted request when a loaded machine
	// stalls the relay; 1s gives 250 ms slices.
	series, err := IngestRuns(t.Context(), IngestOptions{Clients: 4, Duration: time.Second}, 2)
	if err != nil {
		t.Fatalf("IngestRuns() = %v", err)
	}
	if len(series.Runs) != 2 {
		t.Fatalf("IngestRuns(2) made %d runs", len(series.Runs))
	}
	a, b := series.Runs[0].CeilingRatio, series.Runs[1].CeilingRatio
	if m := series.Median.CeilingRatio; m != max(a, b) {
		t.Errorf("median relay/ceiling of %v and %v = %v, want the upper one", a, b, m)
	}
	for _, res := range series.Runs {
		checkIngest(t, res)
	}
	if _, err := IngestRuns(t.Context(), IngestOptions{Clients: 4, Duration: time.Second}, 0); err == nil {
		t.Error("IngestRuns(0) = nil error, want one")
	}
}

// checkIngest checks that every measurement of res did work, without
// errors.
func checkIngest(t *testing.T, res *IngestResult) {
	t.Helper()
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
	if runtime.GOOS == "linux" && (res.Relay.HostBusyPct <= 0 || res.Relay.HostBusyPct > 100 || res.Relay.HostStealPct < 0) {
		t.Errorf("relay host busy %v %%, steal %v %%; want a share of the machine", res.Relay.HostBusyPct, res.Relay.HostStealPct)
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

// TestIngestSeriesMedians checks that a series' medians are taken figure by
// figure (the middle run of each, not one run's figures), that its verdicts
// are on the medians, and that every run gets a row.
func TestIngestSeriesMedians(t *testing.T) {
	run := func(ceiling, relay, p99, steal float64) *IngestResult {
		r := &IngestResult{
			Ceiling: Phase{Name: "ceiling", PerSec: ceiling},
			Relay:   Phase{Name: "relay", PerSec: relay, P99ms: p99, HostStealPct: steal},
			Raw:     Phase{Name: "raw", PerSec: 4000},
			Single:  Phase{Name: "single", PerSec: 2000},
		}
		r.Goals.CeilingRatio, r.Goals.FsyncRatio, r.Goals.RawRatio, r.Goals.P99Millis = goalCeilingRatio, goalFsyncRatio, goalRawRatio, 25
		r.CeilingRatio, r.RawRatio, r.FsyncRatio = relay/ceiling, relay/4000, relay/2000
		return r
	}
	runs := []*IngestResult{run(10000, 4000, 40, 9), run(8000, 5000, 20, 1), run(12000, 6600, 30, 2)}
	runs[1].Relay.Errors = 2 // one run's errors: the median would hide them
	s := &IngestSeries{Runs: runs, Median: medianResult(runs)}
	m := s.Median
	if m.Relay.Errors != 2 {
		t.Errorf("median relay errors = %d, want the runs' sum, 2", m.Relay.Errors)
	}
	// The ratios are 0.40, 0.625 and 0.55: their median, not the ratio of
	// the median rates (5000 / 10000 = 0.50).
	if m.CeilingRatio != 0.55 || m.Ceiling.PerSec != 10000 || m.Relay.PerSec != 5000 || m.Relay.P99ms != 30 || m.Relay.HostStealPct != 2 {
		t.Errorf("medians = ratio %v, ceiling %v/s, relay %v/s, p99 %v, steal %v; want 0.55, 10000, 5000, 30, 2",
			m.CeilingRatio, m.Ceiling.PerSec, m.Relay.PerSec, m.Relay.P99ms, m.Relay.HostStealPct)
	}
	var b strings.Builder
	s.Print(&b)
	out := b.String()
	for _, want := range []string{"3 runs in a row", "\n       1 ", "\n       3 ", "\n  median ", "relay / ceiling       0.55  (goal ≥ 0.5: met)", "relay p99             30.00 ms  (goal ≤ 25 ms: MISSED)"} {
		if !strings.Contains(out, want) {
			t.Errorf("Print() =\n%s\nwant %q in it", out, want)
		}
	}
}

// TestIngestMemory checks that --memory measures a relay that writes no
// SQLite ledger, and that its printout says its ratios are bounds, not
// verdicts.
func TestIngestMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short load measurement")
	}
	res, err := Ingest(t.Context(), IngestOptions{Clients: 4, Duration: time.Second, Memory: true})
	if err != nil {
		t.Fatalf("Ingest(Memory) = %v", err)
	}
	if !res.Memory || res.Relay.Count == 0 || res.Relay.Errors != 0 {
		t.Fatalf("Ingest(Memory): memory %v, relay %d done, %d errors; want a relay that worked in memory", res.Memory, res.Relay.Count, res.Relay.Errors)
	}
	if res.RelayCommits != 0 {
		t.Errorf("Ingest(Memory): %d SQLite commits, want none", res.RelayCommits)
	}
	var out strings.Builder
	res.Print(&out)
	for _, want := range []string{"ledger in memory", "not verdicts on it"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Print() lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "group commit") {
		t.Errorf("Print() reports a group commit of a relay without one:\n%s", out.String())
	}
}
