package gateway_test

import (
	"fmt"
	"maps"
	"path/filepath"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/ledgertest"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/gateway/metrics"
)

// TestDeliveryCursorsInOneCall checks that AgentResume,
// Relay.DeliveryCursors and c2a.Local.Cursors give what DeliveryCursor
// of each group Relay.Groups lists gives — no bookkeeping group, no
// group of another actor or of the read cursors, a name in other case
// the same agent — on memory and SQLite, and that through the metrics
// wrapper and the relay's own they read with one CursorsOf call instead
// of a GetCursor per group, or per group when the store has no CursorsOf.
func TestDeliveryCursorsInOneCall(t *testing.T) {
	const groups = 120
	stores := map[string]func(t *testing.T) ledger.Store{
		"memory": func(t *testing.T) ledger.Store {
			st := memory.New(nil)
			t.Cleanup(func() { st.Close() })
			return st
		},
		"sqlite": func(t *testing.T) ledger.Store {
			st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
	for name, open := range stores {
		for _, listing := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/CursorsOf=%v", name, listing), func(t *testing.T) {
				ctx := t.Context()
				st := open(t)
				ids := []string{"X.Crosstalk.agents", "x.crosstalk.other"} // bookkeeping groups
				for i := range groups {
					ids = append(ids, fmt.Sprintf("room-%03d", i))
				}
				for i, g := range ids {
					res, err := st.Append(ctx, []ledger.Record{{Kind: gateway.KindMessage, GroupID: g, By: "user", Data: []byte(`{}`)}})
					if err != nil {
						t.Fatal(err)
					}
					for _, c := range []struct {
						actor string
						in    bool
					}{
						{gateway.DeliveredActor("claude"), i%2 == 0},
						{gateway.DeliveredActor("gemini"), i%5 == 0},
						{"claude", i%3 == 0},                       // read cursors, not delivery ones
						{gateway.DeliveredActor("Claude"), i == 3}, // never written by a relay: ids are lower case
					} {
						if c.in {
							if _, err := st.SetCursor(ctx, g, c.actor, res[0].Event.ID); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
				counter := &ledgertest.CursorCounter{Store: st}
				var wrapped ledger.Store = counter
				if listing {
					wrapped = ledgertest.ListingCursors{CursorCounter: counter}
				}
				r := gateway.New(metrics.New(nil).Store(wrapped), &gateway.Options{Book: testBook(t)})
				for _, agent := range []string{"claude", "CLAUDE", "gemini", "nobody"} {
					gs, err := r.Groups(ctx)
					if err != nil {
						t.Fatal(err)
					}
					want := map[string]int64{}
					for _, g := range gs {
						if c, err := r.DeliveryCursor(ctx, g.ID, agent); err == nil {
							want[g.ID] = c.Seq
						}
					}
					wantGets, wantLists := 0, 1
					if !listing {
						wantGets, wantLists = len(gs), 0
					}
					for _, read := range []struct {
						name string
						f    func() (map[string]int64, error)
					}{
						{"AgentResume", func() (map[string]int64, error) { cs, _, err := r.AgentResume(ctx, agent); return cs, err }},
						{"DeliveryCursors", func() (map[string]int64, error) { return r.DeliveryCursors(ctx, agent, gs) }},
						{"Local.Cursors", func() (map[string]int64, error) { return (&c2a.Local{Relay: r}).Cursors(ctx, agent) }},
					} {
						counter.Gets, counter.Lists = 0, 0
						got, err := read.f()
						if err != nil || !maps.Equal(got, want) {
							t.Errorf("%s(%s) = %v, %v; want DeliveryCursor's %v", read.name, agent, got, err, want)
						}
						if counter.Gets != wantGets || counter.Lists != wantLists {
							t.Errorf("%s(%s) made %d GetCursor and %d CursorsOf calls, want %d and %d", read.name, agent, counter.Gets, counter.Lists, wantGets, wantLists)
						}
					}
				}
			})
		}
	}
}
