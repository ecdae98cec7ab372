package gateway_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TestReadAndDeliveryCursors: read and delivery are separate states per
// agent: a read never moves backwards nor moves the delivery cursor, a
// delivery ack never moves the read cursor, and chat.read is refused for
// a message the reader was never addressed (CCCS §6.3; issue #14).
func TestReadAndDeliveryCursors(t *testing.T) {
	r := newRelay(t, nil)
	ctx := context.Background()
	q1 := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "first"))[0].Event
	other := ingest(t, r, "", env("CHATGPT", "GEMINI", "REQUEST", "g", "for gemini"))[0].Event
	q3 := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "third"))[0].Event
	act := func(a gateway.Action, id string) (gateway.ActionResult, error) {
		return r.Act(ctx, gateway.ActionRequest{Action: a, Group: "g", EventID: id, Actor: "claude"})
	}
	if _, err := act(gateway.ActionRead, other.ID); !isCode(err, gateway.CodePermission) {
		t.Errorf("claude reads gemini's message = %v, want permission_denied", err)
	}
	if res, err := act(gateway.ActionRead, q3.ID); err != nil || res.Cursor.Seq != q3.Seq {
		t.Fatalf("read of the newest = %+v, %v", res.Cursor, err)
	}
	res, err := act(gateway.ActionRead, q1.ID)
	if err != nil || res.Cursor.Seq != q3.Seq {
		t.Errorf("read of an older event = cursor %+v, %v, want it left at seq %d", res.Cursor, err, q3.Seq)
	}
	if _, err := r.DeliveryCursor(ctx, "g", "claude"); !isNotFound(err) {
		t.Errorf("delivery cursor after reads = %v, want none", err)
	}
	if res, err := act(gateway.ActionDelivered, q1.ID); err != nil || res.Cursor.Seq != q1.Seq || res.Event.ID != "" {
		t.Errorf("delivered q1 = %+v, %v, want cursor seq %d and no ledger event", res, err, q1.Seq)
	}
	if res, err := act(gateway.ActionDelivered, q3.ID); err != nil || res.Cursor.Seq != q3.Seq {
		t.Errorf("delivered q3 = %+v, %v", res.Cursor, err)
	}
	if res, err := act(gateway.ActionDelivered, q1.ID); err != nil || res.Cursor.Seq != q3.Seq {
		t.Errorf("delivered q1 again = %+v, %v, want the cursor left at seq %d", res.Cursor, err, q3.Seq)
	}
	if c, err := r.Store().GetCursor(ctx, "g", "claude"); err != nil || c.Seq != q3.Seq {
		t.Errorf("read cursor = %+v, %v, want seq %d", c, err, q3.Seq)
	}
	// The ledger holds one chat.read per read gesture, none per delivery.
	reads, err := r.Store().Range(ctx, "g", 0, []string{gateway.KindRead}, 0)
	if err != nil || len(reads) != 2 {
		t.Errorf("chat.read events = %d, %v, want 2", len(reads), err)
	}
}

func isNotFound(err error) bool { return errors.Is(err, ledger.ErrNotFound) }

// TestReadCursorConcurrent: reads marked concurrently, in any order,
// leave the read cursor at the newest of them.
func TestReadCursorConcurrent(t *testing.T) {
	r := newRelay(t, nil)
	ctx := context.Background()
	var evs []ledger.Event
	for range 8 {
		evs = append(evs, ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "q"))[0].Event)
	}
	var wg sync.WaitGroup
	for _, i := range []int{3, 7, 0, 5, 1, 6, 2, 4} {
		wg.Go(func() {
			if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionRead, Group: "g", EventID: evs[i].ID, Actor: "claude"}); err != nil {
				t.Errorf("read %d = %v", i, err)
			}
		})
	}
	wg.Wait()
	if c, err := r.Store().GetCursor(ctx, "g", "claude"); err != nil || c.Seq != evs[7].Seq {
		t.Errorf("read cursor = %+v, %v, want seq %d", c, err, evs[7].Seq)
	}
}
