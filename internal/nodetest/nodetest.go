// Package nodetest finds Node.js for tests that drive the relay with a
// client written in JavaScript (the MCP and A2A SDKs' clients), installing
// the client's locked npm packages when they are missing.
//
// A test that needs Node.js must run in CI: under CI=true a missing node or
// npm fails the test (scripts/deps.sh installs them); elsewhere it skips.
// It does not download anything but the packages of dir's lock file.
package nodetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Node returns the node executable for the npm project in dir, after
// `npm ci` there when dir/node_modules/<module>/package.json is missing.
func Node(t testing.TB, dir, module string) string {
	t.Helper()
	missing := func(what string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed: this test must run in CI (scripts/deps.sh installs Node.js and npm)", what)
		}
		t.Skipf("%s is not installed", what)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(module), "package.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			missing("npm")
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s = %v\n%s", dir, err, out)
		}
	}
	return node
}
