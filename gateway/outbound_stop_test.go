package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/transports"
	"github.com/crosstalk-go/crosstalk/transports/httpx"
)

// countingReceiver is an HTTP receiver that counts the envelopes it
// accepts by path and message id, and answers 503 on the paths that are
// down.
type countingReceiver struct {
	mu       sync.Mutex
	down     map[string]bool
	accepted map[string]map[string]int // path → message id → deliveries
	refused  int
}

func (c *countingReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e, err := envelope.NewReader(bytes.NewReader(body)).Next()
	if err != nil {
		http.Error(w, "no envelope: "+err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down[r.URL.Path] {
		c.refused++
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if c.accepted[r.URL.Path] == nil {
		c.accepted[r.URL.Path] = map[string]int{}
	}
	c.accepted[r.URL.Path][e.Message]++
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(body) // an envelope: the sender's receipt
}

func (c *countingReceiver) setDown(path string, down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down[path] = down
}

func (c *countingReceiver) refusals() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

// deliveries returns the deliveries of each message id to path.
func (c *countingReceiver) deliveries(path string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for id, n := range c.accepted[path] {
		out[id] = n
	}
	return out
}

// TestOutboundHorizonSavedOnStop checks that a dispatcher stopped (a
// graceful shutdown of the relay) before HorizonEvery has passed saves
// the dispatch horizon as it stands — the last event when everything is
// delivered, the event before the message whose receiver is down when
// one is pending, never past it — so that a restart on the same ledger
// file starts there; and that the restart sends nothing twice to a
// receiver that counts what it gets. Before, a stop lost up to
// HorizonEvery of progress: the mark stayed where the last tick put it
// (here: nowhere).
func TestOutboundHorizonSavedOnStop(t *testing.T) {
	tests := []struct {
		name string
		down bool // chatgpt's receiver is down for its message in run 1
	}{
		{"everything delivered", false},
		{"a receiver down", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			rcv := &countingReceiver{down: map[string]bool{}, accepted: map[string]map[string]int{}}
			srv := httptest.NewServer(rcv)
			defer srv.Close()
			book, err := gateway.NewAddressBook([]gateway.Agent{
				{ID: "claude", Names: []string{"CLAUDE"}, Transport: "http", Address: srv.URL + "/claude"},
				{ID: "chatgpt", Names: []string{"CHATGPT"}, Transport: "http", Address: srv.URL + "/chatgpt"},
				{ID: "gemini", Names: []string{"GEMINI"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "ledger.db")
			open := func() (*gateway.Relay, *sqlite.Store) {
				st, err := sqlite.Open(ctx, path, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				return gateway.New(st, &gateway.Options{Book: book}), st
			}
			opts := &gateway.OutboundOptions{
				Senders:    map[string]transports.Sender{"http": httpx.Sender{Client: &httpx.Client{Retries: -1}}},
				MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, MaxAttempts: 1 << 30,
				HorizonEvery: time.Hour, // no tick saves it in this test
			}

			// Run 1.
			r, st := open()
			stop := runOutbound(t, r, opts)
			for i := range 3 {
				ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", fmt.Sprintf("before %d", i)))
			}
			if n := len(waitEvents(t, r, "g", gateway.KindDelivery, 3)); n != 3 {
				t.Fatalf("records = %d, want 3", n)
			}
			want := lastPos(t, st)
			if tt.down {
				rcv.setDown("/chatgpt", true)
			}
			ingest(t, r, "", env("GEMINI", "CHATGPT", "REQUEST", "g", "to chatgpt"))
			for i := range 3 {
				ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", fmt.Sprintf("after %d", i)))
			}
			records := 7
			if tt.down {
				records = 6
				for deadline := time.Now().Add(time.Minute); rcv.refusals() < 2; { // tried and in backoff
					if time.Now().After(deadline) {
						t.Fatalf("chatgpt's receiver refused %d times, want 2", rcv.refusals())
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			if n := len(waitEvents(t, r, "g", gateway.KindDelivery, records)); n != records {
				t.Fatalf("records = %d, want %d", n, records)
			}
			if !tt.down {
				want = lastPos(t, st)
			}
			for deadline := time.Now().Add(time.Minute); ; { // the follower has read every record
				now, saved := gateway.OutboundHorizon(r)
				if now == want {
					if saved != (ledger.Mark{}) {
						t.Fatalf("horizon saved before the stop: %+v", saved)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("dispatch horizon = %+v, want %+v", now, want)
				}
				time.Sleep(5 * time.Millisecond)
			}
			stop()
			if m, err := st.GetMark(ctx, gateway.OutboundHorizonName(r)); err != nil || m != want {
				t.Fatalf("saved horizon after the stop = %+v, %v; want %+v", m, err, want)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}

			// Run 2, on the same ledger file, every receiver up.
			rcv.setDown("/chatgpt", false)
			r, st = open()
			if m, err := st.GetMark(ctx, gateway.OutboundHorizonName(r)); err != nil || m != want {
				t.Fatalf("horizon in the reopened ledger = %+v, %v; want %+v", m, err, want)
			}
			stop = runOutbound(t, r, opts)
			defer stop()
			ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "after the restart"))
			if n := len(waitEvents(t, r, "g", gateway.KindDelivery, 8)); n != 8 {
				t.Fatalf("records after the restart = %d, want 8", n)
			}
			claude, gpt := rcv.deliveries("/claude"), rcv.deliveries("/chatgpt")
			if len(claude) != 7 || len(gpt) != 1 {
				t.Errorf("messages delivered: %d to claude, %d to chatgpt; want 7 and 1", len(claude), len(gpt))
			}
			for _, got := range []map[string]int{claude, gpt} {
				for id, n := range got {
					if n != 1 {
						t.Errorf("message %s delivered %d times, want once", id, n)
					}
				}
			}
		})
	}
}
