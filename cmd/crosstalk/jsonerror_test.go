package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestJSONErrors: a command run with --json that fails before printing an
// answer prints {"ok":false,"error":{code,message}} on stdout, as well as
// the usual text on stderr; one that printed its own JSON answer does not
// print a second object.
func TestJSONErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantExit int
		wantCode string // "" when stdout must hold no error object
	}{
		{"usage", []string{"reserve", "--json", "--agent", "a", "--ttl", "0s", "src/x"}, exitUsage, "usage"},
		{"relay unreachable", []string{"reservations", "--json", "--relay", "http://127.0.0.1:1"}, exitFailure, "failed"},
		{"handoff missing fields", []string{"handoff", "--json", "--agent", "a"}, exitUsage, "usage"},
		{"no --json: text only", []string{"reservations", "--relay", "http://127.0.0.1:1"}, exitFailure, ""},
		{"--json after --", []string{"reserve", "--agent", "a", "--ttl", "0s", "--", "--json"}, exitUsage, ""},
		{"heartbeat prints its own answer", []string{"heartbeat", "--json", "--agent", "a", "--relay", "http://127.0.0.1:1"}, exitFailure, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tt.args, strings.NewReader(""), &stdout, &stderr); code != tt.wantExit {
				t.Fatalf("exit %d, want %d; stderr %s", code, tt.wantExit, stderr.String())
			}
			if !strings.Contains(stderr.String(), "crosstalk: error:") && tt.name != "heartbeat prints its own answer" {
				t.Errorf("stderr = %q, want the error text", stderr.String())
			}
			var got commandError
			err := json.Unmarshal(stdout.Bytes(), &got)
			switch {
			case tt.wantCode == "" && err == nil && got.Error.Code != "":
				t.Errorf("stdout = %s, want no error object", stdout.String())
			case tt.wantCode != "" && (err != nil || got.OK || got.Error.Code != tt.wantCode || got.Error.Message == ""):
				t.Errorf("stdout = %q (%v), want ok false and error code %q with a message", stdout.String(), err, tt.wantCode)
			}
		})
	}
}
