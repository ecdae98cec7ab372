package api

import (
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// stalledBody yields a few bytes, then fails as a connection whose client
// stopped sending does at its read deadline.
type stalledBody struct{ r io.Reader }

func (b *stalledBody) Read(p []byte) (int, error) {
	if n, _ := b.r.Read(p); n > 0 {
		return n, nil
	}
	return 0, io.ErrUnexpectedEOF
}

// TestDeclaredLengthIsNotPreallocated: a request that declares a body of
// max_body bytes and sends ten makes the relay hold about ten bytes, not
// max_body: the memory a slow or stalled client ties up is what it has
// sent (docs/security.md, "Limits").
func TestDeclaredLengthIsNotPreallocated(t *testing.T) {
	const declared = 8 << 20
	for _, limit := range []int64{declared, maxJSONBody} {
		req := httptest.NewRequest("POST", "/crosstalk/receive", nil)
		req.Body = io.NopCloser(&stalledBody{r: strings.NewReader("0123456789")})
		req.ContentLength = min(declared, limit)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b, err := readBody(req, limit)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatalf("readBody(stalled, %d) = %d bytes, nil error; want the read error", limit, len(b))
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
			t.Errorf("readBody of a body declared %d bytes that sent 10 allocated %d bytes, want it to grow with what arrives", req.ContentLength, got)
		}
	}
}
