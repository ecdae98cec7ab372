package gateway

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// Delivery is one ledger event as one agent should see it: the C2A
// decision (directedness, policy, injection, knock) and, unless the event
// is only knocked, its content.
type Delivery struct {
	attention.Delivery
	Kind      string   `json:"kind"`
	From      string   `json:"from"`
	To        []string `json:"to,omitempty"`
	Intent    string   `json:"intent,omitempty"`
	Context   string   `json:"context,omitempty"`
	MessageID string   `json:"message,omitempty"`
	TS        string   `json:"ts"`
	// Content is the message text; empty when the injection is notify
	// (C2A: a knock withholds the body until the agent pulls it) or silent.
	Content      string `json:"content,omitempty"`
	Verification string `json:"verification,omitempty"`
	// Acked reports that the agent has acknowledged this attention
	// message (chat.ack) or notice (system.notify_ack).
	Acked bool `json:"acked,omitempty"`
	// Obligation is the event's obligation (`meta: obligation`), if any.
	Obligation *attention.Obligation `json:"obligation,omitempty"`
	// Protocol is the event's HANDOFF or BLOCKED (BeadBoard §6.2), if any.
	Protocol *Protocol `json:"protocol,omitempty"`
	// Discharged reports that the obligation's author or delegate
	// discharged it: only then is it settled.
	Discharged bool `json:"discharged,omitempty"`
	// Discharges is set on the delivery of a discharge (Kind
	// x.crosstalk.discharge, reason "discharged"): the event id of the
	// obligation it closed, which the agent was delivered or waits on.
	Discharges string `json:"discharges,omitempty"`
	// Responded reports that the agent replied to the event (a message
	// whose parent it is) or recorded a defer or resolve disposition. For
	// an obligation that is evidence for its author, not discharge.
	Responded bool `json:"responded,omitempty"`
	// ClaimedBy is the holder of a claim in force on the event.
	ClaimedBy string `json:"claimed_by,omitempty"`
	// Liveness is the agent's liveness now (docs/design.md §5.4).
	Liveness attention.Liveness `json:"liveness"`
	// Position is the event's position in the ledger's append order
	// (ledger.Store.Log), set on deliveries of FollowAgent: the one
	// number an agent stream resumes from.
	Position int64 `json:"position,omitempty"`
	// Fragments lists, oldest first, the events of a buffered delivery
	// merged into this one (docs/agents.md, "Buffered and digest
	// delivery"); the delivery is its last fragment's, and Content joins
	// theirs. Empty for a delivery of one event.
	Fragments []Fragment `json:"fragments,omitempty"`
	// Digest is the summary a digest event (KindDigest) carries.
	Digest *Digest `json:"digest,omitempty"`
}

// AttentionEvent returns the attention view of a ledger event (docs/design.md §5.2
// read backwards): author, recipients, intent, thread and priorities from
// data and data.x_crosstalk.
func AttentionEvent(ev ledger.Event, d EventData) attention.Event {
	ae := attention.Event{ID: ev.ID, Seq: ev.Seq, Group: ev.GroupID, Kind: ev.Kind, From: ev.By, To: d.To, Priority: d.Priority, Obligation: d.Obligation}
	if t, err := ev.Time(); err == nil {
		ae.CreatedAt = t
	}
	if x := d.X; x != nil && x.Envelope != nil {
		env := x.Envelope // the author stays ev.By: who the relay decided speaks
		ae.Intent = attention.Intent(env.Intent)
		ae.Thread, ae.Parent, ae.Context = env.Thread, env.Parent, env.Context
		if p, ok := env.MetaValue("routing", "X-Priority"); ok {
			ae.XPriority = strings.ToLower(p)
		}
		if v, ok := env.MetaValue("routing", "X-Deadline"); ok {
			// A duration counts from the receipt, the event's ts; the
			// intake refused bad values (checkObligation).
			ae.Deadline, _ = attention.ParseDeadline(v, ae.CreatedAt)
		}
	}
	if ev.Kind == KindNotify {
		ae.RequiresAck = d.RequiresAck
		ae.Context = d.Title // the knock's topic: "message about obligation return 2 of 3"
		if d.TargetActorID != "" {
			ae.To = []string{d.TargetActorID}
		}
	}
	return ae
}

