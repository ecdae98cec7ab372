package gateway

import (
	"hash/maphash"
	"slices"
	"sync/atomic"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// dataCacheSlots is the number of decoded events dataCache keeps: the
// live tail every stream of the relay reads at about the same time, and a
// page or two behind it.
const dataCacheSlots = 1024

// dataCacheMaxSize is the largest event data (ledger.Event.Data) whose
// decoding the cache keeps: a slot holds its event until another takes
// it, so without a bound the cache would hold 1 024 of the largest events
// a sender can make (an envelope of 1 MiB decodes to its body twice) for
// as long as the relay runs. Larger events are decoded by each reader, as
// before the cache.
const dataCacheMaxSize = 64 << 10

// dataCache keeps the decoded data of the events the relay's trackers
// decided last, so that the streams following the ledger's tail (every
// connected harness, docs/agents.md) decode each new event once between
// them instead of once each: the JSON decoding was most of a stream's
// work per event (docs/performance.md, "Session 14"). An event's id names
// one event of the ledger and its data never changes, so a slot that
// holds the id (and the data's length, against a ledger replaced under
// the relay) holds its data. The EventData handed out is shared: its
// readers (tracker.observe) copy what they pass on and change nothing.
type dataCache struct {
	seed  maphash.Seed
	slots [dataCacheSlots]atomic.Pointer[cachedData]
}

// cachedData is one slot's content. The first reader of an event puts
// it in the slot before decoding and closes ready when d and err are set:
// the streams woken by the same append reach the same event at the same
// time, and the others wait for that decoding instead of each doing it.
type cachedData struct {
	id    string
	size  int
	ready chan struct{}
	d     EventData
	err   error
}

func newDataCache() *dataCache { return &dataCache{seed: maphash.MakeSeed()} }

// parse returns ParseData(ev), from the cache when it holds ev; what the
// cache keeps lacks the envelope's raw text (X.Raw), which no delivery
// carries. A nil cache decodes every time, and so does every cache for an
// event over dataCacheMaxSize and for a digest (KindDigest), whose
// delivery carries its Digest as decoded, which ownDelivery does not copy.
func (c *dataCache) parse(ev ledger.Event) (EventData, error) {
	if c == nil || ev.ID == "" || len(ev.Data) == 0 || len(ev.Data) > dataCacheMaxSize || ev.Kind == KindDigest {
		return ParseData(ev)
	}
	slot := &c.slots[maphash.String(c.seed, ev.ID)%dataCacheSlots]
	e := slot.Load()
	if !e.holds(ev) {
		n := &cachedData{id: ev.ID, size: len(ev.Data), ready: make(chan struct{})}
		if slot.CompareAndSwap(e, n) {
			n.d, n.err = ParseData(ev)
			if n.err == nil && n.d.X != nil {
				n.d.X.Raw = "" // the largest member, kept by no delivery
			}
			close(n.ready)
			return n.d, n.err
		}
		// Another reader took the slot first: its entry is this event's
		// or not at all.
		if e = slot.Load(); !e.holds(ev) {
			return ParseData(ev)
		}
	}
	<-e.ready
	return e.d, e.err
}

// holds reports whether e (nil for an empty slot) is ev's entry.
func (e *cachedData) holds(ev ledger.Event) bool {
	return e != nil && e.id == ev.ID && e.size == len(ev.Data)
}

// ownDelivery gives out copies of what d shares with a cached EventData
// (its To, Obligation and Protocol), so that whoever receives the
// delivery may change it.
func ownDelivery(d *Delivery) {
	d.To = slices.Clone(d.To)
	if o := d.Obligation; o != nil {
		c := *o
		d.Obligation = &c
	}
	if p := d.Protocol; p != nil {
		c := *p
		d.Protocol = &c
	}
}
