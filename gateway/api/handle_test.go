package api_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TestHandleStreamsCount: a handler mounted with Handle that answers for
// long (the A2A bridge's calls) takes a stream slot with OpenStream like
// the API's own streams; over the limit it is 429 E-RATE, and Close ends
// it.
func TestHandleStreamsCount(t *testing.T) {
	opened := make(chan struct{}, 2)
	h := newHarness(t, &api.Options{StreamLimit: 1, MaxStreams: 4}, func(a *api.Server, _ ledger.Store) {
		a.Handle("GET /x/long", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, done, ok := api.OpenStream(w, r)
			if !ok {
				return
			}
			defer done()
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			opened <- struct{}{}
			<-ctx.Done()
		}))
	})
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", h.srv.URL+"/x/long", nil)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		first <- err
	}()
	<-opened
	status, body := h.do("GET", "/x/long", "")
	if status != http.StatusTooManyRequests {
		t.Fatalf("second long call of the local user = %d %s, want 429 (stream_limit 1)", status, body)
	}
	cancel()
	<-first
	// The first call's slot is free again once the server has seen it
	// end (which takes a moment after the client hangs up): a new call is
	// 429 until then, then served.
	go func() {
		for t.Context().Err() == nil {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", h.srv.URL+"/x/long", nil)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			res.Body.Close()
			if res.StatusCode != http.StatusTooManyRequests {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	select {
	case <-opened:
	case <-time.After(10 * time.Second):
		t.Fatal("a long call after the first ended was not served within 10 s")
	}
}