// Deliveries returns what agent should see of group's events with seq >
// sinceSeq (all groups when group is ""), at most limit of them (all when
// limit ≤ 0), oldest first. Silent deliveries (the agent's own events,
// bookkeeping) are left out, and the agent's buffered and digest
// injection applies (unless ctx is PerEvent's). Reading does not count as the agent's
// activity: callers that act for the agent call Touch.
func (r *Relay) Deliveries(ctx context.Context, agent, group string, sinceSeq int64, limit int) ([]Delivery, error) {
	agent = r.book.ActorID(agent)
	groups := []string{group}
	if group == "" {
		gs, err := r.Groups(ctx)
		if err != nil {
			return nil, fmt.Errorf("gateway: listing groups: %w", err)
		}
		groups = groups[:0]
		for _, g := range gs {
			groups = append(groups, g.ID)
		}
	}
	var out []Delivery
	inj := r.injectorOf(agent)
	if IsPerEvent(ctx) {
		inj = injector{}
	}
	for _, g := range groups {
		ds, err := r.groupDeliveries(ctx, agent, g, sinceSeq, limit-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, inj.apply(ds)...)
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out, nil
}

// groupDeliveries reads the group's events after sinceSeq in pages and
// decides each with what the projections know of the rest of the
// history (DeliveriesOf), so it reads only what it returns and the
// silent events between.
func (r *Relay) groupDeliveries(ctx context.Context, agent, group string, sinceSeq int64, limit int) ([]Delivery, error) {
	page := inboxPage
	if limit > 0 {
		page = min(inboxPage, max(limit, 100))
	}
	var out []Delivery
	for last := sinceSeq; ; {
		evs, err := r.store.Range(ctx, group, last, nil, page)
		if err != nil {
			return nil, fmt.Errorf("gateway: reading group %q: %w", group, err)
		}
		logged := make([]ledger.Logged, len(evs))
		for i, ev := range evs {
			logged[i] = ledger.Logged{Event: ev}
		}
		ds, err := r.DeliveriesOf(ctx, agent, logged)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			d.Position = 0 // a group's reads give no log position
			out = append(out, d)
			if limit > 0 && len(out) >= limit {
				return out, nil
			}
		}
		if len(evs) < page {
			return out, nil
		}
		last = evs[len(evs)-1].Seq
	}
}

// inboxPage is how many events Deliveries reads at once: what it holds of
// a group's history, besides the deliveries it returns.
const inboxPage = 4096

// streamPage is how many events a stream's walk up to an event (a group
// met again, trackerLRU.get) reads at once.
const streamPage = 256

// trackerState is what a tracker has learnt from a group's events up to
// lastSeq that matters for the deliveries of later events: the threads the
// agent takes part in. Acks and claims need no carrying over: they follow
// the message they are about, so those of a later message are later too.
// The clock, liveness and the claims in the store are read afresh.
type trackerState struct {
	lastSeq int64
	threads *threadSet
	// checkpoints are earlier states of the same walk, oldest first: a
	// stream that resumes before lastSeq (a channel reconnecting from its
	// first unconfirmed delivery, which the last stream passed) starts
	// from the last one at or before where it resumes instead of walking
	// the group from its start.
	checkpoints []trackerCheckpoint
}

// trackerCheckpoint is the threads a tracker knew after the group's
// event seq. It is never changed once taken.
type trackerCheckpoint struct {
	seq     int64
	threads *threadSet
}

// checkpointEvery is how often (in a group's seqs) a stream's tracker
// takes a checkpoint, and maxCheckpoints how many of the latest it keeps:
// a stream resuming up to checkpointEvery×(maxCheckpoints-1) events of a
// group before where the last one stopped walks at most checkpointEvery
// of them again.
const (
	checkpointEvery = 64
	maxCheckpoints  = 4
)

