package httpx

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/transports"
)

// TestBadURL: a URL without http:// or https:// ("127.0.0.1:7777", a typo
// a user makes with crosstalk send --relay) fails at once, without the
// retries meant for a relay that is briefly down, and is a permanent
// failure for outbound delivery.
func TestBadURL(t *testing.T) {
	c := &Client{Retries: 3, MinBackoff: time.Hour}
	for _, url := range []string{"127.0.0.1:7777", "localhost:7777/crosstalk/receive", "htp://127.0.0.1:7777", "http://", ""} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.Post(ctx, url, []byte("text"), "")
		cancel()
		if !errors.Is(err, ErrBadURL) || resp != nil {
			t.Errorf("Post(%q) = %v, %v; want ErrBadURL at once", url, resp, err)
		}
		if err := (Sender{Client: c}).Send(context.Background(), url, "01M80ZE85N0YRPSJ6Z7H0NVPCX", []byte("text")); !errors.Is(err, transports.ErrPermanent) {
			t.Errorf("Send(%q) = %v, want ErrPermanent", url, err)
		}
	}
}
