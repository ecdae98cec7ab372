package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/signing"
)

// readCounter counts the events a ledger's reads return (n), and those
// of its reads of one group (ranged).
type readCounter struct {
	ledger.Store
	n, ranged atomic.Int64
}

func (c *readCounter) Range(ctx context.Context, group string, since int64, kinds []string, limit int) ([]ledger.Event, error) {
	evs, err := c.Store.Range(ctx, group, since, kinds, limit)
	c.n.Add(int64(len(evs)))
	c.ranged.Add(int64(len(evs)))
	return evs, err
}

func (c *readCounter) Log(ctx context.Context, after int64, limit int) ([]ledger.Logged, error) {
	ls, err := c.Store.Log(ctx, after, limit)
	c.n.Add(int64(len(ls)))
	return ls, err
}

func (c *readCounter) LogBefore(ctx context.Context, before int64, limit int) ([]ledger.Logged, error) {
	ls, err := c.Store.LogBefore(ctx, before, limit)
	c.n.Add(int64(len(ls)))
	return ls, err
}

// TestTrustPageReadsIndependentOfHistory opens the trust page of a relay
// whose only first-use envelope lies under 30 000 later events. Before,
// every view read every event of every group (38 s on a ledger of a
// million events); each page now reads a bounded window of the log,
// newest first, and links to the older one, and following the links
// still finds the first-use envelope.
func TestTrustPageReadsIndependentOfHistory(t *testing.T) {
	const history = 30000
	var rc *readCounter
	h := newHarness(t, &harnessOptions{wrap: func(st ledger.Store) ledger.Store { rc = &readCounter{Store: st}; return rc }})
	k, err := signing.GenerateKey(signing.Ed25519, "claude@example.com")
	if err != nil {
		t.Fatal(err)
	}
	text := envText(t, "CLAUDE", "CHATGPT", envelope.IntentRequest, "keys", "first")
	signed, err := signing.Sign([]byte(text), k, &signing.SignOptions{Announce: true})
	if err != nil {
		t.Fatal(err)
	}
	if o := h.ingest(string(signed)); o[0].Verification.Status != "first-use" {
		t.Fatalf("first envelope: %+v", o[0].Verification)
	}
	for i := 0; i < history; i += 1000 {
		recs := make([]ledger.Record, 1000)
		for j := range recs {
			env := envelope.New("CHATGPT", "CLAUDE", envelope.IntentRequest, fmt.Sprintf("later %d", i+j))
			b, err := json.Marshal(gateway.EventData{Text: env.Body, To: []string{"claude"},
				X: &gateway.XCrosstalk{Envelope: env, Transport: "test", Sender: "chatgpt", Verification: gateway.StatusUnsigned}})
			if err != nil {
				t.Fatal(err)
			}
			recs[j] = ledger.Record{Kind: gateway.KindMessage, GroupID: fmt.Sprintf("g%d", j%7), By: "chatgpt", Data: b}
		}
		if _, err := rc.Store.Append(t.Context(), recs); err != nil {
			t.Fatal(err)
		}
	}
	older := regexp.MustCompile(`href="(/ui/trust\?before=\d+)"[^>]*>older`)
	path, pages := "/ui/trust", 0
	for {
		rc.n.Store(0)
		code, body := h.get(path)
		if code != 200 {
			t.Fatalf("GET %s = %d\n%s", path, code, body)
		}
		if n := rc.n.Load(); n > history/10 {
			t.Fatalf("GET %s read %d events of a ledger of %d", path, n, history+1)
		}
		pages++
		if m := older.FindStringSubmatch(body); m != nil {
			mustNotContain(t, "a newer page", body, "first-use")
			path = html.UnescapeString(m[1])
			continue
		}
		mustContain(t, "the oldest trust page", body, "first-use", "claude@example.com")
		break
	}
	if pages < 2 {
		t.Fatalf("read in %d page(s), want the newest events first and an older link", pages)
	}
}