// addCheckpoint returns a copy of cks (which a saved state may share)
// with a checkpoint of threads after seq, the oldest dropped past
// maxCheckpoints.
func addCheckpoint(cks []trackerCheckpoint, seq int64, threads *threadSet) []trackerCheckpoint {
	out := make([]trackerCheckpoint, 0, maxCheckpoints)
	out = append(out, cks[max(0, len(cks)-maxCheckpoints+1):]...)
	return append(out, trackerCheckpoint{seq: seq, threads: threads.clone()})
}

// maxTrackerStates bounds the relay's cache of tracker states (one per
// agent and group walked); past it the cache starts over.
const maxTrackerStates = 4096

// trackerKey names an agent's state in a group. The roles are part of it:
// the state (thread participation) depends on them.
func trackerKey(a attention.Agent, group string) string {
	return a.ID + "\x00" + strings.Join(a.Roles, ",") + "\x00" + group
}

// resumeTracker returns a tracker for agent in group, the seq to read
// the group from and the checkpoints up to it: the state an earlier walk
// saved, when it ends at or before sinceSeq (events up to it need no
// delivery, only their effect on the state), else its last checkpoint at
// or before sinceSeq, else a fresh tracker and 0.
func (r *Relay) resumeTracker(agent, group string, sinceSeq int64) (*tracker, int64, []trackerCheckpoint) {
	tr := r.newTracker(agent)
	r.mu.Lock()
	st, ok := r.trackers[trackerKey(tr.agent, group)]
	r.mu.Unlock()
	switch {
	case !ok:
		return tr, 0, nil
	case st.lastSeq <= sinceSeq:
		tr.threads = st.threads.clone()
		return tr, st.lastSeq, st.checkpoints
	}
	for i := len(st.checkpoints) - 1; i >= 0; i-- {
		if ck := st.checkpoints[i]; ck.seq <= sinceSeq {
			tr.threads = ck.threads.clone()
			return tr, ck.seq, st.checkpoints[: i+1 : i+1]
		}
	}
	return tr, 0, nil
}

// saveTracker keeps tr's state after the group's event lastSeq, and its
// checkpoints, for the next walk. tr must not be used to observe events
// afterwards.
func (r *Relay) saveTracker(group string, lastSeq int64, tr *tracker, cks []trackerCheckpoint) {
	key := trackerKey(tr.agent, group)
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.trackers[key]; ok && old.lastSeq >= lastSeq {
		return
	}
	if len(r.trackers) >= maxTrackerStates {
		clear(r.trackers)
	}
	r.trackers[key] = &trackerState{lastSeq: lastSeq, threads: tr.threads, checkpoints: cks}
}

// maxThreads bounds the threads a tracker remembers the agent taking part
// in, per group: past it the thread joined first is forgotten, and a later
// event of that thread counts as one of a thread the agent is not in. It
// keeps what a stream or an inbox walk holds independent of history.
const maxThreads = 256

// threadSet is the threads an agent takes part in within one group, held
// as 64-bit hashes of their ids, at most maxThreads of them: a ring of 2
// KiB at most, searched in full (256 compares cost less than a map's
// memory, multiplied by groups and streams).
type threadSet struct {
	order []uint64 // in the order joined, a ring once full
	next  int      // the oldest, once full
}

// threadSeed seeds the hashes; they never leave the process.
var threadSeed = maphash.MakeSeed()

func newThreadSet() *threadSet { return &threadSet{} }

func (s *threadSet) contains(thread string) bool {
	return slices.Contains(s.order, maphash.String(threadSeed, thread))
}

func (s *threadSet) add(thread string) {
	h := maphash.String(threadSeed, thread)
	switch {
	case slices.Contains(s.order, h):
	case len(s.order) < maxThreads:
		s.order = append(s.order, h)
	default:
		s.order[s.next] = h
		s.next = (s.next + 1) % maxThreads
	}
}

func (s *threadSet) clone() *threadSet {
	return &threadSet{order: slices.Clone(s.order), next: s.next}
}

// tracker follows one agent through a group's events in seq order and
// turns each into a Delivery.
type tracker struct {
	r       *Relay
	agent   attention.Agent
	threads *threadSet
	// claimed holds the events that have an x.crosstalk.claim event: only
	// those can have a claim in the store, so only those are looked up.
	// DeliveriesOf sets it from the projections; streams have none (they
	// send a message before its claim exists).
	claimed map[string]bool
	now     time.Time
	seen    map[string]time.Time
	// view, when set, answers thread participation from the projections
	// instead of threads (DeliveriesOf).
	view *projView
}

