package gateway_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/transports"
	"github.com/crosstalk-go/crosstalk/transports/httpx"
)

// TestRelayToRelayKeepsIDAndRoute: an envelope relay A passes on to relay
// B over HTTP keeps its message id there (one event per id, whichever
// relay), and B records where it came from: A's hop at the end of its
// route, and A's address as its source.
func TestRelayToRelayKeepsIDAndRoute(t *testing.T) {
	b := newRelay(t, nil)
	srv := httptest.NewServer(api.New(b, nil))
	t.Cleanup(srv.Close)
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Transport: "http", Address: srv.URL + "/crosstalk/receive"},
		{ID: "gemini", Names: []string{"GEMINI"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := newRelay(t, &gateway.Options{Book: book, Name: "relay-a"})
	stop := runOutbound(t, a, &gateway.OutboundOptions{Senders: map[string]transports.Sender{"http": httpx.Sender{}},
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond})
	defer stop()
	sent := ingest(t, a, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "across relays"))[0]
	if d := waitEvents(t, a, "g", gateway.KindDelivery, 1); len(d) != 1 {
		t.Fatalf("relay A delivery records = %d, want 1", len(d))
	}
	got := waitEvents(t, b, "g", gateway.KindMessage, 1)
	if len(got) != 1 {
		t.Fatalf("relay B messages = %d, want 1", len(got))
	}
	d := data(t, got[0])
	if d.X.Envelope.Message != sent.Envelope.Message {
		t.Errorf("message id on relay B = %s, want A's %s", d.X.Envelope.Message, sent.Envelope.Message)
	}
	if n := len(d.X.Route); n == 0 || d.X.Route[n-1] != "relay://relay-a" || d.X.Route[0] != "GEMINI" {
		t.Errorf("route on relay B = %q, want GEMINI … relay://relay-a", d.X.Route)
	}
	if !strings.HasPrefix(d.X.Source, "127.0.0.1:") || d.X.Transport != "http" && d.X.Transport != "api" {
		t.Errorf("relay B recorded source %q over %q, want A's loopback address", d.X.Source, d.X.Transport)
	}
}
