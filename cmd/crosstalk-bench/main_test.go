package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

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