// agentOf is the actor id with its address-book roles, as Decide takes it.
func (r *Relay) agentOf(id string) attention.Agent {
	a := attention.Agent{ID: id}
	if entry, ok := r.book.Agent(id); ok {
		a.Roles = entry.Roles
	}
	return a
}

func (r *Relay) newTracker(agent string) *tracker {
	return &tracker{r: r, agent: r.agentOf(agent), threads: newThreadSet(), now: r.now(), seen: r.LastSeen()}
}

// liveness is the tracker's agent's liveness now: its sightings are kept
// by lower-cased id, judged with the relay's stale_after.
func (t *tracker) liveness() attention.Liveness {
	return attention.LivenessAfter(t.seen[strings.ToLower(t.agent.ID)], t.now, t.r.StaleAfter())
}

// observe returns the delivery of ev to the tracker's agent, and whether
// it is one to show (not silent).
func (t *tracker) observe(ctx context.Context, ev ledger.Event) (Delivery, bool, error) {
	d, err := t.r.data.parse(ev)
	if err != nil {
		return Delivery{}, false, fmt.Errorf("gateway: event %s: bad data: %w", ev.ID, err)
	}
	if ev.Kind == KindDigest {
		out, ok := t.digestDelivery(ev, d)
		return out, ok, nil
	}
	ae := AttentionEvent(ev, d)
	if ev.Kind == KindDischarge {
		return t.dischargeUpdate(ctx, ev, d)
	}
	st := attention.State{LastSeen: t.seen, StaleAfter: t.r.StaleAfter()}
	in := ae.Thread != "" && t.threads.contains(ae.Thread)
	if ae.Thread != "" && t.view != nil {
		if in, err = t.view.participant(ctx, ev.GroupID, ae.Thread, ev.Seq); err != nil {
			return Delivery{}, false, fmt.Errorf("gateway: event %s: %w", ev.ID, err)
		}
	}
	if in {
		// Decide only asks whether the agent takes part in ev's thread:
		// handing it every thread made each event cost O(threads), and
		// an inbox O(events × threads).
		st.Threads = []string{ae.Thread}
	}
	var claimedBy string
	if ev.Kind == KindMessage && t.claimed[ev.ID] {
		c, err := t.r.store.GetClaim(ctx, ev.GroupID, ev.ID, t.now)
		switch {
		case err == nil:
			claimedBy = c.Actor
			st.Claims = []attention.Claim{{Event: ev.ID, Thread: ae.Thread, Holder: c.Actor, ClaimedAt: c.ClaimedAt, ExpiresAt: c.ExpiresAt}}
		case !errors.Is(err, ledger.ErrNotFound):
			return Delivery{}, false, fmt.Errorf("gateway: claim of %s: %w", ev.ID, err)
		}
	}
	dec := attention.Decide(ae, t.agent, st, t.now)
	// Participation: the agent wrote in the thread or was named in it.
	if ae.Thread != "" && (attention.SameActor(ae.From, t.agent.ID) || dec.Directedness == attention.ToMe) {
		t.threads.add(ae.Thread)
	}
	if dec.Injection == attention.Silent {
		return Delivery{}, false, nil
	}
	out := Delivery{
		Delivery: dec, Kind: ev.Kind, From: ae.From, To: d.To, Intent: string(ae.Intent),
		Context: ae.Context, TS: ev.TS, ClaimedBy: claimedBy, Obligation: d.Obligation,
		Protocol: d.Protocol, Liveness: t.liveness(),
	}
	if x := d.X; x != nil {
		out.Verification = x.Verification
		if x.Envelope != nil {
			out.MessageID = x.Envelope.Message
		}
	}
	if dec.Injection != attention.Notify {
		out.Content = d.Text
		if out.Content == "" {
			out.Content = d.Message
		}
	}
	ownDelivery(&out)
	return out, true, nil
}

