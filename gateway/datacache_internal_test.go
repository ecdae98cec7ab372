package gateway

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TestDataCache checks that the cache hands out what ParseData decodes
// (without X.Raw), decodes again for an event it does not hold — another
// id in the slot, or the same id with other data, as from a ledger
// replaced under the relay — and that a nil cache decodes every time.
func TestDataCache(t *testing.T) {
	event := func(id, text string) ledger.Event {
		d := EventData{Text: text, To: []string{"claude"}, X: &XCrosstalk{Raw: "[[A→B v1]]\n" + text, Verification: "verified"}}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return ledger.Event{ID: id, Kind: KindMessage, Data: b}
	}
	want := func(ev ledger.Event) EventData {
		d, err := ParseData(ev)
		if err != nil {
			t.Fatal(err)
		}
		d.X.Raw = ""
		return d
	}
	c := newDataCache()
	for _, tc := range []struct {
		name string
		ev   ledger.Event
	}{
		{"first", event("ev-1", "hello")},
		{"again, from the slot", event("ev-1", "hello")},
		{"same id, other data", event("ev-1", "hello, longer")},
		{"other id", event("ev-2", "other")},
	} {
		got, err := c.parse(tc.ev)
		if err != nil {
			t.Fatalf("%s: parse = %v", tc.name, err)
		}
		if w := want(tc.ev); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: parse = %+v, want %+v", tc.name, got, w)
		}
	}
	// Every id in every slot: a slot holds the last id hashed to it.
	for i := range 3 * dataCacheSlots {
		ev := event(fmt.Sprint("ev-", i), fmt.Sprint("text ", i))
		if got, err := c.parse(ev); err != nil || got.Text != fmt.Sprint("text ", i) {
			t.Fatalf("parse(%s) = %q, %v", ev.ID, got.Text, err)
		}
	}
	if _, err := c.parse(ledger.Event{ID: "bad", Data: []byte("{")}); err == nil {
		t.Error("parse(bad JSON) = nil error")
	}
	// Many readers of one new event at once (the streams one append
	// wakes): one decodes, the others wait for it; all get the same.
	ev0 := event("ev-concurrent", "at once")
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if got, err := c.parse(ev0); err != nil || got.Text != "at once" || got.X.Verification != "verified" {
				t.Errorf("concurrent parse = %+v, %v", got, err)
			}
		})
	}
	wg.Wait()
	// A digest's delivery carries its Digest as decoded: never shared.
	dg, merr := json.Marshal(EventData{Digest: &Digest{Since: 1, Through: 2}})
	if merr != nil {
		t.Fatal(merr)
	}
	dev := ledger.Event{ID: "digest-1", Kind: KindDigest, Data: dg}
	d1, err1 := c.parse(dev)
	d2, err2 := c.parse(dev)
	if err1 != nil || err2 != nil || d1.Digest == nil || d1.Digest == d2.Digest {
		t.Errorf("digest parses = %p, %p (%v, %v): want two decodings", d1.Digest, d2.Digest, err1, err2)
	}
	var none *dataCache
	ev := event("ev-3", "no cache")
	if got, err := none.parse(ev); err != nil || got.Text != "no cache" || got.X.Raw == "" {
		t.Errorf("nil cache: parse = %+v, %v; want ParseData's, Raw kept", got, err)
	}
}

// TestOwnDelivery checks that a delivery made from cached data owns its
// To, Obligation and Protocol: changing them changes neither the cache
// nor another delivery of the same event.
func TestOwnDelivery(t *testing.T) {
	d := EventData{To: []string{"claude", "gemini"}, Obligation: &attention.Obligation{Blocks: "work", Delegate: "x"}, Protocol: &Protocol{EventType: ProtocolHandoff, Subject: "s"}}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	ev := ledger.Event{ID: "ev-1", Kind: KindMessage, Data: b}
	c := newDataCache()
	out := func() Delivery {
		cd, err := c.parse(ev)
		if err != nil {
			t.Fatal(err)
		}
		o := Delivery{To: cd.To, Obligation: cd.Obligation, Protocol: cd.Protocol}
		ownDelivery(&o)
		return o
	}
	a := out()
	a.To[0], a.Obligation.Delegate, a.Protocol.Subject = "changed", "changed", "changed"
	bb := out()
	if bb.To[0] != "claude" || bb.Obligation.Delegate != "x" || bb.Protocol.Subject != "s" {
		t.Errorf("a second delivery of the event = %+v %+v %+v: the first one's changes leaked into the cache", bb.To, *bb.Obligation, *bb.Protocol)
	}
	var empty Delivery
	ownDelivery(&empty) // nil members stay nil
	if empty.To != nil || empty.Obligation != nil || empty.Protocol != nil {
		t.Errorf("ownDelivery(empty) = %+v", empty)
	}
}

// TestDataCacheBoundsBytes: a slot holds its event's decoded data until
// another event takes it, so the cache must not hold 1 024 of the largest
// events a sender can make: after 16 events of 1 MiB of text are decoded,
// it holds less than 1 MiB of their data, and each is still decoded
// whole.
func TestDataCacheBoundsBytes(t *testing.T) {
	c := newDataCache()
	for i := range 16 {
		text := fmt.Sprint(i, " ", strings.Repeat("x", 1<<20))
		b, err := json.Marshal(EventData{Text: text})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if d, err := c.parse(ledger.Event{ID: fmt.Sprint("big-", i), Kind: KindMessage, Data: b}); err != nil || d.Text != text {
				t.Fatalf("parse(big-%d) = %d bytes of text, %v", i, len(d.Text), err)
			}
		}
	}
	held := 0
	for i := range c.slots {
		if e := c.slots[i].Load(); e != nil {
			held += len(e.d.Text)
		}
	}
	if held >= 1<<20 {
		t.Errorf("the cache holds %d bytes of text after 16 events of 1 MiB", held)
	}
}
