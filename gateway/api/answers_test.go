package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/internal/fakeclock"
)

// TestHeartbeatStatesNoFalseCounts: a heartbeat's answer (the CLI's
// `heartbeat --json` data, MCP's agent.heartbeat) holds no count it did
// not read. It answered "events":0,"addressed":0,"owes":0 for an agent
// that had written, been sent and owed messages (GET /v1/agents said so).
func TestHeartbeatStatesNoFalseCounts(t *testing.T) {
	t.Parallel()
	r := relayWithRequest(t)
	var list struct {
		Agents []gateway.AgentStatus `json:"agents"`
	}
	r.call("GET", "/v1/agents", "", &list)
	rows := map[string]gateway.AgentStatus{}
	for _, a := range list.Agents {
		rows[a.ID] = a
	}
	if rows["claude"].Events != 1 || rows["chatgpt"].Owes != 1 {
		t.Fatalf("GET /v1/agents = %+v, want claude with 1 event, chatgpt owing 1", list.Agents)
	}
	for _, agent := range []string{"claude", "chatgpt"} {
		var hb map[string]any
		r.call("POST", "/v1/agents/"+agent+"/heartbeat", "", &hb)
		if hb["agent"] != agent || hb["liveness"] != "active" {
			t.Errorf("heartbeat of %s = %v", agent, hb)
		}
		want := map[string]float64{"events": float64(rows[agent].Events), "addressed": float64(rows[agent].Addressed), "owes": float64(rows[agent].Owes)}
		for k, v := range want {
			if got, ok := hb[k]; ok && got != v {
				t.Errorf("heartbeat of %s says %s = %v; GET /v1/agents says %v", agent, k, got, v)
			}
		}
	}
}

// TestDeliveredStatesNoEvent: POST …/delivered moves a cursor and records
// no ledger event (docs/agents.md §3), so its answer holds the cursor and
// no event; it held a zero event ("v":0,"id":"","data":null).
func TestDeliveredStatesNoEvent(t *testing.T) {
	t.Parallel()
	r := relayWithRequest(t)
	evs, err := r.relay.Store().Range(t.Context(), gateway.DefaultGroup, 0, nil, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("Range = %d events, %v", len(evs), err)
	}
	req, _ := http.NewRequest("POST", r.srv.URL+"/v1/groups/"+gateway.DefaultGroup+"/events/"+evs[0].ID+"/delivered", nil)
	req.Header.Set("X-Crosstalk-Agent", "chatgpt")
	res, err := r.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ans map[string]json.RawMessage
	if err := json.NewDecoder(res.Body).Decode(&ans); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("delivered = %d, %v", res.StatusCode, err)
	}
	if ev, ok := ans["event"]; ok {
		t.Errorf("delivered answered an event %s, but records none", ev)
	}
	if _, ok := ans["cursor"]; !ok {
		t.Errorf("delivered answered %v, want the cursor", ans)
	}
}

// relayWithRequest starts a relay on a memory ledger that has recorded
// one request, from CLAUDE to CHATGPT.
func relayWithRequest(t *testing.T) *liveRelay {
	t.Helper()
	clk := fakeclock.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	r := startLiveRelay(t, memory.New(nil), clk, time.Minute)
	e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "Is the deploy blocked?")
	text, err := envelope.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	r.call("POST", "/crosstalk/receive", string(text), nil)
	return r
}
