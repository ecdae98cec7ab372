package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchIngest runs a short `crosstalk bench ingest --json` and checks
// that every measurement did work without errors. It checks no figures:
// they depend on the machine.
func TestBenchIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three short load measurements")
	}
	var stdout, stderr bytes.Buffer
	// A request counts only when it starts after its slice's warm-up and
	// ends within the slice (a quarter of --duration): 300ms left 75 ms
	// slices, too short for a counted request when a loaded machine
	// stalls the relay; 1s gives 250 ms slices.
	args := []string{"bench", "ingest", "--clients", "4", "--duration", "1s", "--json"}
	if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("run(%q) = %d, want %d; stderr:\n%s", args, code, exitOK, stderr.String())
	}
	var res benchResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("run(%q) printed %q: %v", args, stdout.String(), err)
	}
	for _, p := range []benchPhase{res.Ceiling, res.Relay, res.Single} {
		if p.Count == 0 || p.Errors != 0 || p.PerSec <= 0 {
			t.Errorf("%s = %d done, %d errors, %.0f/s; want work and no errors", p.Name, p.Count, p.Errors, p.PerSec)
		}
	}
	if res.Relay.P99ms < res.Relay.P50ms || res.RelayCommits == 0 || res.CeilingRatio <= 0 || res.FsyncRatio <= 0 {
		t.Errorf("result = %+v, want p99 ≥ p50, commits and ratios", res)
	}
	if res.Machine.NumCPU == 0 || res.Machine.Go == "" {
		t.Errorf("machine = %+v, want nproc and go version", res.Machine)
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench"},
		{"bench", "egest"},
		{"bench", "ingest", "--clients", "0"},
		{"bench", "ingest", "--duration", "1ms"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr); code != exitUsage {
			t.Errorf("run(%q) = %d, want %d (usage)", args, code, exitUsage)
		}
	}
}