// FollowDeliveries yields what agent should see of group's events with seq
// > sinceSeq, first those stored and then live ones as they are appended,
// until ctx ends (docs/design.md §5.6 agent stream). Like Deliveries it leaves out
// silent ones and applies the agent's buffered and digest injection
// (Relay.inject). It reads the group in pages (ledger.Store.Follow), so what
// it holds does not grow with the group's history.
func (r *Relay) FollowDeliveries(ctx context.Context, agent, group string, sinceSeq int64) iter.Seq2[Delivery, error] {
	return r.inject(ctx, r.book.ActorID(agent), func(ctx context.Context) iter.Seq2[Delivery, error] {
		return r.followDeliveries(ctx, agent, group, sinceSeq)
	}, func(ctx context.Context, last Delivery) (bool, error) {
		evs, err := r.store.Range(ctx, group, last.Seq, nil, 1)
		return len(evs) > 0, err
	})
}

// followDeliveries is FollowDeliveries before injection; it yields a
// progress marker for each silent event.

func (r *Relay) followDeliveries(ctx context.Context, agent, group string, sinceSeq int64) iter.Seq2[Delivery, error] {
	return func(yield func(Delivery, error) bool) {
		tr, from, _ := r.resumeTracker(r.book.ActorID(agent), group, sinceSeq)
		for ev, err := range r.store.Follow(ctx, group, from) {
			if err != nil {
				yield(Delivery{}, err)
				return
			}
			d, ok, err := tr.emit(ctx, ev)
			if err != nil {
				yield(Delivery{}, err)
				return
			}
			if !ok {
				d = progress(ev.GroupID, ev.Seq, 0)
			}
			if ev.Seq > sinceSeq && !yield(d, nil) {
				return
			}
		}
	}
}

// emit observes ev with the clock and liveness of now. Streams' trackers
// know no acks, so their deliveries leave Acked unset.
func (t *tracker) emit(ctx context.Context, ev ledger.Event) (Delivery, bool, error) {
	t.now, t.seen = t.r.now(), t.r.LastSeen()
	return t.observe(ctx, ev)
}

// streamTrackers bounds the per-group trackers one FollowAgent keeps;
// past it, the least recently used is saved to the relay's cache
// (saveTracker) and dropped.
const streamTrackers = 256

// FollowAgent yields what agent should see of every group's events after
// the ledger position after, first those stored and then live ones, in
// the ledger's append order (ledger.Store.FollowLog), until ctx ends. Each
// delivery carries its Position, from which a reconnecting stream
// resumes: one number, whatever the number of groups. It reads the
// ledger in pages and keeps at most streamTrackers groups' thread state,
// so what it holds grows neither with history nor with the number of
// groups; a group met again after its state was dropped is walked up to
// the event again, in pages, from the relay's cache of tracker states.
// The agent's buffered and digest injection applies (Relay.inject): a
// merged delivery carries its last fragment's Position.
func (r *Relay) FollowAgent(ctx context.Context, agent string, after int64) iter.Seq2[Delivery, error] {
	agent = r.book.ActorID(agent)
	return r.inject(ctx, agent, func(ctx context.Context) iter.Seq2[Delivery, error] {
		return r.followAgent(ctx, agent, after)
	}, func(ctx context.Context, last Delivery) (bool, error) {
		ls, err := r.store.Log(ctx, last.Position, 1)
		return len(ls) > 0, err
	})
}

// followAgent is FollowAgent before injection; it yields a progress
// marker for each silent event.

func (r *Relay) followAgent(ctx context.Context, agent string, after int64) iter.Seq2[Delivery, error] {
	return func(yield func(Delivery, error) bool) {
		trs := newTrackerLRU(r, streamTrackers)
		defer trs.saveAll()
		for l, err := range r.store.FollowLog(ctx, after) {
			if err != nil {
				yield(Delivery{}, err)
				return
			}
			release, err := r.StreamWork(ctx)
			if err != nil {
				return // ctx ended
			}
			d, ok, err := trs.emit(ctx, agent, l)
			release()
			if err != nil {
				yield(Delivery{}, err)
				return
			}
			trs.seen(l.GroupID, l.Seq)
			if !ok {
				d = progress(l.GroupID, l.Seq, l.Pos)
			}
			d.Position = l.Pos
			if !yield(d, nil) {
				return
			}
		}
	}
}

