// Package transporttest is the conformance suite every transport passes
// (issue 5): delivery, ordering where the medium has it, duplicate
// suppression, replies on the way back, and shutdown without loss. Like
// fstest.TestFS it runs against a real medium given by a Harness: a temp
// directory, an Xvfb clipboard, a Dovecot mailbox.
package transporttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/transports"
)

// Harness is one transport under test and its medium.
type Harness struct {
	// New returns a fresh Receiver and Sender on the same medium, sharing
	// whatever state makes restarts safe (a state dir, a UID store).
	// It is called again to simulate a restart.
	New func(t *testing.T) (transports.Receiver, transports.Sender)
	// Put places text on the medium as an outside party would: writes a
	// file into the watched folder, sends a mail to the watched mailbox,
	// copies to the clipboard.
	Put func(ctx context.Context, t *testing.T, text []byte) error
	// Address is an address Send delivers to that the same medium's
	// Receiver reads (a loop), or "" when sending cannot be observed by
	// the Receiver; Fetch is then used instead.
	Address string
	// Fetch returns the texts delivered by Send to Address, when the
	// Receiver does not watch Address (e.g. folder outbox). Nil otherwise.
	Fetch func(ctx context.Context, t *testing.T) [][]byte
	// Ordered reports that the medium keeps order (a folder does not
	// promise it; a mailbox does by UID; the clipboard by time).
	Ordered bool
	// Replies reports that the medium has a way back (CanReply), and
	// Replied returns the replies delivered so far.
	Replies bool
	Replied func(ctx context.Context, t *testing.T) [][]byte
	// Settle is how long to wait for the medium to show a change; a
	// second by default.
	Settle time.Duration
	// Serial marks media with one slot (the clipboard): Put waits until
	// the previous text was received before the next.
	Serial bool
}

// envelopeText returns a small canonical envelope with a unique message id.
func envelopeText(i int) ([]byte, string) {
	e := envelope.New("TESTER", "RELAY", envelope.IntentRequest, fmt.Sprintf("conformance message %d", i))
	e.Context = "conformance"
	b, err := envelope.Marshal(e)
	if err != nil {
		panic(err)
	}
	return b, e.Message
}

// collector is a Handler that records what it got.
type collector struct {
	mu    sync.Mutex
	got   []transports.Inbound
	fail  int // fail this many calls first
	reply bool
	ch    chan struct{}
}

func newCollector() *collector { return &collector{ch: make(chan struct{}, 1000)} }

func (c *collector) handle(ctx context.Context, in transports.Inbound) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail > 0 {
		c.fail--
		return nil, errors.New("transporttest: handler failure (not recorded)")
	}
	c.got = append(c.got, in)
	c.ch <- struct{}{}
	if c.reply && in.CanReply {
		return []byte("[[RELAY→TESTER v1]]\nintent: ACK\n\nbody: |\n  recorded " + in.Source + "\nsig: none\n[[END]]\n"), nil
	}
	return nil, nil
}

// messages returns the message ids found in everything received, in order.
func (c *collector) messages() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for _, in := range c.got {
		ids = append(ids, messageIDs(in.Data)...)
	}
	return ids
}

func messageIDs(data []byte) []string {
	var ids []string
	r := envelope.NewReader(bytes.NewReader(data))
	for {
		e, err := r.Next()
		if err != nil {
			if errors.Is(err, errEOF) {
				return ids
			}
			if _, ok := err.(*envelope.SyntaxError); ok {
				continue
			}
			return ids
		}
		ids = append(ids, e.Message)
	}
}

// waitFor waits until the collector has n messages or the deadline passes.
func (c *collector) waitFor(n int, d time.Duration) []string {
	deadline := time.After(d)
	for {
		if ids := c.messages(); len(ids) >= n {
			return ids
		}
		select {
		case <-c.ch:
		case <-deadline:
			return c.messages()
		}
	}
}

// start runs a receiver in the background; stop cancels it and waits.
func start(t *testing.T, r transports.Receiver, h transports.Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Receive(ctx, h) }()
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Receive returned %v after cancel, want nil", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("Receive did not return within 15s of cancel")
		}
	}
}

var errEOF = io.EOF

func (h *Harness) settle() time.Duration {
	if h.Settle > 0 {
		return h.Settle
	}
	return time.Second
}

// put places n envelopes on the medium and returns their message ids.
func (h *Harness) put(t *testing.T, c *collector, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		text, id := envelopeText(i)
		// Count before the Put: a fast medium may deliver the text before
		// Put returns, and counting after it would wait for a message
		// that never comes.
		var before int
		if c != nil {
			before = len(c.messages())
		}
		if err := h.Put(context.Background(), t, text); err != nil {
			t.Fatalf("Put(%d) = %v", i, err)
		}
		ids = append(ids, id)
		if h.Serial && c != nil {
			c.waitFor(before+1, 10*h.settle())
		}
	}
	return ids
}

