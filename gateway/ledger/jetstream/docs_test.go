package jetstream_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestScalingDocConfig parses the nats-server configuration shown in
// docs/scaling.md with nats-server's own parser, so the documented
// configuration stays valid.
func TestScalingDocConfig(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "scaling.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```\n# /etc/nats/crosstalk.conf")
	if !ok {
		t.Fatal("docs/scaling.md: no ``` block starting with # /etc/nats/crosstalk.conf")
	}
	conf, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/scaling.md: configuration block not closed")
	}
	path := filepath.Join(t.TempDir(), "crosstalk.conf")
	if err := os.WriteFile(path, []byte("#"+conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RELAY_PASSWORD", "relay-secret")
	t.Setenv("ADMIN_PASSWORD", "admin-secret")
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("ProcessConfigFile(docs/scaling.md config) error = %v", err)
	}
	if !opts.JetStream || !opts.SyncAlways || opts.MaxPayload != 8<<20 || opts.Cluster.Name != "crosstalk" || len(opts.Routes) != 3 {
		t.Errorf("docs/scaling.md config = jetstream %v, sync always %v, max_payload %d, cluster %q with %d routes; want true, true, 8MB, crosstalk, 3",
			opts.JetStream, opts.SyncAlways, opts.MaxPayload, opts.Cluster.Name, len(opts.Routes))
	}
}
