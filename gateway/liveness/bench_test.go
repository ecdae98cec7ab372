package liveness_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/gateway/liveness"
)

// BenchmarkBeat compares a heartbeat through a Tracker (a transition
// recorded once, then memory only) with appending every beat to the
// SQLite ledger, the design it replaces; compare the two in one run.
func BenchmarkBeat(b *testing.B) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "ledger.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	b.Run("tracker", func(b *testing.B) {
		tr := liveness.New(store, liveness.Options{})
		for b.Loop() {
			if _, err := tr.Beat(ctx, "claude"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append-every-beat", func(b *testing.B) {
		rec := []ledger.Record{{Kind: ledger.KindLiveness, GroupID: "bench", Data: []byte(`{"agent":"claude"}`)}}
		for b.Loop() {
			if _, err := store.Append(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
