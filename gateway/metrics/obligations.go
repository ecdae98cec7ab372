package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// OtherAgent is the agent label value under which the obligations of
// agents outside the address book are summed.
const OtherAgent = "other"

// WatchRelay adds the metrics that read the relay's state when scraped:
// crosstalk_must_respond_open, what each agent owes — the must_respond
// deliveries that `crosstalk inbox` marks as owed (gateway.Delivery.Owes).
func (m *Metrics) WatchRelay(relay *gateway.Relay) {
	m.register(&obligations{
		relay:  relay,
		log:    m.log,
		now:    time.Now,
		groups: map[string]*window{},
		desc: prometheus.NewDesc(Namespace+"_must_respond_open",
			"Open must_respond deliveries per agent: events an agent owes an answer — an open obligation until its author discharges it, "+
				"any other must_respond event until the agent answers or acknowledges it or its deadline passes. "+
				`Agents outside the address book are summed under agent="other".`, []string{"agent"}, nil),
		openDesc: prometheus.NewDesc(Namespace+"_obligations_open",
			"Open obligations (meta: obligation) someone owes, by what they block (halted, degraded, none): each counted once, "+
				"however many addressees owe it, until its author or delegate discharges it.", []string{"blocks"}, nil),
	})
}

// obligations computes crosstalk_must_respond_open at each scrape, as
// gateway.Delivery.Owes decides it (C2A "Response Policy", issue #14):
//
//   - an event with an obligation (`meta: obligation`) is owed by each
//     addressee until a discharge event closes it, whatever its deadline;
//     a HANDOFF's or BLOCKED's also by the addressee's ack;
//   - any other must_respond event is owed until the agent acknowledges
//     it, answers it (a reply or a disposition) or the deadline it carries
//     (X-Deadline) passes (C2A "Stale Events"); without one, for ever.
//
// Whether an event is must_respond for an agent does not depend on thread
// history (attention.PolicyOf), so each event is decided once, when first
// read: a scrape reads the events appended since the last one (at most
// maxScan per group; the first scrapes of a long group read it from its
// start over several scrapes). A claim on
// a role obligation by another agent is not followed: every holder of the
// role counts it until it is discharged.
type obligations struct {
	relay *gateway.Relay
	log   *slog.Logger
	now   func() time.Time
	desc  *prometheus.Desc
	// openDesc is crosstalk_obligations_open.
	openDesc *prometheus.Desc

	mu     sync.Mutex
	groups map[string]*window
}

// window is what obligations keeps of one group.
type window struct {
	read int64 // events up to this seq have been read
	open []owed
}

// owed is one event one agent owes.
type owed struct {
	event    string
	agent    string // the agent's actor id
	label    string // agent, or OtherAgent
	deadline time.Time
	obliged  bool             // an obligation: only a discharge closes it
	blocks   attention.Blocks // the obligation's, when obliged
	// acks: a HANDOFF or BLOCKED, whose addressee's ack closes it too
	// (attention.Obligation.Ack).
	acks bool
}

// maxScan bounds how many events one scrape reads per group; the rest is
// read by the next scrapes.
const maxScan = 10000

// scanKinds are the kinds that open or close what an agent owes.
var scanKinds = []string{gateway.KindMessage, gateway.KindAck, gateway.KindDisposition, gateway.KindDischarge}

func (o *obligations) Describe(ch chan<- *prometheus.Desc) {
	ch <- o.desc
	ch <- o.openDesc
}

func (o *obligations) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	counts, open, err := o.count(ctx, o.now())
	if err != nil {
		o.log.Warn("metrics: counting must_respond obligations", "err", err)
		ch <- prometheus.NewInvalidMetric(o.desc, err)
		ch <- prometheus.NewInvalidMetric(o.openDesc, err)
		return
	}
	for agent, n := range counts {
		ch <- prometheus.MustNewConstMetric(o.desc, prometheus.GaugeValue, float64(n), agent)
	}
	for blocks, n := range open {
		ch <- prometheus.MustNewConstMetric(o.openDesc, prometheus.GaugeValue, float64(n), string(blocks))
	}
}

