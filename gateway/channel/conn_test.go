package channel_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/crosstalk-go/crosstalk/gateway/channel"
)

// TestWebSocketCloseReason: a close reason is cut to fit a control frame
// without splitting a character (RFC 6455 §5.5.1: the reason is UTF-8; a
// browser fails a connection whose reason is not, losing the code).
func TestWebSocketCloseReason(t *testing.T) {
	reason := strings.Repeat("a", 119) + "é and more after the cut"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		channel.NewWebSocketConn(c, 0).Close(reason)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	_, _, err = c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("Read() = %v, want a close frame", err)
	}
	if ce.Code != websocket.StatusNormalClosure || !utf8.ValidString(ce.Reason) || !strings.HasPrefix(reason, ce.Reason) || len(ce.Reason) < 119 {
		t.Errorf("close = %d %q, want 1000 with the reason cut before the split character", ce.Code, ce.Reason)
	}
}
