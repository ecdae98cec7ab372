package relaytest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// The outbound kill test: killN envelopes for an HTTP receiver; the first
// killPass deliveries get through before the receiver goes down.
const (
	killN    = 12
	killPass = 3
	// killInflight is the relay's number of concurrent sends to one
	// receiver: half of gateway.OutboundOptions.Workers (4 by default).
	killInflight = 2
)

// gateMode is what the gate in front of the receiving relay does with a
// delivery.
type gateMode int

const (
	// gateOpen forwards to the receiver and answers as it does.
	gateOpen gateMode = iota
	// gateDown holds every request unanswered until the caller gives up
	// (the sending relay dies): a receiver that hangs. Alternately it
	// first lets the receiver record the envelope (the answer is lost: a
	// receiver that committed and then hung), or not at all.
	gateDown
)

// killGate is a front for the receiving relay that can hang.
type killGate struct {
	next    http.Handler
	release chan struct{} // closed when the test ends

	mu        sync.Mutex
	mode      gateMode
	passLeft  int            // gateDown lets this many through first
	turn      int            // alternates gateDown's two ways of hanging
	posts     map[string]int // POSTs by message id
	answered  map[string]int // 200s the sending relay got, by message id
	committed map[string]int // recorded by the receiver without an answer
	inflight  int            // requests held now
}

func (g *killGate) set(mode gateMode, passFirst int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mode, g.passLeft = mode, passFirst
}

