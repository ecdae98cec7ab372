package limits

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/coder/websocket"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TestStreamLimit opens more streams than a principal may hold: the one
// over stream_limit is refused with 429 E-RATE — whether an agent stream,
// a group stream or the channel WebSocket — while another principal is
// still served, and a closed stream frees its slot. max_streams bounds
// the relay as a whole.
func TestStreamLimit(t *testing.T) {
	const limit = 3
	r := start(t, config{api: api.Options{StreamLimit: limit, MaxStreams: limit + 2}})
	var held []*stream
	for i := range limit {
		path := "/v1/agents/claude/stream"
		if i == 1 {
			path = "/v1/groups/default/stream"
		}
		s, status, code := r.open("claude", path)
		if status != http.StatusOK {
			t.Fatalf("stream %d of claude = %d %s, want 200", i+1, status, code)
		}
		held = append(held, s)
	}
	for _, path := range []string{"/v1/agents/claude/stream", "/v1/groups/default/stream", "/ui/groups/default/stream"} {
		if _, status, code := r.open("claude", path); status != http.StatusTooManyRequests || code != "E-RATE" {
			t.Errorf("GET %s over claude's limit = %d %q, want 429 E-RATE", path, status, code)
		}
	}
	ws, res, err := websocket.Dial(t.Context(), "ws://"+r.addr+"/v1/agents/claude/channel",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tokens["claude"]}}})
	if err == nil {
		ws.CloseNow()
		t.Errorf("channel WebSocket over claude's limit was accepted, want 429")
	} else if res == nil || res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("channel WebSocket over claude's limit: %v, want 429", err)
	}
	// Another principal has its own slots, until the relay's total.
	for i := range 2 {
		if _, status, code := r.open("chatgpt", "/v1/agents/chatgpt/stream"); status != http.StatusOK {
			t.Fatalf("stream %d of chatgpt = %d %s, want 200", i+1, status, code)
		}
	}
	if _, status, code := r.open("chatgpt", "/v1/agents/chatgpt/stream"); status != http.StatusTooManyRequests || code != "E-RATE" {
		t.Errorf("stream over max_streams = %d %q, want 429 E-RATE", status, code)
	}
	// Closing a stream frees its slot (once the relay has seen the close).
	held[0].close()
	eventually(t, "claude's slot freed after closing a stream", func() bool {
		s, status, _ := r.open("claude", "/v1/agents/claude/stream")
		if s != nil {
			s.close()
		}
		return status == http.StatusOK
	})
}

// countingStore records the largest batch of events any one read of the
// ledger returned, whether any read asked for no limit, and how many
// events FollowLog yielded in all (a stream that re-read the log from
// the start, or a group from its first event, would multiply it).
type countingStore struct {
	ledger.Store
	mu        sync.Mutex
	largest   int
	unbounded int
	followed  int
}

func (c *countingStore) note(n, limit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.largest = max(c.largest, n)
	if limit <= 0 {
		c.unbounded++
	}
}

func (c *countingStore) Range(ctx context.Context, group string, sinceSeq int64, kinds []string, limit int) ([]ledger.Event, error) {
	evs, err := c.Store.Range(ctx, group, sinceSeq, kinds, limit)
	c.note(len(evs), limit)
	return evs, err
}

func (c *countingStore) Log(ctx context.Context, after int64, limit int) ([]ledger.Logged, error) {
	ls, err := c.Store.Log(ctx, after, limit)
	c.note(len(ls), limit)
	return ls, err
}

func (c *countingStore) FollowLog(ctx context.Context, after int64) iter.Seq2[ledger.Logged, error] {
	return func(yield func(ledger.Logged, error) bool) {
		for l, err := range c.Store.FollowLog(ctx, after) {
			if err == nil {
				c.mu.Lock()
				c.followed++
				c.mu.Unlock()
			}
			if !yield(l, err) {
				return
			}
		}
	}
}

func (c *countingStore) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.largest, c.unbounded, c.followed = 0, 0, 0
}

