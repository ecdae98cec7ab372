package main

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/internal/natstest"
)

// TestBackendDataUsesRelayConfig opens the --data backend of `crosstalk
// mcp` and `crosstalk harness` with a relay config whose ledger is a
// JetStream one and which requires signatures: an unsigned envelope is
// refused as `crosstalk relay` refuses it, and a signed-off (accepted)
// one lands in the JetStream stream, not in a SQLite file in DIR.
func TestBackendDataUsesRelayConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	node := natstest.Single(t, false)
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		require bool
	}{{"require_signatures", true}, {"open", false}} {
		t.Run(tc.name, func(t *testing.T) {
			stream := "MCP" + map[bool]string{true: "REQ", false: "OPEN"}[tc.require]
			cfgFile := filepath.Join(t.TempDir(), "relay.toml")
			conf := "ledger = \"" + node.URL + "\"\nledger_stream = \"" + stream + "\"\nrequire_signatures = " + map[bool]string{true: "true", false: "false"}[tc.require] + "\n" +
				"[[agents]]\nid = \"claude\"\nnames = [\"CLAUDE\"]\n[[agents]]\nid = \"chatgpt\"\nnames = [\"CHATGPT\"]\n"
			if err := os.WriteFile(cfgFile, []byte(conf), 0o600); err != nil {
				t.Fatal(err)
			}
			fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
			bf := addBackendFlags(fs)
			if err := fs.Parse([]string{"--data", dir, "--config", cfgFile}); err != nil {
				t.Fatal(err)
			}
			backend, release, err := bf.open(t.Context(), slog.New(slog.NewTextHandler(io.Discard, nil)), "mcp")
			if err != nil {
				t.Fatalf("open(--data, --config) = %v", err)
			}
			defer release()
			text, err := envelope.Marshal(envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "unsigned"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := backend.Ingest(t.Context(), "claude", text, "")
			var rj *gateway.Rejection
			if tc.require {
				if !errors.As(err, &rj) {
					t.Fatalf("Ingest(unsigned) with require_signatures = %+v, %v; want a *gateway.Rejection", res, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Ingest(unsigned) = %v", err)
			}
			js, err := jetstream.Open(t.Context(), node.URL, &jetstream.Options{Stream: stream})
			if err != nil {
				t.Fatal(err)
			}
			defer js.Close()
			if ev, err := js.Get(t.Context(), res.EventID); err != nil || ev.ID != res.EventID {
				t.Errorf("JetStream Get(%s) = %+v, %v; want the event the backend recorded", res.EventID, ev, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "ledger.db")); err == nil {
				t.Errorf("%s/ledger.db exists: the backend opened SQLite, not the configured JetStream ledger", dir)
			}
		})
	}
}
