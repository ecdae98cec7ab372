package liveness_test

import (
	"context"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/liveness"
)

// FuzzFold folds arbitrary liveness event data (written by hand, another
// version, an attacker with ledger access): no panic, and a malformed
// event changes nothing while the events around it still count.
func FuzzFold(f *testing.F) {
	for _, s := range []string{
		`{"agent":"claude","state":"active","seen_at":"2026-01-13T10:00:00.000Z","at":"2026-01-13T10:00:00.000Z"}`,
		`{"agent":"claude","state":"stale","seen_at":"2026-01-13T10:00:00.000Z","at":"2026-01-13T10:15:00.000Z"}`,
		`{"agent":"Claude","state":"evicted","seen_at":"x","at":""}`,
		`{"agent":"claude","state":"asleep","seen_at":"2026-01-13T10:00:00.000Z","at":"2026-01-13T10:00:00.000Z"}`,
		`[]`, `{}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		store := memory.New(nil)
		ctx := context.Background()
		if _, err := ledger.NormalizeData([]byte(data)); err != nil {
			return
		}
		ok := `{"agent":"bob","state":"active","seen_at":"2026-01-13T10:00:00.000Z","at":"2026-01-13T10:00:00.000Z"}`
		var recs []ledger.Record
		for _, d := range []string{ok, data} {
			recs = append(recs, ledger.Record{Kind: ledger.KindLiveness, GroupID: liveness.DefaultGroup, Data: []byte(d)})
		}
		if _, err := store.Append(ctx, recs); err != nil {
			return
		}
		tr := liveness.New(store, liveness.Options{})
		if err := tr.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if st := tr.Status("bob"); st.LastSeen.IsZero() {
			t.Fatalf("bob's event lost after %q", data)
		}
		tr.All()
	})
}
