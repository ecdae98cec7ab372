package channel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/channel"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// wsClient is a harness speaking the channel over a real WebSocket.
type wsClient struct {
	t     *testing.T
	c     *websocket.Conn
	in    chan channel.Message
	errc  chan error
	queue []channel.Message
	seq   int
}

func dial(t *testing.T, r *testrelay.Relay, agent string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, r.WSURL("/v1/agents/"+agent+"/channel"), nil)
	if err != nil {
		t.Fatalf("Dial(%s channel) = %v", agent, err)
	}
	c.SetReadLimit(16 << 20)
	w := &wsClient{t: t, c: c, in: make(chan channel.Message, 256), errc: make(chan error, 1)}
	go func() {
		for {
			_, b, err := c.Read(context.Background())
			if err != nil {
				w.errc <- err
				close(w.in)
				return
			}
			var m channel.Message
			if err := json.Unmarshal(b, &m); err != nil {
				w.errc <- fmt.Errorf("bad message %s: %w", b, err)
				close(w.in)
				return
			}
			w.in <- m
		}
	}()
	t.Cleanup(func() { c.CloseNow() })
	return w
}

func (w *wsClient) write(v any) {
	w.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.c.Write(w.t.Context(), websocket.MessageText, b); err != nil {
		w.t.Fatalf("Write() = %v", err)
	}
}

// next returns the next message matching keep (any when nil); others
// stay queued for later calls.
func (w *wsClient) next(keep func(channel.Message) bool, timeout time.Duration) (channel.Message, bool) {
	w.t.Helper()
	for i, m := range w.queue {
		if keep == nil || keep(m) {
			w.queue = append(w.queue[:i:i], w.queue[i+1:]...)
			return m, true
		}
	}
	deadline := time.After(timeout)
	for {
		select {
		case m, ok := <-w.in:
			if !ok {
				return channel.Message{}, false
			}
			if keep == nil || keep(m) {
				return m, true
			}
			w.queue = append(w.queue, m)
		case <-deadline:
			return channel.Message{}, false
		}
	}
}

// call sends a request and returns its response.
func (w *wsClient) call(method string, params any) channel.Message {
	w.t.Helper()
	w.seq++
	id := fmt.Sprintf("c%d", w.seq)
	w.write(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	m, ok := w.next(func(m channel.Message) bool { return m.IsResponse() && string(m.ID) == `"`+id+`"` }, 5*time.Second)
	if !ok {
		w.t.Fatalf("%s: no response", method)
	}
	return m
}

func (w *wsClient) initialize() channel.InitializeResult {
	w.t.Helper()
	m := w.call("initialize", map[string]any{"protocolVersion": c2a.ProtocolVersion, "clientInfo": map[string]any{"name": "test-harness"},
		"capabilities": map[string]any{"delivery": map[string]bool{"ack": true, "redelivery": true, "idempotency": true},
			"injection": map[string]bool{"immediate": true, "buffered": true, "notify": true, "tool_mailbox": true, "digest": true},
			"utilities": map[string]bool{"progress": true, "cancellation": true, "logging": true}}})
	if m.Error != nil {
		w.t.Fatalf("initialize = %v", m.Error)
	}
	var res channel.InitializeResult
	if err := json.Unmarshal(m.Result, &res); err != nil {
		w.t.Fatal(err)
	}
	return res
}

// delivery waits for the next chat/deliver request.
func (w *wsClient) delivery(timeout time.Duration) (channel.Message, c2a.Event, bool) {
	w.t.Helper()
	m, ok := w.next(func(m channel.Message) bool { return m.Method == "chat/deliver" }, timeout)
	if !ok {
		return m, c2a.Event{}, false
	}
	var ev c2a.Event
	if err := json.Unmarshal(m.Params, &ev); err != nil {
		w.t.Fatalf("chat/deliver params: %v", err)
	}
	return m, ev, true
}

func (w *wsClient) ack(m channel.Message, result any) {
	w.t.Helper()
	w.write(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(m.ID), "result": result})
}

func (w *wsClient) close() {
	w.t.Helper()
	if err := w.c.Close(websocket.StatusNormalClosure, "test done"); err != nil {
		w.t.Logf("Close() = %v", err)
	}
}

// cursor returns agent's delivery cursor in group: where its channel
// resumes.
func cursor(t *testing.T, r *testrelay.Relay, agent, group string) int64 {
	t.Helper()
	c, err := r.Relay.DeliveryCursor(t.Context(), group, agent)
	if errors.Is(err, ledger.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatalf("GetCursor() = %v", err)
	}
	return c.Seq
}