// Run runs the conformance suite against h.
func Run(t *testing.T, h Harness) {
	t.Run("Delivery", func(t *testing.T) {
		r, _ := h.New(t)
		c := newCollector()
		stop := start(t, r, c.handle)
		want := h.put(t, c, 1)
		got := c.waitFor(1, 10*h.settle())
		stop()
		if len(got) != 1 || got[0] != want[0] {
			t.Fatalf("received %v, want %v", got, want)
		}
		if c.got[0].Transport == "" || c.got[0].Source == "" {
			t.Errorf("Inbound = %+v, want Transport and Source set", c.got[0])
		}
	})
	t.Run("SeveralAndOrder", func(t *testing.T) {
		r, _ := h.New(t)
		c := newCollector()
		stop := start(t, r, c.handle)
		want := h.put(t, c, 5)
		got := c.waitFor(5, 20*h.settle())
		stop()
		if len(got) != 5 {
			t.Fatalf("received %d envelopes %v, want 5", len(got), got)
		}
		if h.Ordered && fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("order = %v, want %v", got, want)
		}
		if !sameSet(got, want) {
			t.Errorf("received %v, want %v", got, want)
		}
	})
	t.Run("NoDuplicatesAcrossRestart", func(t *testing.T) {
		r, _ := h.New(t)
		c := newCollector()
		stop := start(t, r, c.handle)
		want := h.put(t, c, 2)
		c.waitFor(2, 10*h.settle())
		time.Sleep(h.settle())
		stop()
		// A new receiver on the same medium and state must not offer the
		// processed texts again.
		r2, _ := h.New(t)
		c2 := newCollector()
		stop2 := start(t, r2, c2.handle)
		time.Sleep(2 * h.settle())
		stop2()
		if got := c.messages(); !sameSet(got, want) {
			t.Errorf("first run received %v, want %v once each", got, want)
		}
		if got := c2.messages(); len(got) != 0 {
			t.Errorf("after restart received %v again, want nothing", got)
		}
	})
	t.Run("HandlerFailureLosesNothing", func(t *testing.T) {
		r, _ := h.New(t)
		c := newCollector()
		c.fail = 1
		stop := start(t, r, c.handle)
		want := h.put(t, nil, 1)
		got := c.waitFor(1, 3*h.settle())
		stop()
		if len(got) == 0 {
			// Not retried within the run: a restart must offer it.
			r2, _ := h.New(t)
			stop2 := start(t, r2, c.handle)
			got = c.waitFor(1, 10*h.settle())
			stop2()
		}
		if len(got) != 1 || got[0] != want[0] {
			t.Fatalf("after a failed handler call received %v, want %v", got, want)
		}
	})
	if h.Replies {
		t.Run("Reply", func(t *testing.T) {
			r, _ := h.New(t)
			c := newCollector()
			c.reply = true
			stop := start(t, r, c.handle)
			h.put(t, c, 1)
			c.waitFor(1, 10*h.settle())
			var replies [][]byte
			deadline := time.Now().Add(10 * h.settle())
			for time.Now().Before(deadline) {
				if replies = h.Replied(context.Background(), t); len(replies) > 0 {
					break
				}
				time.Sleep(h.settle() / 10)
			}
			stop()
			if len(replies) == 0 || !bytes.Contains(replies[0], []byte("intent: ACK")) {
				t.Fatalf("replies = %q, want the handler's ACK", replies)
			}
		})
	}
	t.Run("Send", func(t *testing.T) {
		r, s := h.New(t)
		text, id := envelopeText(99)
		if err := s.Send(context.Background(), h.sendAddress(), id, text); err != nil {
			t.Fatalf("Send = %v", err)
		}
		if h.Fetch != nil {
			// What Send delivered may show a moment after it returns,
			// and until then the medium may still show what was there
			// before (the clipboard: xclip's forked child takes the
			// selection just after xclip -i exits): fetch until the
			// sent envelope is there, last.
			var got []string
			deadline := time.Now().Add(10 * h.settle())
			for time.Now().Before(deadline) {
				got = nil
				for _, b := range h.Fetch(context.Background(), t) {
					got = append(got, messageIDs(b)...)
				}
				if len(got) > 0 && got[len(got)-1] == id {
					break
				}
				time.Sleep(h.settle() / 10)
			}
			if len(got) == 0 || got[len(got)-1] != id {
				t.Fatalf("fetched %v after Send, want %s", got, id)
			}
			return
		}
		c := newCollector()
		stop := start(t, r, c.handle)
		got := c.waitFor(1, 10*h.settle())
		stop()
		if len(got) == 0 || got[len(got)-1] != id {
			t.Fatalf("received %v after Send, want %s", got, id)
		}
	})
}

func (h *Harness) sendAddress() string { return h.Address }

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}
