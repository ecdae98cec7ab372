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

// cachedData is one slot's content.
type cachedData struct {
	id   string
	size int
	d    EventData
}

func newDataCache() *dataCache { return &dataCache{seed: maphash.MakeSeed()} }

// parse returns ParseData(ev) without the envelope's raw text (X.Raw),
// which a delivery does not carry, from the cache when it holds ev. A
// nil cache decodes every time.
func (c *dataCache) parse(ev ledger.Event) (EventData, error) {
	if c == nil || ev.ID == "" || len(ev.Data) == 0 {
		return ParseData(ev)
	}
	slot := &c.slots[maphash.String(c.seed, ev.ID)%dataCacheSlots]
	if e := slot.Load(); e != nil && e.id == ev.ID && e.size == len(ev.Data) {
		return e.d, nil
	}
	d, err := ParseData(ev)
	if err != nil {
		return d, err
	}
	if d.X != nil {
		d.X.Raw = "" // the largest member, kept by no delivery
	}
	slot.Store(&cachedData{id: ev.ID, size: len(ev.Data), d: d})
	return d, nil
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
