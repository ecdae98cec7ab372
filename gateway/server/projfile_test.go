package server_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/server"
)

// coreWith opens a core on dir and records n requests through it.
func coreWith(t *testing.T, dir string, n int) {
	t.Helper()
	c, err := server.OpenCore(t.Context(), &server.Options{DataDir: dir, DNSServer: server.DNSServerNone})
	if err != nil {
		t.Fatalf("OpenCore() = %v", err)
	}
	defer c.Close()
	for i := range n {
		b, err := envelope.Marshal(envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, fmt.Sprintf("question %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Relay.Ingest(t.Context(), gateway.Intake{Transport: "test", Data: bytes.NewReader(b)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Relay.SyncProjection(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedProjectionFile checks that a relay starts on a projection
// file SQLite cannot read (garbage, a file cut short, another ledger's),
// which is a cache that deleting is always safe for (docs/scaling.md
// "Projections"), and rebuilds it from the ledger: before, a crash that
// damaged it kept the relay from starting until someone deleted it.
func TestDamagedProjectionFile(t *testing.T) {
	other := t.TempDir()
	coreWith(t, other, 3)
	otherProj, err := os.ReadFile(server.ProjectionPath(filepath.Join(other, "ledger.db"), "", other))
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, 64<<10)
	for i := range garbage {
		garbage[i] = byte(i*7 + 3)
	}
	for _, tt := range []struct {
		name   string
		damage func(whole []byte) []byte
	}{
		{"garbage", func([]byte) []byte { return garbage }},
		{"cut short", func(whole []byte) []byte { return whole[:len(whole)/3] }},
		{"header overwritten", func(whole []byte) []byte {
			b := append([]byte(nil), whole...)
			copy(b, garbage[:100])
			return b
		}},
		{"another ledger's", func([]byte) []byte { return otherProj }},
		{"empty", func([]byte) []byte { return nil }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			coreWith(t, dir, 20)
			path := server.ProjectionPath(filepath.Join(dir, "ledger.db"), "", dir)
			whole, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(path + "-wal")
			os.Remove(path + "-shm")
			if err := os.WriteFile(path, tt.damage(whole), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := server.OpenCore(t.Context(), &server.Options{DataDir: dir, DNSServer: server.DNSServerNone})
			if err != nil {
				t.Fatalf("OpenCore() with a %s projection file = %v, want it rebuilt", tt.name, err)
			}
			defer c.Close()
			diff, err := c.Relay.CheckProjection(t.Context())
			if err != nil || len(diff) > 0 {
				t.Fatalf("CheckProjection() = %v, %v; want no difference from a rebuild", diff, err)
			}
			pos, _, err := c.Relay.ProjectionHighWater(t.Context())
			if err != nil || pos != 20 {
				t.Errorf("ProjectionHighWater() = %d, %v; want 20 (the whole ledger)", pos, err)
			}
		})
	}
}