// emit returns the delivery of l to agent, with the tracker of its group.
func (l *trackerLRU) emit(ctx context.Context, agent string, ev ledger.Logged) (Delivery, bool, error) {
	tr, err := l.get(ctx, agent, ev.GroupID, ev.Seq)
	if err != nil {
		return Delivery{}, false, err
	}
	return tr.emit(ctx, ev.Event)
}

// StreamWork takes one of the relay's slots for the work of a stream
// (decoding an event, deciding and encoding its delivery) and returns its
// release. There are GOMAXPROCS-1 slots (at least one): however many
// streams replay history at once, a CPU stays free for the other requests
// (a health check, an intake). It fails only when ctx ends.
func (r *Relay) StreamWork(ctx context.Context) (release func(), err error) {
	select {
	case r.work <- struct{}{}:
		return func() { <-r.work }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// trackerLRU holds the trackers of one FollowAgent, at most max of them.
type trackerLRU struct {
	r     *Relay
	max   int
	order *list.List // of *streamTracker, most recently used first
	by    map[string]*list.Element
}

// streamTracker is a tracker, the seq of the last event it observed and
// its checkpoints.
type streamTracker struct {
	group       string
	lastSeq     int64
	tr          *tracker
	checkpoints []trackerCheckpoint
}

func newTrackerLRU(r *Relay, max int) *trackerLRU {
	return &trackerLRU{r: r, max: max, order: list.New(), by: map[string]*list.Element{}}
}

// get returns the tracker of group that has observed every event before
// seq, walking the group in pages from the relay's cache when needed.
func (l *trackerLRU) get(ctx context.Context, agent, group string, seq int64) (*tracker, error) {
	if e, ok := l.by[group]; ok && e.Value.(*streamTracker).lastSeq == seq-1 {
		l.order.MoveToFront(e)
		return e.Value.(*streamTracker).tr, nil
	} else if ok { // cannot happen: the log yields each group in seq order
		l.drop(e)
	}
	tr, last, cks := l.r.resumeTracker(agent, group, seq-1)
	for last < seq-1 {
		evs, err := l.r.store.Range(ctx, group, last, nil, min(streamPage, int(seq-1-last)))
		if err != nil {
			return nil, fmt.Errorf("gateway: reading group %q: %w", group, err)
		}
		if len(evs) == 0 {
			return nil, fmt.Errorf("gateway: group %q: events %d to %d missing", group, last+1, seq-1)
		}
		for _, ev := range evs {
			if _, _, err := tr.observe(ctx, ev); err != nil {
				return nil, err
			}
			last = ev.Seq
			if last%checkpointEvery == 0 {
				cks = addCheckpoint(cks, last, tr.threads)
			}
		}
	}
	if l.order.Len() >= l.max {
		l.drop(l.order.Back())
	}
	l.by[group] = l.order.PushFront(&streamTracker{group: group, lastSeq: last, tr: tr, checkpoints: cks})
	return tr, nil
}

// seen notes that group's tracker has observed event seq, and takes a
// checkpoint every checkpointEvery events.
func (l *trackerLRU) seen(group string, seq int64) {
	if e, ok := l.by[group]; ok {
		st := e.Value.(*streamTracker)
		st.lastSeq = seq
		if seq%checkpointEvery == 0 {
			st.checkpoints = addCheckpoint(st.checkpoints, seq, st.tr.threads)
		}
	}
}

// drop saves e's state to the relay's cache and forgets it.
func (l *trackerLRU) drop(e *list.Element) {
	st := l.order.Remove(e).(*streamTracker)
	delete(l.by, st.group)
	if st.lastSeq > 0 {
		l.r.saveTracker(st.group, st.lastSeq, st.tr, st.checkpoints)
	}
}

// saveAll saves every state, for the agent's next stream.
func (l *trackerLRU) saveAll() {
	for l.order.Len() > 0 {
		l.drop(l.order.Back())
	}
}