// TestResumeWithoutLossOrDuplicates: a harness acknowledges part of the
// stream, drops the connection with deliveries in flight, reconnects and
// gets exactly the unacknowledged events, then live ones.
func TestResumeWithoutLossOrDuplicates(t *testing.T) {
	r := testrelay.Start(t, nil)
	var sent []string
	var last int64
	for i := range 10 {
		ev := r.Send(t, "CHATGPT", "CLAUDE", "REQUEST", fmt.Sprintf("question %d", i), "", "")
		sent = append(sent, ev.ID)
	}
	acked := map[string]int{}

	h := dial(t, r, "claude")
	res := h.initialize()
	if res.ProtocolVersion != c2a.ProtocolVersion || res.Resume["default"] != 0 || res.Agent != "claude" {
		t.Fatalf("initialize = %+v, want version %s, resume 0, agent claude", res, c2a.ProtocolVersion)
	}
	var first []c2a.Event
	for len(first) < 6 {
		m, ev, ok := h.delivery(5 * time.Second)
		if !ok {
			t.Fatalf("session 1: got %d deliveries, want 6", len(first))
		}
		first = append(first, ev)
		if len(first) <= 4 {
			h.ack(m, map[string]any{})
			acked[ev.EventID]++
		}
	}
	for i, ev := range first {
		if ev.EventID != sent[i] {
			t.Fatalf("session 1 delivery %d = %s, want %s (ledger order)", i, ev.EventID, sent[i])
		}
		if ev.Reliability.Attempt != 1 || ev.Reliability.IdempotencyKey != ev.EventID+":claude" {
			t.Errorf("delivery %s reliability = %+v, want attempt 1, key %s:claude", ev.EventID, ev.Reliability, ev.EventID)
		}
		if ev.Target.Directedness != "to_me" || ev.Attention.Policy != "must_respond" || ev.Conversation.Kind != "dm" {
			t.Errorf("delivery %s = %+v %+v %+v, want to_me must_respond dm", ev.EventID, ev.Target, ev.Attention, ev.Conversation)
		}
		if !strings.HasPrefix(ev.Crosstalk.Prompt, "C2A EVENT\nevent_id: "+ev.EventID) {
			t.Errorf("prompt = %q, want the C2A EVENT block", ev.Crosstalk.Prompt)
		}
	}
	h.close() // deliveries 5..10 stay unacknowledged

	if got, want := cursor(t, r, "claude", "default"), int64(4); got != want {
		t.Fatalf("delivery cursor after session 1 = %d, want %d", got, want)
	}
	for i := 10; i < 13; i++ { // live traffic while disconnected
		ev := r.Send(t, "CHATGPT", "CLAUDE", "REQUEST", fmt.Sprintf("question %d", i), "", "")
		sent, last = append(sent, ev.ID), ev.Seq
	}

	h2 := dial(t, r, "claude")
	if res := h2.initialize(); res.Resume["default"] != 4 {
		t.Fatalf("second initialize resume = %v, want default:4", res.Resume)
	}
	var order []string
	for len(order) < len(sent)-4 {
		m, ev, ok := h2.delivery(5 * time.Second)
		if !ok {
			t.Fatalf("session 2: got %d deliveries, want %d", len(order), len(sent)-4)
		}
		order = append(order, ev.EventID)
		h2.ack(m, map[string]any{})
		acked[ev.EventID]++
	}
	if got, want := strings.Join(order, ","), strings.Join(sent[4:], ","); got != want {
		t.Errorf("session 2 deliveries = %s, want %s", got, want)
	}
	for _, id := range sent {
		if acked[id] != 1 {
			t.Errorf("event %s acknowledged %d times, want exactly once", id, acked[id])
		}
	}
	if _, _, ok := h2.delivery(300 * time.Millisecond); ok {
		t.Errorf("extra delivery after every event was acknowledged")
	}
	waitFor(t, func() bool { return cursor(t, r, "claude", "default") == last }, "delivery cursor at the last event")
	h2.close()
}

