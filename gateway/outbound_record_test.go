package gateway_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/transports"
)

// deliveryRecordFails is a ledger whose first fail appends of a delivery
// record fail (a disk briefly full, a busy database).
type deliveryRecordFails struct {
	ledger.Store
	mu   sync.Mutex
	fail int
}

func (s *deliveryRecordFails) Append(ctx context.Context, recs []ledger.Record) ([]ledger.Result, error) {
	s.mu.Lock()
	if len(recs) > 0 && recs[0].Kind == gateway.KindDelivery && s.fail > 0 {
		s.fail--
		s.mu.Unlock()
		return nil, errors.New("disk full")
	}
	s.mu.Unlock()
	return s.Store.Append(ctx, recs)
}

// TestOutboundRecordRetried: when the ledger cannot record a delivery's
// final state, the record is tried again while the relay runs — it was
// left pending in memory until a restart, so `crosstalk log` showed the
// delivery pending for good and, for a failed one, the sender's notice
// never came — without sending the envelope again.
func TestOutboundRecordRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sender *recordingSender
		state  string
	}{
		{"delivered", &recordingSender{}, "delivered"},
		{"failed", &recordingSender{err: transports.ErrPermanent}, "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			flaky := &deliveryRecordFails{Store: st, fail: 2}
			book, err := gateway.NewAddressBook([]gateway.Agent{
				{ID: "claude", Names: []string{"CLAUDE"}, Transport: "folder", Address: "claude-out"},
				{ID: "gemini", Names: []string{"GEMINI"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			r := gateway.New(flaky, &gateway.Options{Book: book})
			stop := runOutbound(t, r, &gateway.OutboundOptions{
				Senders:    map[string]transports.Sender{"folder": tc.sender},
				MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond,
			})
			defer stop()
			ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "recorded at the third try"))
			evs := waitEvents(t, r, "g", gateway.KindDelivery, 1)
			if len(evs) != 1 {
				t.Fatalf("delivery records = %d, want 1", len(evs))
			}
			if d, _ := gateway.ParseData(evs[0]); d.State != tc.state {
				t.Errorf("delivery = %+v, want %s", d, tc.state)
			}
			if n := tc.sender.tries(); n != 1 {
				t.Errorf("Send called %d times, want 1: only the record is retried", n)
			}
			if tc.state == "failed" {
				if notes := waitEvents(t, r, "g", gateway.KindNotify, 1); len(notes) != 1 {
					t.Errorf("notices = %d, want 1", len(notes))
				}
			}
		})
	}
}

// hangFor is a Sender whose sends to one address hang until their
// context ends; the others are recorded.
type hangFor struct {
	addr string
	rec  *recordingSender
	hung *atomic.Int32 // sends hanging now
}

func (s hangFor) Send(ctx context.Context, to, id string, text []byte) error {
	if to == s.addr {
		s.hung.Add(1)
		defer s.hung.Add(-1)
		<-ctx.Done()
		return ctx.Err()
	}
	return s.rec.Send(ctx, to, id, text)
}

// TestOutboundHungReceiverDoesNotBlockOthers: a receiver whose endpoint
// hangs (a blackholed URL) holds at most half of its medium's slots, so
// deliveries to the other receivers on the same medium go on. Before, its
// queued envelopes took every slot for an attempt timeout each, ten
// attempts each, and every other agent on the medium waited.
func TestOutboundHungReceiverDoesNotBlockOthers(t *testing.T) {
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Transport: "http", Address: "http://hung.example.test/"},
		{ID: "chatgpt", Names: []string{"CHATGPT"}, Transport: "http", Address: "http://fine.example.test/"},
		{ID: "gemini", Names: []string{"GEMINI"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newRelay(t, &gateway.Options{Book: book})
	rec := &recordingSender{}
	var hung atomic.Int32
	stop := runOutbound(t, r, &gateway.OutboundOptions{
		Senders: map[string]transports.Sender{"http": hangFor{addr: "http://hung.example.test/", rec: rec, hung: &hung}},
		Workers: 2, AttemptTimeout: time.Hour,
	})
	defer stop()
	for range 3 {
		ingest(t, r, "", env("GEMINI", "CLAUDE", "REQUEST", "g", "stuck"))
	}
	// Wait until claude's sends hang (as many as the medium lets them).
	for deadline := time.Now().Add(10 * time.Second); hung.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no send to claude started")
		}
	}
	time.Sleep(100 * time.Millisecond) // let a second one take its slot, as it would before the fix
	ingest(t, r, "", env("GEMINI", "CHATGPT", "REQUEST", "g", "goes on"))
	if evs := waitEvents(t, r, "g", gateway.KindDelivery, 1); len(evs) != 1 || rec.count("http://fine.example.test/") != 1 {
		t.Fatalf("deliveries to chatgpt = %d records, %d sends; want 1 while claude's endpoint hangs", len(evs), rec.count("http://fine.example.test/"))
	}
}