// TestAgentStreamManyGroups follows an agent over many groups, each with
// history: every delivery carries an id that is one number of constant
// size (not a cursor per group), a stream resumed from the id of its
// last delivery sends exactly the rest, and the relay reads the ledger
// for it in bounded pages — no read returns more than a page, none asks
// for a whole group — with a bounded number of goroutines, whatever the
// number of groups or events.
func TestAgentStreamManyGroups(t *testing.T) {
	const groups, perGroup = 300, 10
	cs := &countingStore{}
	r := start(t, config{wrap: func(s ledger.Store) ledger.Store { cs.Store = s; return cs }})
	for round := range perGroup {
		body := envelopes(t, groups, func(i int) string { return fmt.Sprintf("proj-%03d", i) })
		if status, code := r.post("chatgpt", body); status != http.StatusOK {
			t.Fatalf("POST round %d = %d %s", round, status, code)
		}
	}
	const total = groups * perGroup
	cs.reset()
	goroutinesBefore := runtime.NumGoroutine()

	// Several streams at once, each reading half of the deliveries.
	const streams = 5
	var ss []*stream
	for range streams {
		s, status, code := r.open("claude", "/v1/agents/claude/stream")
		if status != http.StatusOK {
			t.Fatalf("agent stream = %d %s", status, code)
		}
		ss = append(ss, s)
	}
	var lastID string
	var lastPos int64
	for i := range total / 2 {
		for j, s := range ss {
			ev := s.next(t)
			if len(ev.id) > 20 {
				t.Fatalf("delivery %d: id is %d bytes (%.40q…), want one position", i, len(ev.id), ev.id)
			}
			pos, err := strconv.ParseInt(ev.id, 10, 64)
			if err != nil {
				t.Fatalf("delivery %d: id %q is not a position", i, ev.id)
			}
			if j == 0 {
				if pos <= lastPos {
					t.Fatalf("delivery %d: position %d after %d, want growing", i, pos, lastPos)
				}
				lastID, lastPos = ev.id, pos
			}
		}
	}
	if extra := runtime.NumGoroutine() - goroutinesBefore; extra > streams*10 {
		t.Errorf("%d streams over %d groups added %d goroutines, want a few per stream", streams, groups, extra)
	}
	cs.mu.Lock()
	largest, unbounded, followed := cs.largest, cs.unbounded, cs.followed
	cs.mu.Unlock()
	if unbounded > 0 || largest > 256 {
		t.Errorf("the streams read the ledger %d times without a limit, largest read %d events; want pages of at most 256", unbounded, largest)
	}
	// Each stream may read ahead of what it sent (pages, socket buffers),
	// but reads the log once: never more than all of it.
	if limit := streams * total; followed > limit {
		t.Errorf("%d streams that sent %d deliveries each followed %d events of the log, want at most %d", streams, total/2, followed, limit)
	}
	for _, s := range ss {
		s.close()
	}

	// Resume from the last id: exactly the second half, in order.
	s, status, code := r.open("claude", "/v1/agents/claude/stream", "Last-Event-ID", lastID)
	if status != http.StatusOK {
		t.Fatalf("resumed agent stream = %d %s", status, code)
	}
	seen := map[string]bool{}
	for i := range total - total/2 {
		ev := s.next(t)
		var d gateway.Delivery
		if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
			t.Fatalf("resumed delivery %d: %v", i, err)
		}
		pos, _ := strconv.ParseInt(ev.id, 10, 64)
		if pos <= lastPos || seen[d.EventID] || d.Position != pos {
			t.Fatalf("resumed delivery %d: position %d (data %d) after %d, event %s seen before: %v", i, pos, d.Position, lastPos, d.EventID, seen[d.EventID])
		}
		seen[d.EventID] = true
		lastPos = pos
	}
	if got := r.count(); got != total {
		t.Fatalf("ledger holds %d events, want %d", got, total)
	}
}

// TestRemoteFollowAll follows an agent over 40 groups through the HTTP
// client a remote harness uses (c2a.Remote, `crosstalk harness --relay`),
// with a stream limit of 2: one stream carries every group (a stream per
// group would be refused past the limit), and it resumes after a
// position.
func TestRemoteFollowAll(t *testing.T) {
	const groups = 40
	r := start(t, config{api: api.Options{StreamLimit: 2}})
	body := envelopes(t, groups, func(i int) string { return fmt.Sprintf("g%02d", i) })
	if status, code := r.post("chatgpt", body); status != http.StatusOK {
		t.Fatalf("POST = %d %s", status, code)
	}
	rm := &c2a.Remote{URL: r.url, Token: tokens["claude"]}
	read := func(after int64, n int) []gateway.Delivery {
		ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
		defer cancel()
		var out []gateway.Delivery
		for d, err := range rm.FollowAll(ctx, "claude", after) {
			if err != nil {
				t.Fatalf("FollowAll(%d) after %d deliveries: %v", after, len(out), err)
			}
			out = append(out, d)
			if len(out) == n {
				break
			}
		}
		return out
	}
	all := read(0, groups)
	seen := map[string]bool{}
	for i, d := range all {
		seen[d.Group] = true
		if d.Position <= 0 || i > 0 && d.Position <= all[i-1].Position {
			t.Fatalf("delivery %d: position %d after %d, want growing", i, d.Position, all[max(i-1, 0)].Position)
		}
	}
	if len(seen) != groups {
		t.Errorf("FollowAll reached %d groups, want %d", len(seen), groups)
	}
	rest := read(all[groups/2-1].Position, groups/2)
	if rest[0].EventID != all[groups/2].EventID {
		t.Errorf("resumed at %s, want %s", rest[0].EventID, all[groups/2].EventID)
	}
}
