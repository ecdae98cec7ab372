package channel

import (
	"context"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
)

// pagedBackend holds n deliveries of one group and records the largest
// read asked of it.
type pagedBackend struct {
	c2a.Backend
	n, largest int
}

func (b *pagedBackend) Deliveries(_ context.Context, _, _ string, since int64, limit int) ([]gateway.Delivery, error) {
	if limit <= 0 || limit > b.n {
		limit = b.n
	}
	b.largest = max(b.largest, limit)
	var out []gateway.Delivery
	for seq := since + 1; seq <= int64(b.n) && len(out) < limit; seq++ {
		var d gateway.Delivery
		d.Seq, d.Group = seq, "g"
		out = append(out, d)
	}
	return out, nil
}

// TestBacklogCountedInPages: a harness asking for progress on a relay
// with a long backlog gets it counted whole, a page at a time, not read
// into memory at once.
func TestBacklogCountedInPages(t *testing.T) {
	b := &pagedBackend{n: 2*backlogPage + 7}
	s := newSession(t.Context(), discardConn{}, Options{Agent: "claude", Backend: b})
	defer s.cancel()
	n, err := s.countBacklog("g", 5)
	if err != nil || n != b.n-5 {
		t.Fatalf("countBacklog = %d, %v; want %d", n, err, b.n-5)
	}
	if b.largest > backlogPage {
		t.Errorf("a read of %d deliveries at once, want at most %d", b.largest, backlogPage)
	}
}
