package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestReserveCommands runs reserve, release and reservations against the
// relay as `crosstalk relay` assembles it: exit 0 when granted, exit 1
// with holder, scope and class per conflict, --json everywhere.
func TestReserveCommands(t *testing.T) {
	r := testrelay.Start(t, nil)
	out, errs, code := runCLI(t, "", "reserve", "--relay", r.URL, "--agent", "claude", "--ttl", "10m", "--reason", "auth rewrite", "src/auth/*", "./docs//api.md")
	if code != exitOK || !strings.Contains(out, "src/auth/*") || !strings.Contains(out, "docs/api.md") {
		t.Fatalf("reserve = %d %q %q", code, out, errs)
	}
	out, _, code = runCLI(t, "", "reserve", "--relay", r.URL, "--agent", "chatgpt", "src/auth/login.go", "docs/api.md")
	if code != exitFailure || !strings.Contains(out, "refused src/auth/login.go: held by claude as src/auth/* (partial") ||
		!strings.Contains(out, "refused docs/api.md: held by claude as docs/api.md (exact") {
		t.Fatalf("overlapping reserve = %d %q", code, out)
	}
	out, _, code = runCLI(t, "", "reserve", "--relay", r.URL, "--agent", "chatgpt", "--json", "src/auth")
	var ans api.ReserveAnswer
	if code != exitFailure || json.Unmarshal([]byte(out), &ans) != nil || ans.Granted || len(ans.Conflicts) != 1 || ans.Conflicts[0].Holder != "claude" {
		t.Fatalf("reserve --json = %d %q", code, out)
	}
	out, _, code = runCLI(t, "", "reservations", "--relay", r.URL, "--path", "src/auth/login.go")
	if code != exitOK || !strings.Contains(out, "claude") || !strings.Contains(out, "auth rewrite") || strings.Contains(out, "docs/api.md") {
		t.Fatalf("reservations --path = %d %q", code, out)
	}
	if _, errs, code = runCLI(t, "", "reserve", "--relay", r.URL, "--agent", "chatgpt", "../outside"); code != exitUsage || !strings.Contains(errs, "escapes the repository root") {
		t.Fatalf("reserve ../outside = %d %q", code, errs)
	}
	if out, _, code = runCLI(t, "", "release", "--relay", r.URL, "--agent", "claude", "--json", "src/auth/*"); code != exitOK || !strings.Contains(out, `"released"`) {
		t.Fatalf("release = %d %q", code, out)
	}
	if _, _, code = runCLI(t, "", "release", "--relay", r.URL, "--agent", "claude", "src/auth/*"); code != exitFailure {
		t.Fatalf("second release = %d, want 1", code)
	}
	out, _, code = runCLI(t, "", "reservations", "--relay", r.URL, "--json")
	var list struct{ Reservations []any }
	if code != exitOK || json.Unmarshal([]byte(out), &list) != nil || len(list.Reservations) != 1 {
		t.Fatalf("reservations --json = %d %q", code, out)
	}
	if _, _, code = runCLI(t, "", "reserve", "--relay", r.URL, "src"); code != exitUsage {
		t.Fatalf("reserve without --agent = %d", code)
	}
}

// TestReservationsSurviveRestart reserves on a relay, stops it, starts a
// new one on the same data directory: the reservation is still held and
// still refuses an overlap.
func TestReservationsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	r := startTestRelay(t, dir, nil)
	if out, errs, code := runCLI(t, "", "reserve", "--relay", r.url, "--agent", "claude", "src/*"); code != exitOK {
		t.Fatalf("reserve = %d %q %q", code, out, errs)
	}
	if err := r.shutdown(); err != nil {
		t.Fatal(err)
	}
	r = startTestRelay(t, dir, nil)
	defer r.shutdown()
	out, _, code := runCLI(t, "", "reservations", "--relay", r.url, "--path", "src/main.go")
	if code != exitOK || !strings.Contains(out, "claude") {
		t.Fatalf("after restart: reservations = %d %q", code, out)
	}
	if out, _, code = runCLI(t, "", "reserve", "--relay", r.url, "--agent", "chatgpt", "src/main.go"); code != exitFailure || !strings.Contains(out, "held by claude") {
		t.Fatalf("after restart: overlapping reserve = %d %q", code, out)
	}
}

// TestReserveRenewKeepsLonger: a plain `crosstalk reserve` of a scope the
// agent holds for longer than the 30-minute default renews it without
// shortening it (docs/agents.md "Rules"); an explicit --ttl sets it.
func TestReserveRenewKeepsLonger(t *testing.T) {
	r := testrelay.Start(t, nil)
	reserve := func(args ...string) api.ReserveAnswer {
		t.Helper()
		out, errs, code := runCLI(t, "", append([]string{"reserve", "--relay", r.URL, "--agent", "claude", "--json"}, args...)...)
		var ans api.ReserveAnswer
		if code != exitOK || json.Unmarshal([]byte(out), &ans) != nil || len(ans.Reservations) != 1 {
			t.Fatalf("reserve %v = %d %q %q", args, code, out, errs)
		}
		return ans
	}
	long := reserve("--ttl", "24h", "src").Reservations[0]
	renewed := reserve("src").Reservations[0]
	if renewed.ID != long.ID || !renewed.ExpiresAt.Equal(long.ExpiresAt) {
		t.Fatalf("plain renewal of a 24h reservation = %+v, want %+v kept", renewed, long)
	}
	short := reserve("--ttl", "10m", "src").Reservations[0]
	if !short.ExpiresAt.Before(long.ExpiresAt) {
		t.Fatalf("renewal with --ttl 10m = %+v, want it shortened", short)
	}
}
