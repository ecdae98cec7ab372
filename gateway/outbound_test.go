package gateway_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/transports"
)

// recordingSender is a Sender that records deliveries and fails the first
// failures calls.
type recordingSender struct {
	mu       sync.Mutex
	sent     map[string][]string // address → message ids
	texts    []string
	failures int
	err      error
	attempts int // every Send call, failed or not
}

func (s *recordingSender) Send(ctx context.Context, to, id string, text []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if s.failures > 0 {
		s.failures--
		return errors.New("medium down")
	}
	if s.err != nil {
		return s.err
	}
	if s.sent == nil {
		s.sent = map[string][]string{}
	}
	s.sent[to] = append(s.sent[to], id)
	s.texts = append(s.texts, string(text))
	return nil
}

func (s *recordingSender) tries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

func (s *recordingSender) count(to string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent[to])
}

func routedRelay(t *testing.T) *gateway.Relay {
	t.Helper()
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Transport: "folder", Address: "claude-out"},
		{ID: "chatgpt", Names: []string{"CHATGPT"}, Transport: "mail", Address: "gpt@example.test"},
		{ID: "gemini", Names: []string{"GEMINI"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return newRelay(t, &gateway.Options{Book: book})
}

func runOutbound(t *testing.T, r *gateway.Relay, opts *gateway.OutboundOptions) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.RunOutbound(ctx, opts) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunOutbound = %v", err)
		}
	}
}

func waitEvents(t *testing.T, r *gateway.Relay, group, kind string, n int) []ledger.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, err := r.Store().Range(context.Background(), group, 0, []string{kind}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) >= n || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestOutboundDeliversWithRetries(t *testing.T) {
	r := routedRelay(t)
	folder := &recordingSender{failures: 2}
	mail := &recordingSender{}
	stop := runOutbound(t, r, &gateway.OutboundOptions{
		Senders:    map[string]transports.Sender{"folder": folder, "mail": mail},
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
	})
	defer stop()
	ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "to claude"))
	ingest(t, r, "", env("GEMINI", "ALL", "BROADCAST", "g", "to everyone"))
	ingest(t, r, "", env("GEMINI", "GEMINI", "REQUEST", "g", "no transport: pulled over the API"))
	evs := waitEvents(t, r, "g", gateway.KindDelivery, 3)
	if len(evs) != 3 {
		t.Fatalf("delivery records = %d, want 3 (claude ×2, chatgpt ×1)", len(evs))
	}
	for _, ev := range evs {
		if d, _ := gateway.ParseData(ev); d.State != "delivered" {
			t.Errorf("delivery %+v, want delivered", d)
		}
	}
	if folder.count("claude-out") != 2 || mail.count("gpt@example.test") != 1 {
		t.Errorf("sent folder %v mail %v", folder.sent, mail.sent)
	}
	// Unsigned envelopes gain an X-Route hop.
	if !strings.Contains(mail.texts[0], "X-Route: GEMINI → relay://system") {
		t.Errorf("outbound text lacks the X-Route hop:\n%s", mail.texts[0])
	}
}

func TestOutboundFailsForGood(t *testing.T) {
	r := routedRelay(t)
	folder := &recordingSender{err: errors.New("disk full")}
	stop := runOutbound(t, r, &gateway.OutboundOptions{
		Senders:    map[string]transports.Sender{"folder": folder},
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, MaxAttempts: 3,
	})
	defer stop()
	ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "doomed"))
	// chatgpt has transport "mail", which this relay lacks: permanent.
	ingest(t, r, "", env("GEMINI", "CHATGPT", "REQUEST", "g", "no mail here"))
	evs := waitEvents(t, r, "g", gateway.KindDelivery, 2)
	if len(evs) != 2 {
		t.Fatalf("delivery records = %d, want 2", len(evs))
	}
	for _, ev := range evs {
		d, _ := gateway.ParseData(ev)
		if d.State != "failed" {
			t.Errorf("delivery = %+v, want failed", d)
		}
	}
	notes := waitEvents(t, r, "g", gateway.KindNotify, 2)
	for _, ev := range notes {
		d, _ := gateway.ParseData(ev)
		if d.Kind != "error" || !strings.Contains(d.Title, string(envelope.CodeRoute)) || d.TargetActorID != "gemini" {
			t.Errorf("notice = %+v, want an E-ROUTE error for gemini", d)
		}
	}
}

// TestOutboundResumesAfterRestart: a dispatcher stopped mid-retry leaves
// the delivery pending in the ledger; the next one delivers it once.
func TestOutboundResumesAfterRestart(t *testing.T) {
	r := routedRelay(t)
	down := &recordingSender{err: errors.New("medium down")}
	stop := runOutbound(t, r, &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": down}, MinBackoff: time.Hour})
	ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "pending across a restart"))
	for deadline := time.Now().Add(10 * time.Second); down.tries() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first dispatcher never tried to send")
		}
	}
	stop() // mid-retry: the next attempt is an hour away
	if evs := waitEvents(t, r, "g", gateway.KindDelivery, 0); len(evs) != 0 {
		t.Fatalf("delivery records before restart = %d, want 0", len(evs))
	}
	up := &recordingSender{}
	for i := 0; i < 2; i++ { // two restarts: the second must not resend
		stop = runOutbound(t, r, &gateway.OutboundOptions{Senders: map[string]transports.Sender{"folder": up}})
		waitEvents(t, r, "g", gateway.KindDelivery, 1)
		time.Sleep(100 * time.Millisecond)
		stop()
	}
	if n := up.count("claude-out"); n != 1 {
		t.Errorf("sent %d times after restarts, want 1", n)
	}
}

// hangingSender blocks every Send until its context ends.
type hangingSender struct{}

func (hangingSender) Send(ctx context.Context, to, id string, text []byte) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestOutboundHungTransportDoesNotBlockOthers: a medium whose sends hang
// holds only its own slots; deliveries over other media go on.
func TestOutboundHungTransportDoesNotBlockOthers(t *testing.T) {
	r := routedRelay(t)
	folder := &recordingSender{}
	stop := runOutbound(t, r, &gateway.OutboundOptions{
		Senders: map[string]transports.Sender{"folder": folder, "mail": hangingSender{}},
		Workers: 1, AttemptTimeout: time.Hour,
	})
	defer stop()
	for i := 0; i < 3; i++ {
		ingest(t, r, "", env("GEMINI", "CHATGPT", "REQUEST", "g", "stuck in mail"))
	}
	ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "goes by folder"))
	if evs := waitEvents(t, r, "g", gateway.KindDelivery, 1); len(evs) != 1 || folder.count("claude-out") != 1 {
		t.Fatalf("folder deliveries = %d records, %d sends; want 1 while mail hangs", len(evs), folder.count("claude-out"))
	}
}
