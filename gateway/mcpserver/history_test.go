package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/mcpserver"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// eventCounter counts the events a ledger's reads return.
type eventCounter struct {
	ledger.Store
	n atomic.Int64
}

func (c *eventCounter) Range(ctx context.Context, group string, since int64, kinds []string, limit int) ([]ledger.Event, error) {
	evs, err := c.Store.Range(ctx, group, since, kinds, limit)
	c.n.Add(int64(len(evs)))
	return evs, err
}

func (c *eventCounter) Log(ctx context.Context, after int64, limit int) ([]ledger.Logged, error) {
	ls, err := c.Store.Log(ctx, after, limit)
	c.n.Add(int64(len(ls)))
	return ls, err
}

func (c *eventCounter) LogBefore(ctx context.Context, before int64, limit int) ([]ledger.Logged, error) {
	ls, err := c.Store.LogBefore(ctx, before, limit)
	c.n.Add(int64(len(ls)))
	return ls, err
}

func (c *eventCounter) Get(ctx context.Context, id string) (ledger.Event, error) {
	c.n.Add(1)
	return c.Store.Get(ctx, id)
}

// TestChatReadsIndependentOfHistory calls chat.list_events (the newest,
// one by eventId, by group) and chat.read_thread (by eventId, by thread)
// on a ledger of 12 000 messages to the agent, and counts the events each
// call reads: well under the history (issue 13). Before, each of them
// read every delivery the agent ever had.
func TestChatReadsIndependentOfHistory(t *testing.T) {
	const n = 12000
	ctx := t.Context()
	book, err := gateway.NewAddressBook(testrelay.Agents)
	if err != nil {
		t.Fatal(err)
	}
	st := &eventCounter{Store: memory.New(nil)}
	r := gateway.New(st, &gateway.Options{Book: book})
	var first, last ledger.Event
	for i := range n {
		text := testrelay.Envelope("CHATGPT", "CLAUDE", "REQUEST", "", fmt.Sprintf("question %d", i), func(e *envelope.Envelope) {
			e.Thread = fmt.Sprintf("T%d", i%100)
		})
		outs, err := r.Ingest(ctx, gateway.Intake{Transport: "test", Text: []byte(text)})
		if err != nil || len(outs) != 1 || outs[0].Reject != nil {
			t.Fatalf("Ingest = %+v, %v", outs, err)
		}
		if i == 0 {
			first = outs[0].Event
		}
		last = outs[0].Event
	}
	if err := r.SyncProjection(ctx); err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcpserver.Options{Agent: "claude", Backend: &c2a.Local{Relay: r}})
	if err != nil {
		t.Fatal(err)
	}
	sst, ct := mcp.NewInMemoryTransports()
	if _, err := srv.Connect(ctx, sst, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	type result struct {
		Events   []mcpserver.EventView `json:"events"`
		Messages []mcpserver.EventView `json:"messages"`
		More     bool                  `json:"more"`
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want func(result) string // "" when right
	}{
		{"chat.list_events", map[string]any{}, func(r result) string {
			if len(r.Events) != 50 || r.Events[49].EventID != last.ID || !r.More {
				return "want the newest 50, the last one last, and more"
			}
			return ""
		}},
		{"chat.list_events", map[string]any{"group": last.GroupID, "limit": 3}, func(r result) string {
			if len(r.Events) != 3 || r.Events[2].EventID != last.ID {
				return "want the newest 3 of the group"
			}
			return ""
		}},
		{"chat.list_events", map[string]any{"eventId": first.ID}, func(r result) string {
			if len(r.Events) != 1 || r.Events[0].EventID != first.ID || !strings.Contains(r.Events[0].UntrustedContent, "question 0") {
				return "want the first event with its content"
			}
			return ""
		}},
		{"chat.read_thread", map[string]any{"eventId": first.ID, "limit": 200}, func(r result) string {
			if len(r.Messages) == 0 || r.Messages[0].EventID != first.ID {
				return "want T0 from its first message on"
			}
			for _, m := range r.Messages {
				if m.Thread != "T0" {
					return "a message of another thread"
				}
			}
			return ""
		}},
		{"chat.read_thread", map[string]any{"thread": "T99"}, func(r result) string {
			if len(r.Messages) != 20 || r.Messages[19].EventID != last.ID {
				return "want T99's newest messages in the window, the last one last"
			}
			return ""
		}},
	} {
		st.n.Store(0)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil || res.IsError {
			t.Fatalf("%s %v = %v, %+v", tc.tool, tc.args, err, res)
		}
		read := st.n.Load()
		var out result
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		if why := tc.want(out); why != "" {
			t.Errorf("%s %v: %d events, %d messages: %s", tc.tool, tc.args, len(out.Events), len(out.Messages), why)
		}
		if read > n/2 {
			t.Errorf("%s %v read %d events of a ledger of %d: want a page's worth, not the history", tc.tool, tc.args, read, n)
		}
	}
}