// TestReadNeverSkipsDeliveries: a harness that marks events read in any
// order (newest first, then older ones) still receives every
// unacknowledged must_respond event after reconnecting: reading moves the
// read cursor only, forwards only, and never the delivery cursor (issue
// #14).
func TestReadNeverSkipsDeliveries(t *testing.T) {
	r := testrelay.Start(t, nil)
	var sent []ledger.Event
	for i := range 6 {
		sent = append(sent, r.Send(t, "CHATGPT", "CLAUDE", "REQUEST", fmt.Sprintf("question %d", i), "", ""))
	}
	h := dial(t, r, "claude")
	h.initialize()
	for i := range sent {
		m, ev, ok := h.delivery(5 * time.Second)
		if !ok || ev.EventID != sent[i].ID {
			t.Fatalf("session 1 delivery %d = %s %v, want %s", i, ev.EventID, ok, sent[i].ID)
		}
		if i < 2 {
			h.ack(m, map[string]any{})
		}
	}
	waitFor(t, func() bool { return cursor(t, r, "claude", "default") == sent[1].Seq }, "the delivery cursor at the second event")
	// An acknowledgement without a disposition moves the delivery cursor
	// alone (docs/agents.md, the dispositions table), not the read cursor.
	if c, err := r.Store.GetCursor(t.Context(), "default", "claude"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("read cursor after two plain acknowledgements = %+v, %v, want none", c, err)
	}
	// The harness marks reads as any client does: over the relay's HTTP
	// API (POST /v1/groups/{g}/events/{id}/read), beside its channel.
	api := &c2a.Remote{URL: r.URL, Retries: -1}
	read := func(ev ledger.Event) {
		t.Helper()
		if _, err := api.Act(t.Context(), gateway.ActionRequest{Action: gateway.ActionRead, Group: "default", EventID: ev.ID, Actor: "claude"}); err != nil {
			t.Fatalf("read %d = %v", ev.Seq, err)
		}
	}
	for _, i := range []int{5, 2, 0, 3} { // any order, newest first
		read(sent[i])
	}
	if c, err := r.Store.GetCursor(t.Context(), "default", "claude"); err != nil || c.Seq != sent[5].Seq {
		t.Errorf("read cursor after reading 6, 3, 1, 4 = %+v, %v, want seq %d (never backwards)", c, err, sent[5].Seq)
	}
	h.close()
	if got := cursor(t, r, "claude", "default"); got != sent[1].Seq {
		t.Fatalf("delivery cursor after the reads = %d, want %d: reading must not move it", got, sent[1].Seq)
	}

	h2 := dial(t, r, "claude")
	if res := h2.initialize(); res.Resume["default"] != sent[1].Seq {
		t.Errorf("second initialize resume = %v, want default:%d", res.Resume, sent[1].Seq)
	}
	for _, want := range sent[2:] {
		m, ev, ok := h2.delivery(5 * time.Second)
		if !ok || ev.EventID != want.ID || ev.Attention.Policy != "must_respond" {
			t.Fatalf("session 2 delivery = %s %s %v, want %s must_respond", ev.EventID, ev.Attention.Policy, ok, want.ID)
		}
		h2.ack(m, map[string]any{})
	}
	if _, _, ok := h2.delivery(300 * time.Millisecond); ok {
		t.Errorf("extra delivery after every event was acknowledged")
	}
	h2.close()
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRedeliveryGivesUp: a harness that never acknowledges gets the same
// event with growing attempts and backoff, then a cancellation; the
// failure is in the ledger and nothing is acknowledged.
func TestRedeliveryGivesUp(t *testing.T) {
	r := testrelay.Start(t, &testrelay.Options{Agent: &api.AgentOptions{Channel: channel.Options{
		AckTimeout: 60 * time.Millisecond, MaxAttempts: 3, Heartbeat: time.Hour}}})
	ev := r.Send(t, "CHATGPT", "CLAUDE", "REQUEST", "are you there?", "", "")
	h := dial(t, r, "claude")
	h.initialize()
	// The waits between attempts (backoff) are ackWait's, tested apart:
	// timing them here would flake on a loaded machine.
	for attempt := 1; attempt <= 3; attempt++ {
		_, got, ok := h.delivery(3 * time.Second)
		if !ok {
			t.Fatalf("attempt %d: no delivery", attempt)
		}
		if got.EventID != ev.ID || got.Reliability.Attempt != attempt || got.Reliability.IdempotencyKey != ev.ID+":claude" {
			t.Fatalf("attempt %d = %s %+v, want %s attempt %d, same key", attempt, got.EventID, got.Reliability, ev.ID, attempt)
		}
	}
	m, ok := h.next(func(m channel.Message) bool { return m.Method == "notifications/cancelled" }, 3*time.Second)
	if !ok {
		t.Fatal("no notifications/cancelled after the last attempt")
	}
	if !strings.Contains(string(m.Params), "not acknowledged after 3 attempts") {
		t.Errorf("cancelled params = %s, want the reason", m.Params)
	}
	if m, ok := h.next(func(m channel.Message) bool { return m.Method != "notifications/progress" }, 3*time.Second); ok {
		t.Errorf("channel still open after giving up: got %+v", m)
	}
	waitFor(t, func() bool {
		evs, err := r.Store.Range(t.Context(), "default", 0, []string{gateway.KindNotify}, 0)
		return err == nil && len(evs) == 1 && strings.Contains(string(evs[0].Data), "delivery_failed")
	}, "one system.notify delivery_failed")
	if c := cursor(t, r, "claude", "default"); c != 0 {
		t.Errorf("delivery cursor = %d, want 0: nothing was acknowledged", c)
	}
	// Nothing is lost: the next connection gets the event again.
	h2 := dial(t, r, "claude")
	h2.initialize()
	if _, got, ok := h2.delivery(3 * time.Second); !ok || got.EventID != ev.ID {
		t.Fatalf("after reconnecting: delivery %v %s, want %s", ok, got.EventID, ev.ID)
	}
}

// TestBadInput: every malformed or refused message gets a JSON-RPC error
// with a reason, and the channel stays usable.
func TestBadInput(t *testing.T) {
	r := testrelay.Start(t, &testrelay.Options{Agent: &api.AgentOptions{Channel: channel.Options{MaxMessage: 4096, Heartbeat: time.Hour}}})
	ev := r.Send(t, "CHATGPT", "CLAUDE", "REQUEST", "hello", "", "")
	h := dial(t, r, "claude")

	if m := h.call("chat/ack", map[string]any{"eventId": ev.ID}); m.Error == nil || m.Error.Code != channel.CodeNotInitialized {
		t.Errorf("chat/ack before initialize = %+v, want -32002", m.Error)
	}
	if m := h.call("initialize", map[string]any{"capabilities": map[string]any{}}); m.Error == nil || m.Error.Code != channel.CodeInvalidParams ||
		!strings.Contains(m.Error.Message, "protocolVersion") {
		t.Errorf("initialize without protocolVersion = %+v, want -32602 naming protocolVersion", m.Error)
	}
	h.initialize()
	deliver, _, ok := h.delivery(3 * time.Second)
	if !ok {
		t.Fatal("no delivery")
	}
	tests := []struct {
		name   string
		method string
		params any
		code   int
		reason string
	}{
		{"ack of an event never delivered", "chat/ack", map[string]any{"eventId": "01HZZZZZZZZZZZZZZZZZZZZZZZ"}, channel.CodeInvalidParams, "never delivered"},
		{"ack without eventId", "chat/ack", map[string]any{}, channel.CodeInvalidParams, "needs eventId"},
		{"react without signal", "chat/react", map[string]any{"eventId": ev.ID}, channel.CodeInvalidParams, "needs signal"},
		{"react with an unknown signal", "chat/react", map[string]any{"eventId": ev.ID, "signal": "yolo"}, channel.CodeInvalidParams, "unknown signal"},
		{"defer without a reason", "chat/defer", map[string]any{"eventId": ev.ID}, channel.CodeInvalidParams, "needs note"},
		{"params of the wrong type", "chat/claim", []int{1}, channel.CodeInvalidParams, "bad params"},
		{"unknown method", "chat/fly", map[string]any{}, channel.CodeMethodNotFound, "unknown method"},
		{"initialize twice", "initialize", map[string]any{"protocolVersion": "x"}, channel.CodeInvalidRequest, "already initialized"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := h.call(tc.method, tc.params)
			if m.Error == nil || m.Error.Code != tc.code || !strings.Contains(m.Error.Message, tc.reason) || m.Error.Data["reason"] == nil {
				t.Errorf("%s(%v) error = %+v, want %d with reason %q", tc.method, tc.params, m.Error, tc.code, tc.reason)
			}
		})
	}
	// Not JSON, and too large: errors with a null id.
	if err := h.c.Write(t.Context(), websocket.MessageText, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if m, ok := h.next(func(m channel.Message) bool { return m.Error != nil }, 3*time.Second); !ok || m.Error.Code != channel.CodeParseError {
		t.Errorf("garbage = %+v, want -32700", m.Error)
	}
	// Valid JSON that is not one message object: a batch (which the
	// channel does not take), a string, a method of the wrong type.
	for _, raw := range []string{`[{"jsonrpc":"2.0","id":"b1","method":"ping"}]`, `"ping"`, `{"jsonrpc":"2.0","id":"m","method":5}`} {
		if err := h.c.Write(t.Context(), websocket.MessageText, []byte(raw)); err != nil {
			t.Fatal(err)
		}
		m, ok := h.next(func(m channel.Message) bool { return m.Error != nil }, 3*time.Second)
		if !ok || m.Error.Code != channel.CodeInvalidRequest || !strings.Contains(m.Error.Message, "one JSON-RPC message object") {
			t.Errorf("%s = %+v, want -32600 saying one message object is expected", raw, m.Error)
		}
		if strings.HasPrefix(raw, "[") && !strings.Contains(m.Error.Message, "batch") {
			t.Errorf("%s = %+v, want the error to say batches are not taken", raw, m.Error)
		}
	}
	// An id that is neither a string, a number nor null: refused, and not
	// echoed back (the answer's id is null).
	for _, raw := range []string{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, `{"jsonrpc":"2.0","id":true,"method":"ping"}`} {
		if err := h.c.Write(t.Context(), websocket.MessageText, []byte(raw)); err != nil {
			t.Fatal(err)
		}
		m, ok := h.next(func(m channel.Message) bool { return m.Error != nil }, 3*time.Second)
		if !ok || m.Error.Code != channel.CodeInvalidRequest || !strings.Contains(m.Error.Message, "an id is") || len(m.ID) > 0 && string(m.ID) != "null" {
			t.Errorf("%s = id %s, %+v; want -32600 with a null id", raw, m.ID, m.Error)
		}
	}
	big := `{"jsonrpc":"2.0","id":"big","method":"ping","params":{"x":"` + strings.Repeat("a", 5000) + `"}}`
	if err := h.c.Write(t.Context(), websocket.MessageText, []byte(big)); err != nil {
		t.Fatal(err)
	}
	if m, ok := h.next(func(m channel.Message) bool { return m.Error != nil }, 3*time.Second); !ok || m.Error.Code != channel.CodeInvalidRequest ||
		!strings.Contains(m.Error.Message, "exceeds the limit") {
		t.Errorf("oversized message = %+v, want -32600 exceeds the limit", m.Error)
	}
	// The channel still works: ack the delivery with a disposition, then
	// chat/ack it again (a duplicate, not an error).
	h.ack(deliver, map[string]any{"disposition": "deferred", "note": "after the deploy"})
	waitFor(t, func() bool { return cursor(t, r, "claude", "default") == ev.Seq }, "the ack to move the cursor")
	if m := h.call("chat/ack", map[string]any{"eventId": ev.ID}); m.Error != nil || !strings.Contains(string(m.Result), "duplicate") {
		t.Errorf("second chat/ack = %s %+v, want a duplicate result", m.Result, m.Error)
	}
	if m := h.call("ping", nil); m.Error != nil {
		t.Errorf("ping = %+v", m.Error)
	}
	evs, _ := r.Store.Range(t.Context(), "default", 0, []string{gateway.KindDisposition}, 0)
	if len(evs) != 1 || !strings.Contains(string(evs[0].Data), `"deferred"`) || !strings.Contains(string(evs[0].Data), "after the deploy") {
		t.Errorf("dispositions = %v, want one deferred with the note", evs)
	}
}

// TestClaimRace: two agents holding the role race to claim a role event
// over their channels; exactly one wins, the other gets -32001 naming the
// holder. A claim whose holder is evicted is released.
func TestClaimRace(t *testing.T) {
	r := testrelay.Start(t, &testrelay.Options{ClaimTTL: 2 * time.Hour, Agent: &api.AgentOptions{Channel: channel.Options{Heartbeat: time.Hour}}})
	ev := r.Send(t, "GEMINI", "@reviewer", "REQUEST", "who reviews PR 7?", "", "")
	agents := []string{"claude", "chatgpt"}
	clients := map[string]*wsClient{}
	for _, a := range agents {
		clients[a] = dial(t, r, a)
		clients[a].initialize()
		_, d, ok := clients[a].delivery(3 * time.Second)
		if !ok || d.EventID != ev.ID || d.Target.Directedness != "to_my_role" || d.Injection.Mode != "notify" || d.Knock == nil || len(d.Content) != 0 {
			t.Fatalf("%s delivery = %+v, want a to_my_role knock without content", a, d)
		}
	}
	var wg sync.WaitGroup
	results := map[string]channel.Message{}
	var mu sync.Mutex
	start := make(chan struct{})
	for _, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			m := clients[a].call("chat/claim", map[string]any{"eventId": ev.ID})
			mu.Lock()
			results[a] = m
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	var winner, loser string
	for _, a := range agents {
		if results[a].Error == nil {
			winner = a
		} else {
			loser = a
		}
	}
	if winner == "" || loser == "" {
		t.Fatalf("claims = %+v, want exactly one winner", results)
	}
	if e := results[loser].Error; e.Code != channel.CodeConflict || e.Data["claimedBy"] != winner {
		t.Errorf("%s's claim error = %+v, want -32001 claimedBy %s", loser, e, winner)
	}
	// The winner goes silent past eviction; the loser stays active.
	r.Clock.Advance(31 * time.Minute)
	r.Relay.Touch(loser)
	if m := clients[loser].call("chat/claim", map[string]any{"eventId": ev.ID}); m.Error != nil {
		t.Fatalf("claim after the holder's eviction = %+v, want granted", m.Error)
	}
	c, err := r.Store.GetClaim(t.Context(), "default", ev.ID, r.Clock.Now())
	if err != nil || c.Actor != loser {
		t.Fatalf("claim now = %+v, %v; want held by %s", c, err, loser)
	}
	notes, _ := r.Store.Range(t.Context(), "default", 0, []string{gateway.KindNotify}, 0)
	if len(notes) != 1 || !strings.Contains(string(notes[0].Data), "claim_released") {
		t.Errorf("notices = %v, want one claim_released", notes)
	}
}

// TestChannelTellsDischarge: a harness that was delivered an obligation
// is delivered its discharge too — crosstalk.kind x.crosstalk.discharge,
// crosstalk.discharges naming the obligation, must_not_respond — and,
// once it acknowledged both, a reconnection delivers neither again
// (issue #14).
func TestChannelTellsDischarge(t *testing.T) {
	r := testrelay.Start(t, nil)
	ob := r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "REQUEST", "ops", "review PR 7 before I ship", func(e *envelope.Envelope) {
		e.Meta = []envelope.Meta{{Namespace: "obligation", Fields: []envelope.Field{{Key: "Blocks", Value: "halted"}}}}
	}))
	h := dial(t, r, "claude")
	h.initialize()
	m, ev, ok := h.delivery(5 * time.Second)
	if !ok || ev.EventID != ob.ID || ev.Attention.Policy != "must_respond" {
		t.Fatalf("first delivery = %s %s %v, want the obligation, must_respond", ev.EventID, ev.Attention.Policy, ok)
	}
	h.ack(m, map[string]any{})
	d, err := gateway.ParseData(ob)
	if err != nil {
		t.Fatal(err)
	}
	dis := r.Ingest(t, testrelay.Envelope("CHATGPT", "CLAUDE", "ACK", "ops", "merged, thanks", func(e *envelope.Envelope) { e.Parent = d.X.Envelope.Message }))
	m, ev, ok = h.delivery(5 * time.Second)
	if !ok || ev.EventID != dis.ID || ev.Crosstalk.Kind != gateway.KindDischarge || ev.Crosstalk.Discharges != ob.ID || !ev.Crosstalk.Discharged ||
		ev.Attention.Policy != "must_not_respond" || ev.Attention.Reason != "discharged" {
		t.Fatalf("delivery after the discharge = %+v, %v, want the discharge of %s", ev, ok, ob.ID)
	}
	if !strings.Contains(ev.Crosstalk.Prompt, "discharges: "+ob.ID) {
		t.Errorf("prompt of the discharge = %q, want it to name the obligation", ev.Crosstalk.Prompt)
	}
	h.ack(m, map[string]any{})
	waitFor(t, func() bool { return cursor(t, r, "claude", dis.GroupID) == dis.Seq }, "the delivery cursor at the discharge")
	h.close()
	h2 := dial(t, r, "claude")
	h2.initialize()
	if _, ev, ok := h2.delivery(300 * time.Millisecond); ok {
		t.Errorf("after reconnecting: delivery %s, want none", ev.EventID)
	}
	h2.close()
}
