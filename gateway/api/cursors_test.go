package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TestCursorsEndpointPerGroup checks that GET /v1/agents/{agent}/cursors
// answers what the read and delivery cursor of each listed group give:
// many groups, none of a bookkeeping group, none of another actor, the
// agent's name in any case.
func TestCursorsEndpointPerGroup(t *testing.T) {
	h := newHarness(t, nil, func(s *api.Server, _ ledger.Store) { s.MountAgents(nil) })
	ctx := t.Context()
	ids := []string{"x.crosstalk.agents"}
	for i := range 80 {
		ids = append(ids, fmt.Sprintf("room-%02d", i))
	}
	for i, g := range ids {
		res, err := h.store.Append(ctx, []ledger.Record{{Kind: gateway.KindMessage, GroupID: g, By: "user", Data: []byte(`{}`)}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			actor string
			in    bool
		}{
			{"claude", i%2 == 0},
			{"delivered to claude", i%3 == 0}, // the relay's key of claude's delivery cursor
			{"gemini", i%5 == 0},
		} {
			if c.in {
				if _, err := h.store.SetCursor(ctx, g, c.actor, res[0].Event.ID); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	gs, err := h.relay.Groups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	read, delivered := map[string]int64{}, map[string]int64{}
	for _, g := range gs {
		if c, err := h.store.GetCursor(ctx, g.ID, "claude"); err == nil {
			read[g.ID] = c.Seq
		} else if !errors.Is(err, ledger.ErrNotFound) {
			t.Fatal(err)
		}
		if c, err := h.relay.DeliveryCursor(ctx, g.ID, "claude"); err == nil {
			delivered[g.ID] = c.Seq
		} else if !errors.Is(err, ledger.ErrNotFound) {
			t.Fatal(err)
		}
	}
	if len(read) != 40 || len(delivered) != 26 {
		t.Fatalf("per-group reads found %d read and %d delivery cursors, want 40 and 26", len(read), len(delivered))
	}
	for _, agent := range []string{"claude", "CLAUDE"} {
		status, body := h.do("GET", "/v1/agents/"+agent+"/cursors", "")
		var got struct{ Cursors, Delivered map[string]int64 }
		if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil {
			t.Fatalf("GET cursors of %s = %d %s (%v)", agent, status, body, err)
		}
		if !maps.Equal(got.Cursors, read) || !maps.Equal(got.Delivered, delivered) {
			t.Errorf("GET cursors of %s = %v and %v, want %v and %v", agent, got.Cursors, got.Delivered, read, delivered)
		}
	}
}