// count brings every group's window up to date and counts what is owed
// per agent label — every address-book agent and "other" are present,
// with 0 when they owe nothing — and the open obligations by what they
// block, each once (every Blocks value present).
func (o *obligations) count(ctx context.Context, now time.Time) (map[string]int, map[attention.Blocks]int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	book := o.relay.Book()
	counts := map[string]int{OtherAgent: 0}
	for _, a := range book.Agents() {
		counts[a.ID] = 0
	}
	open := map[attention.Blocks]int{attention.BlocksHalted: 0, attention.BlocksDegraded: 0, attention.BlocksNone: 0}
	gs, err := o.relay.Groups(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing groups: %w", err)
	}
	for _, g := range gs {
		w, ok := o.groups[g.ID]
		if !ok {
			w = &window{}
			o.groups[g.ID] = w
		}
		if err := o.advance(ctx, g, w, now); err != nil {
			return nil, nil, err
		}
		// Deadlines follow the events' timestamps, which relays sharing a
		// JetStream ledger stamp with their own clocks: drop every past
		// one, not only a prefix.
		w.open = slices.DeleteFunc(w.open, func(ow owed) bool {
			return !ow.obliged && !ow.deadline.IsZero() && !now.Before(ow.deadline)
		})
		counted := map[string]bool{} // obligations of this group counted
		for _, ow := range w.open {
			counts[ow.label]++
			if ow.obliged && !counted[ow.event] {
				counted[ow.event] = true
				open[ow.blocks]++
			}
		}
	}
	return counts, open, nil
}

// advance reads the group's events after w.read.
func (o *obligations) advance(ctx context.Context, g ledger.Group, w *window, now time.Time) error {
	for scanned := 0; w.read < g.LastSeq && scanned < maxScan; {
		evs, err := o.relay.Store().Range(ctx, g.ID, w.read, scanKinds, 1000)
		if err != nil {
			return fmt.Errorf("reading group %q: %w", g.ID, err)
		}
		if len(evs) == 0 {
			w.read = g.LastSeq
			return nil
		}
		for _, ev := range evs {
			w.read = ev.Seq
			o.read(ev, w, now)
		}
		scanned += len(evs)
	}
	return nil
}

// read applies one event to w: a message opens what it asks of each
// agent; an ack, a reply, a disposition or a discharge closes it.
func (o *obligations) read(ev ledger.Event, w *window, now time.Time) {
	d, err := gateway.ParseData(ev)
	if err != nil {
		return
	}
	closeWhere := func(event string, match func(owed) bool) {
		if event != "" {
			w.open = slices.DeleteFunc(w.open, func(ow owed) bool { return ow.event == event && match(ow) })
		}
	}
	byAgent := func(actor string) func(owed) bool {
		return func(ow owed) bool { return !ow.obliged && attention.SameActor(ow.agent, actor) }
	}
	switch ev.Kind {
	case gateway.KindAck:
		closeWhere(d.EventID, func(ow owed) bool { return (!ow.obliged || ow.acks) && attention.SameActor(ow.agent, d.ActorID) })
	case gateway.KindDisposition:
		closeWhere(d.EventID, byAgent(ev.By))
	case gateway.KindDischarge:
		closeWhere(d.EventID, func(ow owed) bool { return ow.obliged })
	case gateway.KindMessage:
		closeWhere(d.ReplyTo, byAgent(ev.By))
		o.decide(ev, d, w, now)
	}
}

// decide adds what the message event asks of each agent to w: address-book
// agents under their id, the others as "other".
func (o *obligations) decide(ev ledger.Event, d gateway.EventData, w *window, now time.Time) {
	ae := gateway.AttentionEvent(ev, d)
	book := o.relay.Book()
	add := func(a attention.Agent, label string) {
		del := attention.Decide(ae, a, attention.State{}, now)
		if del.Policy == attention.MustRespond {
			w.open = append(w.open, owed{event: ev.ID, agent: a.ID, label: label, deadline: del.Deadline,
				obliged: del.Reason == attention.ReasonObligation, blocks: obligationBlocks(d.Obligation),
				acks: d.Obligation != nil && d.Obligation.Ack})
		}
	}
	for _, a := range book.Agents() {
		add(attention.Agent{ID: a.ID, Roles: a.Roles}, a.ID)
	}
	seen := map[string]bool{}
	for _, tok := range ae.To {
		if strings.HasPrefix(tok, "@") {
			continue // a role or selector: outside the book nobody holds it
		}
		if _, known := book.Agent(tok); known {
			continue
		}
		id := book.ActorID(tok)
		if seen[id] {
			continue
		}
		seen[id] = true
		add(attention.Agent{ID: id}, OtherAgent)
	}
}

// obligationBlocks is what ob blocks, none when ob is nil or says nothing.
func obligationBlocks(ob *attention.Obligation) attention.Blocks {
	if ob == nil || ob.Blocks == "" {
		return attention.BlocksNone
	}
	return ob.Blocks
}
