package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// KindDigest is the event kind of a digest: the summary of one agent's
// digest deliveries of one group over one window (C2A "digest";
// docs/agents.md, "Buffered and digest delivery"). It is delivered to
// that agent only (EventData.TargetActorID) and silent for everyone else.
const KindDigest = "x.crosstalk.digest"

// Digest is the data of a digest event: the summary (counts, authors,
// topics, the event ids to pull the bodies with) of the agent's digest
// deliveries of the group with seq in (Since, Through] and a ledger time
// before Until.
type Digest struct {
	attention.Summary
	// Since and Through bound the seqs the digest covers.
	Since   int64 `json:"since"`
	Through int64 `json:"through"`
	// Until is the end of the digest's window.
	Until time.Time `json:"until"`
}

// digestDedupeKey names the digest of agent's deliveries of group for the
// window ending at until: every relay on the ledger computes the same
// key, so a digest is recorded once whoever writes it first.
func digestDedupeKey(group, agent string, until time.Time) string {
	return fmt.Sprintf("digest:%s:%s:%d", group, strings.ToLower(agent), until.Unix())
}

type perEventKey struct{}

// PerEvent returns a context in which Deliveries returns one delivery
// per event, without the agent's buffered merging or digest omission:
// for finding the delivery of one event by its id (c2a.FindDelivery).
func PerEvent(ctx context.Context) context.Context {
	return context.WithValue(ctx, perEventKey{}, true)
}

// IsPerEvent reports whether ctx is PerEvent's.
func IsPerEvent(ctx context.Context) bool {
	v, _ := ctx.Value(perEventKey{}).(bool)
	return v
}

// digestDelivery is the delivery of digest event ev to the tracker's
// agent: to_me, must_not_respond, injection digest, when the digest is
// the agent's; silent (false) otherwise.
func (t *tracker) digestDelivery(ev ledger.Event, d EventData) (Delivery, bool) {
	if d.Digest == nil || !attention.SameActor(d.TargetActorID, t.agent.ID) {
		return Delivery{}, false
	}
	out := Delivery{
		Delivery: attention.Delivery{
			EventID: ev.ID, Seq: ev.Seq, Group: ev.GroupID, Agent: t.agent.ID,
			Directedness: attention.ToMe, Policy: attention.MustNotRespond, Reason: attention.ReasonBroadcast,
			Injection: attention.Digest, Priority: "normal", IdempotencyKey: ev.ID + ":" + t.agent.ID,
		},
		Kind: ev.Kind, From: ev.By, To: []string{t.agent.ID}, TS: ev.TS,
		Content: d.Digest.Text(), Digest: d.Digest,
		Liveness: t.liveness(),
	}
	return out, true
}

// Text renders the digest for a model or a person: one line per entry,
// then how to pull a body.
func (g *Digest) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Digest: %d message(s) you were not interrupted for, until %s.", g.Count, g.Until.UTC().Format(time.RFC3339))
	for _, e := range g.Entries {
		fmt.Fprintf(&b, "\n- %d × %s in %s from %s (seq %d–%d): %s",
			e.Count, e.Topic, e.Group, strings.Join(e.Authors, ", "), e.FirstSeq, e.LastSeq, strings.Join(e.EventIDs, " "))
	}
	b.WriteString("\nPull a body by its event id (MCP chat.list_events eventId, or GET /v1/groups/<group>/events?since_seq=<seq-1>&limit=1).")
	return b.String()
}

// digestAgents returns the address book entries with a digest interval.
func (r *Relay) digestAgents() []Agent {
	var out []Agent
	for _, a := range r.book.Agents() {
		if a.DigestEvery > 0 {
			out = append(out, a)
		}
	}
	return out
}

