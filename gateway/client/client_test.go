package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/client"
)

func TestDoErrors(t *testing.T) {
	var calls atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ok", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("X-Crosstalk-Agent") != "claude" {
			http.Error(w, "headers", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, `{"n":7}`)
	})
	mux.HandleFunc("GET /refused", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"error":{"code":"permission_denied","message":"not yours"}}`)
	})
	mux.HandleFunc("GET /broken", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	mux.HandleFunc("POST /broken", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &client.Client{URL: srv.URL, Token: "tok", Retries: 2}

	var out struct{ N int }
	if err := c.Do(t.Context(), client.Request{Method: "GET", Path: "/ok", Agent: "claude"}, &out); err != nil || out.N != 7 {
		t.Errorf("Do(/ok) = %v, %+v; want n 7", err, out)
	}
	var ce *client.Error
	if err := c.Do(t.Context(), client.Request{Method: "GET", Path: "/refused", Retry: true}, nil); !errors.As(err, &ce) || ce.Code != "permission_denied" || ce.Status != 403 {
		t.Errorf("Do(/refused) = %v, want *client.Error permission_denied 403", err)
	}
	if err := c.Do(t.Context(), client.Request{Method: "GET", Path: "/none"}, nil); !errors.Is(err, client.ErrNotServed) {
		t.Errorf("Do(/none) = %v, want ErrNotServed", err)
	}
	var se *client.StatusError
	for _, tc := range []struct {
		retry bool
		calls int64
	}{{true, 3}, {false, 1}} {
		calls.Store(0)
		err := c.Do(t.Context(), client.Request{Method: "POST", Path: "/broken", Retry: tc.retry}, nil)
		if !errors.As(err, &se) || se.Status != 500 || calls.Load() != tc.calls {
			t.Errorf("Do(/broken, retry %v) = %v after %d calls, want *StatusError 500 after %d", tc.retry, err, calls.Load(), tc.calls)
		}
	}
	dead := &client.Client{URL: "http://127.0.0.1:1", Retries: -1}
	if err := dead.Do(t.Context(), client.Request{Method: "GET", Path: "/", Retry: true}, nil); !errors.Is(err, client.ErrUnreachable) {
		t.Errorf("Do(unreachable) = %v, want ErrUnreachable", err)
	}
}

// TestStreamErrorEvent: an `event: error` ends the stream with the
// relay's code; a stream that just ends is ErrStreamEnded.
func TestStreamErrorEvent(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /fails", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "event: event\ndata: {\"seq\":1}\n\n: heartbeat\n\nevent: error\ndata: {\"code\":\"daemon_unavailable\",\"message\":\"ledger\"}\n\n")
	})
	mux.HandleFunc("GET /ends", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "event: event\ndata: {\"seq\":1}\n\n")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &client.Client{URL: srv.URL}
	var got []string
	err := c.Stream(t.Context(), "/fails", "", func(event string, data []byte) error {
		got = append(got, event+" "+string(data))
		return nil
	})
	var se *client.StreamError
	if !errors.As(err, &se) || se.Code != "daemon_unavailable" || len(got) != 1 {
		t.Errorf("Stream(/fails) = %v after %q, want *StreamError daemon_unavailable after one event", err, got)
	}
	if err := c.Stream(t.Context(), "/ends", "", func(string, []byte) error { return nil }); !errors.Is(err, client.ErrStreamEnded) {
		t.Errorf("Stream(/ends) = %v, want ErrStreamEnded", err)
	}
}

// TestFollowGivesUp: Follow reconnects to a stream the relay ends,
// resuming where path says, and gives up once the relay is gone for
// longer than the reconnect bound; an interrupt (ctx) returns nil.
func TestFollowGivesUp(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := conns.Add(1)
		fmt.Fprintf(w, "event: event\ndata: {\"since\":%q,\"conn\":%d}\n\n", r.URL.Query().Get("since"), n)
	}))
	c := &client.Client{URL: srv.URL}
	seen := 0
	path := func() string { return fmt.Sprintf("/s?since=%d", seen) }
	ctx, cancel := context.WithCancel(t.Context())
	err := c.Follow(ctx, path, "", time.Second, func(event string, data []byte) error {
		seen++
		if seen == 3 {
			srv.Close() // the relay goes away for good
		}
		return nil
	})
	cancel()
	if !errors.Is(err, client.ErrUnreachable) && !errors.Is(err, client.ErrStreamEnded) {
		t.Errorf("Follow() after the relay went away = %v, want it to give up with ErrUnreachable", err)
	}
	if seen < 3 {
		t.Errorf("Follow() saw %d events, want 3 (it reconnects after each ended stream)", seen)
	}

	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "event: event\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv2.Close()
	ctx, cancel = context.WithCancel(t.Context())
	err = (&client.Client{URL: srv2.URL}).Follow(ctx, func() string { return "/" }, "", time.Second, func(string, []byte) error {
		cancel()
		return nil
	})
	if err != nil {
		t.Errorf("Follow() interrupted = %v, want nil", err)
	}
}
