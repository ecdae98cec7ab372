package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// asMain makes this test binary run as crosstalk-bench itself, so that
// ingest can start it again as its load process.
const asMain = "CROSSTALK_BENCH_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestIngestLoadWorker runs a short ingest the way the command does by
// default, its clients in this program started again as the hidden
// load-worker command, and checks the JSON says so and shows work done.
func TestIngestLoadWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short load measurement")
	}
	t.Setenv(asMain, "1")
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"ingest", "--runs", "1", "--clients", "4", "--duration", "1s", "--json"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("ingest = exit %d, stderr %q", code, stderr.String())
	}
	var res struct {
		InProcess bool `json:"clients_in_process"`
		Relay     struct {
			Count  int64 `json:"count"`
			Errors int64 `json:"errors"`
		} `json:"relay"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("ingest --json printed %q: %v", stdout.String(), err)
	}
	if res.InProcess || res.Relay.Count == 0 || res.Relay.Errors != 0 {
		t.Errorf("ingest --json = %s; want clients in a load process, relay envelopes and no errors", stdout.String())
	}
}

// TestUsage checks the exit codes of command lines that measure nothing;
// internal/bench's tests run the measurements.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout
	}{
		{nil, exitUsage, ""},
		{[]string{"egest"}, exitUsage, ""},
		{[]string{"ingest", "--clients", "0"}, exitUsage, ""},
		{[]string{"ingest", "--duration", "1ms"}, exitUsage, ""},
		{[]string{"ingest", "--runs", "0"}, exitUsage, ""},
		{[]string{"ingest", "--streams", "-1"}, exitUsage, ""},
		{[]string{"ingest", "--streams", "257"}, exitUsage, ""},
		{[]string{"ingest", "extra"}, exitUsage, ""},
		{[]string{"ingest", "--bogus"}, exitUsage, ""},
		{[]string{"scale", "--clients", "2"}, exitUsage, ""},
		{[]string{"scale", "--duration", "1ms"}, exitUsage, ""},
		{[]string{"scale", "--sync", "sometimes"}, exitUsage, ""},
		{[]string{"scale", "extra"}, exitUsage, ""},
		{[]string{"scale", "--groups", "some"}, exitUsage, ""},
		{[]string{"help"}, exitOK, "crosstalk-bench ingest --help"},
		{[]string{"ingest", "--help"}, exitOK, "usage: crosstalk-bench ingest"},
		{[]string{"scale", "--help"}, exitOK, "usage: crosstalk-bench scale"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stdout.String(), tc.out) {
			t.Errorf("run(%q) = %d, stdout %q; want %d and %q in stdout", tc.args, code, stdout.String(), tc.code, tc.out)
		}
		if tc.code == exitUsage && stdout.Len() > 0 {
			t.Errorf("run(%q) printed %q to stdout, want nothing", tc.args, stdout.String())
		}
	}
}
