//go:build unix

package main

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRelayPortInUse: `crosstalk relay --listen ADDR` on an address
// another program holds says what to do, not only the bind error.
func TestRelayPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "relay.toml")
	if err := os.WriteFile(cfg, []byte("trust_file = \""+filepath.Join(dir, "known_keys")+"\"\n[folder]\ndisabled = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI(t, "", "relay", "--config", cfg, "--data", dir, "--listen", ln.Addr().String())
	if code != exitFailure || !strings.Contains(stderr, "address already in use") || !strings.Contains(stderr, "hint: ") || !strings.Contains(stderr, "--listen") {
		t.Errorf("relay on a port in use: exit %d, stderr %q; want %d, the bind error and a hint naming --listen", code, stderr, exitFailure)
	}
}

// TestRelayTryLineNamesItsURL: the relay's first log lines tell a
// newcomer what to run; on an address other than the commands' default
// (127.0.0.1:7777) they must say how to reach this relay, or the
// commands shown go to another relay or none.
func TestRelayTryLineNamesItsURL(t *testing.T) {
	var logs bytes.Buffer
	cfg := DefaultConfig()
	dir := t.TempDir()
	cfg.DataDir, cfg.Listen, cfg.TrustFile = dir, "127.0.0.1:0", filepath.Join(dir, "known_keys")
	cfg.Folder.Disabled = true
	r, err := startRelay(t.Context(), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.shutdown()
	if !strings.Contains(logs.String(), "CROSSTALK_RELAY="+r.url) {
		t.Errorf("relay on %s logged %q; want a try line with CROSSTALK_RELAY=%s", r.url, logs.String(), r.url)
	}
}