// RunDigests writes the digest events of every agent whose address book
// entry sets DigestEvery, at the end of each of its windows (windows are
// aligned to multiples of the interval since the zero time, in the
// relay's clock), until ctx ends; then it returns nil. A window missed
// while the relay was down is caught up at once: digests cover ledger
// seqs from the previous digest on, so nothing is skipped. Failures are
// logged and retried at the next poll.
func (r *Relay) RunDigests(ctx context.Context) error {
	agents := r.digestAgents()
	if len(agents) == 0 {
		return nil
	}
	done := map[string]time.Time{} // agent → window end digested
	for {
		now := r.now()
		for _, a := range agents {
			until := now.Truncate(a.DigestEvery)
			if !done[a.ID].Before(until) {
				continue
			}
			if _, err := r.WriteDigests(ctx, a.ID, until); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				r.log.Warn("digest not written", "agent", a.ID, "until", until, "err", err)
				continue
			}
			done[a.ID] = until
		}
		t := time.NewTimer(injectPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// WriteDigests records agent's digest of every group for the window
// ending at until: per group, one KindDigest event summarising its
// digest deliveries (injection digest, never must_respond nor an
// obligation) after the group's previous digest for the agent and before
// until (by ledger time, read in seq order up to the first event at or
// after until). A group with nothing to digest gets no event. The dedupe
// key is the group, agent and until, so calling it again for the same
// window, here or on another relay sharing the ledger, records nothing
// new. It returns the digests it recorded (or found already recorded).
func (r *Relay) WriteDigests(ctx context.Context, agent string, until time.Time) ([]ledger.Event, error) {
	agent = r.book.ActorID(agent)
	gs, err := r.Groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("gateway: listing groups: %w", err)
	}
	var out []ledger.Event
	for _, g := range gs {
		m, err := r.digestMark(ctx, agent, g.ID)
		if err != nil {
			return out, err
		}
		if g.LastSeq <= max(m.through, m.scanned) {
			continue
		}
		dg := Digest{Summary: attention.Summary{Agent: agent, Policy: attention.MustNotRespond, At: until}, Since: m.through, Until: until}
		if m.scanned, err = r.digestWalk(ctx, agent, g.ID, max(m.through, m.scanned), until, &dg); err != nil {
			return out, err
		}
		if dg.Count > 0 {
			res, err := r.store.Append(ctx, []ledger.Record{{Kind: KindDigest, GroupID: g.ID, By: "system",
				DedupeKey: digestDedupeKey(g.ID, agent, until), Data: mustJSON(EventData{TargetActorID: agent, Digest: &dg})}})
			if err != nil {
				return out, fmt.Errorf("gateway: recording the digest of %s for %s: %w", g.ID, agent, err)
			}
			ev := res[0].Event
			if rd, err := ParseData(ev); err == nil && rd.Digest != nil {
				m.through = max(m.through, rd.Digest.Through)
			}
			out = append(out, ev)
		}
		r.noteDigest(agent, g.ID, m)
	}
	return out, nil
}

// digestWalk adds to dg agent's digest deliveries of group after seq
// after, up to the first event at or after until, and returns the seq of
// the last event it read. Digest deliveries are ambient broadcasts: the
// agent's thread participation and claims do not change them, so the
// walk starts with a fresh tracker wherever it starts.
func (r *Relay) digestWalk(ctx context.Context, agent, group string, after int64, until time.Time, dg *Digest) (int64, error) {
	tr := r.newTracker(agent)
	inj := injector{digest: true}
	for {
		evs, err := r.store.Range(ctx, group, after, nil, streamPage)
		if err != nil {
			return after, fmt.Errorf("gateway: reading group %q: %w", group, err)
		}
		for _, ev := range evs {
			if t, err := ev.Time(); err == nil && !t.Before(until) {
				return after, nil
			}
			d, ok, err := tr.observe(ctx, ev)
			if err != nil {
				return after, err
			}
			after = ev.Seq
			if ok && inj.digested(d) {
				dg.Add(attention.Event{ID: d.EventID, Seq: d.Seq, Group: d.Group, From: d.From,
					Intent: attention.Intent(d.Intent), Context: d.Context, CreatedAt: deliveredAt(d)})
				dg.Through = d.Seq
			}
		}
		if len(evs) < streamPage {
			return after, nil
		}
	}
}

// digestMark is where agent's digests of a group stand: through, the
// Through of the latest digest recorded; scanned, the last seq walked
// (a digest walk starts after both).
type digestMark struct{ through, scanned int64 }

// digestMark returns agent's mark in group: remembered, or found once by
// reading the group's digest events.
func (r *Relay) digestMark(ctx context.Context, agent, group string) (digestMark, error) {
	key := strings.ToLower(agent) + "\x00" + group
	r.mu.Lock()
	m, ok := r.digests[key]
	r.mu.Unlock()
	if ok {
		return m, nil
	}
	for after := int64(0); ; {
		evs, err := r.store.Range(ctx, group, after, []string{KindDigest}, inboxPage)
		if err != nil {
			return m, fmt.Errorf("gateway: reading the digests of group %q: %w", group, err)
		}
		for _, ev := range evs {
			d, err := ParseData(ev)
			if err != nil {
				return m, fmt.Errorf("gateway: digest %s: bad data: %w", ev.ID, err)
			}
			if d.Digest != nil && attention.SameActor(d.TargetActorID, agent) {
				m.through = max(m.through, d.Digest.Through)
			}
		}
		if len(evs) < inboxPage {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	return m, nil
}

// maxDigestMarks bounds the relay's memory of digest marks (one per
// agent with a digest interval and group); past it, it starts over.
const maxDigestMarks = 1 << 16

func (r *Relay) noteDigest(agent, group string, m digestMark) {
	key := strings.ToLower(agent) + "\x00" + group
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.digests) >= maxDigestMarks {
		clear(r.digests)
	}
	r.digests[key] = m
}
