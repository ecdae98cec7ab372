package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestConfigLiveness: [liveness] stale_after defaults to 15m, is read from
// a file and reaches the relay's options; out-of-range values are named.
func TestConfigLiveness(t *testing.T) {
	if got := time.Duration(DefaultConfig().Liveness.StaleAfter); got != 15*time.Minute {
		t.Errorf("default stale_after = %v", got)
	}
	c, err := decodeConfig("test.toml", []byte("[liveness]\nstale_after = \"2m\"\n"))
	if err != nil || c.Validate() != nil {
		t.Fatalf("decodeConfig = %v; Validate = %v", err, c.Validate())
	}
	o, err := c.serverOptions(nil)
	if err != nil || o.StaleAfter != 2*time.Minute {
		t.Fatalf("server options stale after %v, %v", o.StaleAfter, err)
	}
	for _, bad := range []string{"500ms", "169h", "0s", "-1s"} {
		c, err := decodeConfig("test.toml", []byte("[liveness]\nstale_after = \""+bad+"\"\n"))
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "liveness.stale_after") {
			t.Errorf("stale_after = %s: %v, want it named", bad, err)
		}
	}
}

// TestHeartbeatCommand: `crosstalk heartbeat` records and prints the
// agent's liveness; --json is BeadBoard §4.2's envelope, also on failure.
func TestHeartbeatCommand(t *testing.T) {
	r := testrelay.Start(t, nil)
	out, errs, code := runCLI(t, "", "heartbeat", "--relay", r.URL, "--agent", "claude")
	if code != exitOK || !strings.HasPrefix(out, "claude active") {
		t.Fatalf("heartbeat = %d %q %q", code, out, errs)
	}
	out, _, code = runCLI(t, "", "heartbeat", "--relay", r.URL, "--agent", "claude", "--json")
	var ans struct {
		OK      bool   `json:"ok"`
		Command string `json:"command"`
		Data    struct {
			Agent    string             `json:"agent"`
			Liveness attention.Liveness `json:"liveness"`
			LastSeen time.Time          `json:"last_seen"`
		} `json:"data"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &ans); err != nil || code != exitOK || !ans.OK || ans.Command != "heartbeat" ||
		ans.Data.Agent != "claude" || ans.Data.Liveness != attention.Active || ans.Data.LastSeen.IsZero() {
		t.Fatalf("heartbeat --json = %d %q (%v)", code, out, err)
	}
	// The relay recorded one transition for the two beats.
	evs, err := r.Store.Range(context.Background(), "x.crosstalk.liveness", 0, nil, 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("liveness events = %d, %v; want 1", len(evs), err)
	}
	out, _, code = runCLI(t, "", "heartbeat", "--relay", "http://127.0.0.1:1", "--agent", "claude", "--json")
	if err := json.Unmarshal([]byte(out), &ans); err != nil || code != exitFailure || ans.OK || ans.Error == "" {
		t.Fatalf("heartbeat --json to no relay = %d %q", code, out)
	}
	if _, _, code = runCLI(t, "", "heartbeat", "--relay", r.URL); code != exitUsage {
		t.Fatalf("heartbeat without --agent = %d, want usage", code)
	}
}

// TestConfigTrustedProxies: trusted_proxies takes addresses and CIDR
// prefixes and reaches the relay's options as prefixes; anything else is
// named.
func TestConfigTrustedProxies(t *testing.T) {
	c, err := decodeConfig("test.toml", []byte("trusted_proxies = [\"127.0.0.1\", \"10.1.2.3/8\", \"::1\", \"::ffff:192.0.2.1\"]\n"))
	if err != nil || c.Validate() != nil {
		t.Fatalf("decodeConfig = %v; Validate = %v", err, c.Validate())
	}
	o, err := c.serverOptions(nil)
	if err != nil || fmt.Sprint(o.TrustedProxies) != "[127.0.0.1/32 10.0.0.0/8 ::1/128 192.0.2.1/32]" {
		t.Fatalf("server options trusted proxies %v, %v", o.TrustedProxies, err)
	}
	for _, bad := range []string{"proxy.example", "10.0.0.0/33", "fe80::1%eth0", ""} {
		c, err := decodeConfig("test.toml", []byte("trusted_proxies = [\""+bad+"\"]\n"))
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "trusted_proxies") {
			t.Errorf("trusted_proxies = %q: %v, want it named", bad, err)
		}
	}
}
