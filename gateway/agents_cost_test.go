package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"path/filepath"
	"sync"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

// readCounter wraps a ledger and counts the calls that read it and the
// events those calls return, so a test can tell a read that costs
// O(page) from one that walks the history.
type readCounter struct {
	ledger.Store
	mu           sync.Mutex
	calls, evs   int
	groupsCalled int
}

func (c *readCounter) note(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	c.evs += n
}

func (c *readCounter) reset() (calls, evs, groups int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls, evs, groups = c.calls, c.evs, c.groupsCalled
	c.calls, c.evs, c.groupsCalled = 0, 0, 0
	return calls, evs, groups
}

func (c *readCounter) Get(ctx context.Context, id string) (ledger.Event, error) {
	c.note(1)
	return c.Store.Get(ctx, id)
}

func (c *readCounter) GetByDedupeKey(ctx context.Context, key string) (ledger.Event, error) {
	c.note(1)
	return c.Store.GetByDedupeKey(ctx, key)
}

func (c *readCounter) Range(ctx context.Context, group string, since int64, kinds []string, limit int) ([]ledger.Event, error) {
	evs, err := c.Store.Range(ctx, group, since, kinds, limit)
	c.note(len(evs))
	return evs, err
}

func (c *readCounter) Groups(ctx context.Context) ([]ledger.Group, error) {
	c.mu.Lock()
	c.groupsCalled++
	c.mu.Unlock()
	gs, err := c.Store.Groups(ctx)
	c.note(0)
	return gs, err
}

func (c *readCounter) Log(ctx context.Context, after int64, limit int) ([]ledger.Logged, error) {
	ls, err := c.Store.Log(ctx, after, limit)
	c.note(len(ls))
	return ls, err
}

func (c *readCounter) LogBefore(ctx context.Context, before int64, limit int) ([]ledger.Logged, error) {
	ls, err := c.Store.LogBefore(ctx, before, limit)
	c.note(len(ls))
	return ls, err
}

func (c *readCounter) Follow(ctx context.Context, group string, since int64) iter.Seq2[ledger.Event, error] {
	c.note(0)
	return c.Store.Follow(ctx, group, since)
}

func (c *readCounter) FollowLog(ctx context.Context, after int64) iter.Seq2[ledger.Logged, error] {
	c.note(0)
	return c.Store.FollowLog(ctx, after)
}

func (c *readCounter) GetCursor(ctx context.Context, group, actor string) (ledger.Cursor, error) {
	c.note(0)
	return c.Store.GetCursor(ctx, group, actor)
}

// TestAgentsCostIndependentOfHistory lists the agents of ledgers of
// growing history: once the projections have caught up, Agents asks the
// ledger the same few questions and reads no event, whatever the
// number of events or groups (issue 13; on JetStream every question is
// a request to the nats-server, so a per-group or per-event read shows
// as a cost that grows with the ledger).
func TestAgentsCostIndependentOfHistory(t *testing.T) {
	ctx := context.Background()
	var first [2]int
	for i, n := range []int{40, 2000} {
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		rc := &readCounter{Store: st}
		recs := make([]ledger.Record, 0, n)
		for k := range n {
			d := gateway.EventData{Text: fmt.Sprintf("message %d", k), To: []string{fmt.Sprintf("agent%d", k%5)}}
			b, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, ledger.Record{Kind: gateway.KindMessage, GroupID: fmt.Sprintf("g%d", k%(n/20)), By: "alice", Data: b})
		}
		for len(recs) > 0 {
			k := min(len(recs), 100)
			if _, err := st.Append(ctx, recs[:k]); err != nil {
				t.Fatal(err)
			}
			recs = recs[k:]
		}
		r := gateway.New(rc, &gateway.Options{Book: testBook(t)})
		if err := r.SyncProjection(ctx); err != nil {
			t.Fatal(err)
		}
		as, err := r.Agents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(as) < 6 {
			t.Fatalf("Agents() on %d events = %d agents, want alice and agent0..4 at least", n, len(as))
		}
		rc.reset()
		if _, err := r.Agents(ctx); err != nil {
			t.Fatal(err)
		}
		calls, evs, groups := rc.reset()
		if evs != 0 || groups != 0 {
			t.Errorf("Agents() on %d events read %d events and listed the groups %d times, want none", n, evs, groups)
		}
		first[i] = calls
	}
	if first[1] > first[0] {
		t.Errorf("Agents() asked the ledger %d questions on 2000 events in 100 groups, %d on 40 events in 2: want no more", first[1], first[0])
	}
}
