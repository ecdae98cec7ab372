package httpx

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/crosstalk-go/crosstalk/transports"
)

// TestRedirectNotFollowed: a receiver answering a POST with a redirect is
// not followed. Go's client turns a POST into a bodiless GET on 301, 302
// and 303 — a 200 from the target then counted as "delivered" although the
// envelope reached no one — and re-posts the envelope to whatever host a
// 307/308 names. The redirect is a final, permanent answer that names the
// Location, and the other host sees nothing.
func TestRedirectNotFollowed(t *testing.T) {
	var hits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("welcome"))
	}))
	defer other.Close()
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			hits.Store(0)
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+"/elsewhere", code)
			}))
			defer rcv.Close()
			c := &Client{Retries: -1}
			resp, err := c.Post(context.Background(), rcv.URL+"/crosstalk/receive", []byte("text"), "")
			var se *StatusError
			if !errors.As(err, &se) || se.Status != code || resp == nil || resp.Status != code {
				t.Fatalf("Post = %+v, %v; want a StatusError %d", resp, err, code)
			}
			if !strings.Contains(err.Error(), other.URL+"/elsewhere") {
				t.Errorf("error %q does not name the redirect's target", err)
			}
			err = Sender{Client: c}.Send(context.Background(), rcv.URL+"/crosstalk/receive", "01M80ZE85N0YRPSJ6Z7H0NVPCX", []byte("text"))
			if !errors.Is(err, transports.ErrPermanent) {
				t.Errorf("Send = %v, want ErrPermanent", err)
			}
			if n := hits.Load(); n != 0 {
				t.Errorf("the redirect's target got %d requests, want 0", n)
			}
		})
	}
}
