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
// crosstalk_must_respond_open, the must_respond deliveries per agent that
// have not expired — what `crosstalk inbox` lists as must_respond.
func (m *Metrics) WatchRelay(relay *gateway.Relay) {
	m.register(&obligations{
		relay:  relay,
		log:    m.log,
		now:    time.Now,
		groups: map[string]*window{},
		desc: prometheus.NewDesc(Namespace+"_must_respond_open",
			"Open must_respond obligations per agent: deliveries an agent must answer whose deadline has not passed. "+
				`Agents outside the address book are summed under agent="other".`, []string{"agent"}, nil),
	})
}

// obligations computes crosstalk_must_respond_open at each scrape.
//
// A delivery is must_respond only when the event names the agent (to_me)
// with an intent that asks for an answer, and only until its deadline,
// CreatedAt + attention.DefaultResponseDeadline (C2A "Stale Events");
// neither depends on thread history or claims (attention.PolicyOf). So
// only message events younger than the deadline matter, and each is
// decided once, when first read: a scrape reads the events appended since
// the last one, and drops the obligations whose deadline has passed. The
// first scrape finds where each group's recent events start by bisecting
// on their timestamps, and never reads a group's history.
type obligations struct {
	relay *gateway.Relay
	log   *slog.Logger
	now   func() time.Time
	desc  *prometheus.Desc

	mu     sync.Mutex
	groups map[string]*window
}

// window is what obligations keeps of one group.
type window struct {
	read int64        // events up to this seq have been decided
	open []obligation // in seq order
}

type obligation struct {
	agent    string // an address-book actor id, or OtherAgent
	deadline time.Time
}

// maxScan bounds how many events one scrape reads per group; the rest is
// read by the next scrapes.
const maxScan = 10000

func (o *obligations) Describe(ch chan<- *prometheus.Desc) { ch <- o.desc }

func (o *obligations) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	counts, err := o.count(ctx, o.now())
	if err != nil {
		o.log.Warn("metrics: counting must_respond obligations", "err", err)
		ch <- prometheus.NewInvalidMetric(o.desc, err)
		return
	}
	for agent, n := range counts {
		ch <- prometheus.MustNewConstMetric(o.desc, prometheus.GaugeValue, float64(n), agent)
	}
}

// count brings every group's window up to date and counts the open
// obligations per agent label; every address-book agent and "other" are
// present, with 0 when they owe nothing.
func (o *obligations) count(ctx context.Context, now time.Time) (map[string]int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	book := o.relay.Book()
	counts := map[string]int{OtherAgent: 0}
	for _, a := range book.Agents() {
		counts[a.ID] = 0
	}
	gs, err := o.relay.Store().Groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing groups: %w", err)
	}
	for _, g := range gs {
		w, ok := o.groups[g.ID]
		if !ok {
			start, err := recentStart(ctx, o.relay.Store(), g, now.Add(-attention.DefaultResponseDeadline))
			if err != nil {
				return nil, err
			}
			w = &window{read: start}
			o.groups[g.ID] = w
		}
		if err := o.advance(ctx, g, w, now); err != nil {
			return nil, err
		}
		// Deadlines follow the events' timestamps, which relays sharing a
		// JetStream ledger stamp with their own clocks: drop every past
		// one, not only a prefix.
		w.open = slices.DeleteFunc(w.open, func(ob obligation) bool { return !now.Before(ob.deadline) })
		for _, ob := range w.open {
			counts[ob.agent]++
		}
	}
	return counts, nil
}

// advance decides the group's message events after w.read.
func (o *obligations) advance(ctx context.Context, g ledger.Group, w *window, now time.Time) error {
	for scanned := 0; w.read < g.LastSeq && scanned < maxScan; {
		evs, err := o.relay.Store().Range(ctx, g.ID, w.read, []string{gateway.KindMessage}, 1000)
		if err != nil {
			return fmt.Errorf("reading group %q: %w", g.ID, err)
		}
		if len(evs) == 0 {
			w.read = g.LastSeq
			return nil
		}
		for _, ev := range evs {
			w.read = ev.Seq
			o.decide(ev, w, now)
		}
		scanned += len(evs)
	}
	return nil
}

// decide adds the obligations ev creates to w: one per agent it asks for
// an answer, address-book agents under their id, the others as "other".
func (o *obligations) decide(ev ledger.Event, w *window, now time.Time) {
	d, err := gateway.ParseData(ev)
	if err != nil {
		return
	}
	ae := gateway.AttentionEvent(ev, d)
	book := o.relay.Book()
	add := func(a attention.Agent, label string) {
		if del := attention.Decide(ae, a, attention.State{}, now); del.Policy == attention.MustRespond {
			w.open = append(w.open, obligation{agent: label, deadline: del.Deadline})
		}
	}
	for _, a := range book.Agents() {
		add(attention.Agent{ID: a.ID, Roles: a.Roles}, a.ID)
	}
	seen := map[string]bool{}
	for _, tok := range ae.To {
		if strings.HasPrefix(tok, "@") {
			continue // a role or selector: never to_me, so never must_respond
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

// recentStart returns the seq after which g's events are at or after
// since: the last seq when even the last event is older, else found by
// bisecting on the events' timestamps (a group's ts grow with its seq).
func recentStart(ctx context.Context, st ledger.Store, g ledger.Group, since time.Time) (int64, error) {
	older := func(seq int64) (bool, error) {
		evs, err := st.Range(ctx, g.ID, seq-1, nil, 1)
		if err != nil {
			return false, fmt.Errorf("reading group %q: %w", g.ID, err)
		}
		if len(evs) == 0 {
			return true, nil
		}
		t, err := evs[0].Time()
		if err != nil {
			return true, nil
		}
		return t.Before(since), nil
	}
	if g.LastSeq == 0 {
		return 0, nil
	}
	if old, err := older(g.LastSeq); err != nil || old {
		return g.LastSeq, err
	}
	// The answer is in [lo, hi]: event lo is older (or lo is 0), every
	// event after hi is recent.
	lo, hi := int64(0), g.LastSeq-1
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		old, err := older(mid)
		if err != nil {
			return 0, err
		}
		if old {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, nil
}