func (g *killGate) snapshot() (inflight int, posts, answered, committed map[string]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	cp := func(m map[string]int) map[string]int {
		out := make(map[string]int, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	return g.inflight, cp(g.posts), cp(g.answered), cp(g.committed)
}

func (g *killGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e, err := envelope.NewReader(bytes.NewReader(body)).Next()
	if err != nil {
		http.Error(w, "gate: no envelope: "+err.Error(), http.StatusBadRequest)
		return
	}
	m := e.Message
	forward := func(w http.ResponseWriter) {
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(body))
		g.next.ServeHTTP(w, r2)
	}
	g.mu.Lock()
	g.posts[m]++
	mode, commit := g.mode, false
	if mode == gateDown && g.passLeft > 0 {
		g.passLeft--
		mode = gateOpen
	}
	if mode == gateDown {
		commit = g.turn%2 == 0
		g.turn++
	}
	g.mu.Unlock()

	if mode == gateOpen {
		rec := httptest.NewRecorder()
		forward(rec)
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		if rec.Code == http.StatusOK {
			g.mu.Lock()
			g.answered[m]++
			g.mu.Unlock()
		}
		return
	}
	if commit {
		rec := httptest.NewRecorder()
		forward(rec)
		if rec.Code == http.StatusOK {
			g.mu.Lock()
			g.committed[m]++
			g.mu.Unlock()
		}
	}
	g.mu.Lock()
	g.inflight++
	g.mu.Unlock()
	select {
	case <-r.Context().Done(): // the sending relay was killed (or gave up)
	case <-g.release:
	}
	g.mu.Lock()
	g.inflight--
	g.mu.Unlock()
}

// deliveryView is the sending relay's ledger: its message events by
// message id, and its delivery events by event id.
type deliveryView struct {
	messages   map[string][]ledger.Event
	deliveries map[string][]gateway.EventData
	errors     []gateway.EventData // system.notify of kind error
}

func readDeliveries(t *testing.T, p *e2eProc, group string) deliveryView {
	t.Helper()
	v := deliveryView{messages: map[string][]ledger.Event{}, deliveries: map[string][]gateway.EventData{}}
	for _, ev := range p.events(t, group) {
		d := e2eData(t, ev)
		switch ev.Kind {
		case gateway.KindMessage:
			v.messages[d.X.Envelope.Message] = append(v.messages[d.X.Envelope.Message], ev)
		case gateway.KindDelivery:
			v.deliveries[d.EventID] = append(v.deliveries[d.EventID], d)
		case gateway.KindNotify:
			if d.Kind == "error" {
				v.errors = append(v.errors, d)
			}
		}
	}
	return v
}

// delivered counts the messages with a delivered event.
func (v deliveryView) delivered() int {
	n := 0
	for _, evs := range v.messages {
		for _, d := range v.deliveries[evs[0].ID] {
			if d.State == "delivered" {
				n++
				break
			}
		}
	}
	return n
}

// TestOutboundKill is issue 5's "killing the relay mid-delivery and
// restarting it delivers every pending envelope exactly once". A child
// `crosstalk relay` routes GEMINI over HTTP to a second (in-process)
// relay behind a gate. killN envelopes are ingested; killPass deliveries
// get through, then the gate hangs every request — half of them after
// letting the receiver record the envelope, so the sender never learns it
// arrived. With killInflight sends in flight and the rest queued, the relay
// is SIGKILLed; it is restarted on the same data dir while the receiver is
// still down and SIGKILLed again mid-send; then the receiver comes up and
// the relay is restarted once more. In the end every envelope is in the
// receiver's ledger exactly once (it de-duplicates by message id), the
// ones delivered before the first kill were never sent again, and the
// sender's ledger holds exactly one x.crosstalk.delivery "delivered" event
// per (event, receiver), no failures and no error notices.
func TestOutboundKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds crosstalk and runs it as a child process")
	}
	bin := crosstalkBinary(t)
	rcv := newRelay(t, nil, nil)
	gate := &killGate{next: rcv.srv.Config.Handler, release: make(chan struct{}),
		posts: map[string]int{}, answered: map[string]int{}, committed: map[string]int{}}
	gate.set(gateDown, killPass)
	gsrv := httptest.NewServer(gate)
	t.Cleanup(gsrv.Close)
	t.Cleanup(func() { close(gate.release) }) // runs first: unblocks held requests

	dir := t.TempDir()
	config := filepath.Join(dir, "relay.toml")
	toml := fmt.Sprintf(`log_level = "info"
trust_file = %q

[folder]
disabled = true

[[agents]]
id = "gemini"
names = ["GEMINI"]
transport = "http"
address = %q
`, filepath.Join(dir, "known_keys"), gsrv.URL+"/crosstalk/receive")
	if err := os.WriteFile(config, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	const group = "outbound-kill"
	var logs strings.Builder
	allLogs := func() string { return logs.String() }

	sender := startRelayProc(t, "relay (run 1)", bin, dir, config)
	var ids []string
	for i := range killN {
		text := envText("CLAUDE", "GEMINI", "REQUEST", group, fmt.Sprintf("pending delivery %d", i))
		res, err := e2eClient.Post(sender.url+"/crosstalk/receive", "text/plain; charset=utf-8", strings.NewReader(text))
		if err != nil {
			t.Fatalf("POST envelope %d = %v", i, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("POST envelope %d = %d %s, want 200", i, res.StatusCode, b)
		}
		e, err := envelope.Unmarshal([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.Message)
	}
	sort.Strings(ids)

	// Run 1: killPass delivered (and recorded as such), killInflight sends
	// held by the gate, the rest queued.
	waitFor(t, "run 1: first deliveries recorded and the others in flight", func() bool {
		inflight, _, _, _ := gate.snapshot()
		return readDeliveries(t, sender, group).delivered() == killPass && inflight == killInflight
	}, func() string { return sender.stderr.String() })
	_, postsBefore, answeredBefore, committedBefore := gate.snapshot()
	if len(answeredBefore) != killPass || len(committedBefore) == 0 {
		t.Fatalf("before the kill: %d answered, %d recorded by the receiver without an answer; want %d and at least 1", len(answeredBefore), len(committedBefore), killPass)
	}
	kill := func(p *e2eProc) {
		t.Helper()
		p.cmd.Process.Kill()
		if err := p.wait(t); err == nil {
			t.Fatalf("%s exited cleanly after SIGKILL", p.name)
		}
		fmt.Fprintf(&logs, "--- %s\n%s", p.name, p.stderr)
		waitFor(t, "held requests ending with the killed relay", func() bool {
			inflight, _, _, _ := gate.snapshot()
			return inflight == 0
		}, allLogs)
	}
	kill(sender)

	// Run 2: restarted while the receiver is still down; every unfinished
	// delivery is sent again, from the ledger; killed again mid-send.
	gate.set(gateDown, 0)
	sender = startRelayProc(t, "relay (run 2)", bin, dir, config)
	waitFor(t, "run 2: sends in flight", func() bool {
		inflight, _, _, _ := gate.snapshot()
		return inflight == killInflight
	}, func() string { return allLogs() + sender.stderr.String() })
	if got := readDeliveries(t, sender, group).delivered(); got != killPass {
		t.Errorf("run 2: %d delivered, want %d (the receiver is down)", got, killPass)
	}
	kill(sender)

	// Run 3: the receiver is back.
	gate.set(gateOpen, 0)
	sender = startRelayProc(t, "relay (run 3)", bin, dir, config)
	var view deliveryView
	waitFor(t, "run 3: every envelope delivered", func() bool {
		view = readDeliveries(t, sender, group)
		return view.delivered() == killN
	}, func() string { return allLogs() + sender.stderr.String() })

	// The receiver holds each envelope once, whatever it was sent.
	_, posts, answered, _ := gate.snapshot()
	got := map[string]int{}
	for _, ev := range rcv.events() {
		if ev.Kind != gateway.KindMessage {
			continue
		}
		d := e2eData(t, ev)
		got[d.X.Envelope.Message]++
	}
	resent := 0
	for _, m := range ids {
		if got[m] != 1 {
			t.Errorf("receiver ledger: message %s recorded %d times, want 1", m, got[m])
		}
		if answered[m] < 1 {
			t.Errorf("message %s: %d answered POSTs, want at least 1", m, answered[m])
		}
		if answeredBefore[m] > 0 && posts[m] != postsBefore[m] {
			t.Errorf("message %s, delivered before the kill: %d POSTs, want still %d (sent again after the restart)", m, posts[m], postsBefore[m])
		}
		if committedBefore[m] > 0 {
			resent++
		}
	}
	if len(got) != killN {
		t.Errorf("receiver ledger: %d distinct messages, want %d", len(got), killN)
	}

	// The sender records exactly one final state per (event, receiver).
	for _, m := range ids {
		evs := view.messages[m]
		if len(evs) != 1 {
			t.Errorf("sender ledger: message %s recorded %d times, want 1", m, len(evs))
			continue
		}
		ds := view.deliveries[evs[0].ID]
		if len(ds) != 1 || ds[0].State != "delivered" || ds[0].ActorID != "gemini" {
			t.Errorf("sender ledger: deliveries of %s (%s) = %+v, want one delivered to gemini", m, evs[0].ID, ds)
		}
	}
	if len(view.errors) != 0 {
		t.Errorf("sender ledger: error notices %+v, want none", view.errors)
	}
	t.Logf("%d envelopes, %d delivered before the first kill, %d recorded by the hung receiver before it (sent again, de-duplicated there); POSTs per message: %v",
		killN, len(answeredBefore), resent, posts)
	sender.stop(t)
	if t.Failed() {
		t.Logf("logs:\n%s--- %s\n%s", allLogs(), sender.name, sender.stderr)
	}
}
