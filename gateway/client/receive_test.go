package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/client"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestReceive posts envelope text to a real in-process relay: receipts on
// a 200, the same receipt when the text is posted again, and the ERROR
// envelope's code as a *client.Error with the receipts on a refusal.
func TestReceive(t *testing.T) {
	r := testrelay.Start(t, nil)
	c := &client.Client{URL: r.URL}
	text := []byte(testrelay.Envelope("claude", "chatgpt", "ASK", "", "hello"))

	first, err := c.Receive(t.Context(), text)
	if err != nil || first.Status != http.StatusOK || len(first.Envelopes) != 1 {
		t.Fatalf("Receive() = %+v, %v; want 200 with one receipt", first, err)
	}
	id, _ := first.Envelopes[0].MetaValue("receipt", "Event-ID")
	if id == "" {
		t.Fatalf("receipt %q has no Event-ID", first.Body)
	}
	again, err := c.Receive(t.Context(), text)
	if err != nil || len(again.Envelopes) != 1 {
		t.Fatalf("Receive(again) = %+v, %v", again, err)
	}
	if id2, _ := again.Envelopes[0].MetaValue("receipt", "Event-ID"); id2 != id {
		t.Errorf("second post recorded as %q, want the first event %q", id2, id)
	}

	bad, err := c.Receive(t.Context(), []byte("[[CLAUDE→CHATGPT v1]]\nno header\n[[END]]\n"))
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status < 400 || ce.Code == "" || bad == nil || len(bad.Body) == 0 {
		t.Errorf("Receive(malformed) = %+v, %v; want the receipts and a *client.Error with a code", bad, err)
	}
}

// TestReceiveRetries: a 503 is retried Retries times and ends as a
// *StatusError with the last answer; a network error is ErrUnreachable.
func TestReceiveRetries(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Idempotency-Key") == "" || r.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			http.Error(w, "headers", http.StatusBadRequest)
			return
		}
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	rc, err := (&client.Client{URL: srv.URL, Retries: 2}).Receive(t.Context(), []byte("text"))
	var se *client.StatusError
	if !errors.As(err, &se) || se.Status != 503 || rc == nil || rc.Status != 503 || calls.Load() != 3 {
		t.Errorf("Receive(503) = %+v, %v after %d calls; want *StatusError 503 after 3", rc, err, calls.Load())
	}
	rc, err = (&client.Client{URL: "http://127.0.0.1:1", Retries: -1}).Receive(t.Context(), []byte("text"))
	if !errors.Is(err, client.ErrUnreachable) || rc != nil {
		t.Errorf("Receive(unreachable) = %+v, %v; want nil, ErrUnreachable", rc, err)
	}
}
