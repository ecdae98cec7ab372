package gateway

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/projection"
)

// projectionPage is how many log events SyncProjection applies in one
// transaction.
const projectionPage = 4096

// projectingStore is the relay's ledger: every append through it (the
// relay's intakes, actions, notices, outbound, and callers of
// Relay.Store) brings the projections up to date before it returns, so
// they are maintained on append (docs/scaling.md "Projections").
type projectingStore struct {
	ledger.Store
	r *Relay
}

func (s projectingStore) Append(ctx context.Context, recs []ledger.Record) ([]ledger.Result, error) {
	res, err := s.Store.Append(ctx, recs)
	if err == nil {
		s.r.syncAfterWrite(ctx)
	}
	return res, err
}

func (s projectingStore) ImportEvents(ctx context.Context, evs []ledger.Event) (int, error) {
	n, err := s.Store.ImportEvents(ctx, evs)
	if n > 0 {
		s.r.syncAfterWrite(ctx)
	}
	return n, err
}

// syncAfterWrite is SyncProjection after an append that succeeded: a
// failure is logged, not returned (the events are recorded), and the
// next read catches up. Concurrent appends share one sync: an append
// that a sync started after (its log read then sees the append's
// events) returns without reading the log again, so under many clients
// one log read and one projection transaction serve every append that
// waited for the lock, not one each.
func (r *Relay) syncAfterWrite(ctx context.Context) {
	if err := r.syncProjection(context.WithoutCancel(ctx), r.projWrites.Add(1)); err != nil {
		r.log.Warn("updating the projections after an append", "err", err)
	}
}

// projectionDB returns the relay's projection DB, opening an in-memory
// one on first use when Options.Projection was nil.
func (r *Relay) projectionDB(ctx context.Context) (*projection.DB, error) {
	if r.proj != nil {
		return r.proj, nil
	}
	db, err := projection.Open(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("gateway: projections: %w", err)
	}
	r.proj, r.projOwned = db, true
	return db, nil
}

// SyncProjection brings the relay's projections up to the end of the
// ledger's log: it applies the events after their high-water mark, in
// pages. On its first call it checks that the mark still names the same
// event of this ledger (not a restored or replaced one) and rebuilds
// from the start when it does not. Reads call it first, so a relay
// sharing a JetStream ledger also sees the others' appends.
func (r *Relay) SyncProjection(ctx context.Context) error {
	return r.syncProjection(ctx, 0)
}

// syncProjection is SyncProjection for the append numbered write
// (projWrites), which it skips when a sync already covered it; 0 always
// syncs.
func (r *Relay) syncProjection(ctx context.Context, write int64) error {
	r.projMu.Lock()
	defer r.projMu.Unlock()
	if write > 0 && r.projSynced >= write {
		return nil
	}
	writes := r.projWrites.Load() // appends that returned before the log read below
	db, err := r.projectionDB(ctx)
	if err != nil {
		return err
	}
	if !r.projChecked {
		if err := r.checkHighWater(ctx, db); err != nil {
			return err
		}
		r.projChecked = true
	}
	r.projPos, err = r.applyLog(ctx, db, r.projPos, 0)
	if err == nil {
		r.projSynced = writes
	}
	return err
}

// applyLog applies the log's events after position after to db, in
// pages, up to position upTo (to the end when upTo is 0), and returns
// the position it applied up to.
func (r *Relay) applyLog(ctx context.Context, db *projection.DB, after, upTo int64) (int64, error) {
	for {
		page, err := r.store.Log(ctx, after, projectionPage)
		if err != nil {
			return after, fmt.Errorf("gateway: projections: reading the log after %d: %w", after, err)
		}
		full := len(page) == projectionPage
		if upTo > 0 {
			for i, l := range page {
				if l.Pos > upTo {
					page, full = page[:i], false
					break
				}
			}
		}
		if len(page) == 0 {
			return after, nil
		}
		facts := make([]projection.Facts, len(page))
		for i, l := range page {
			facts[i] = r.factsOf(l)
		}
		if err := db.Apply(ctx, facts); err != nil {
			return after, fmt.Errorf("gateway: projections: %w", err)
		}
		after = page[len(page)-1].Pos
		if !full {
			return after, nil
		}
	}
}

// ProjectionHighWater returns the log position and event id up to which
// the relay's projections have applied the ledger.
func (r *Relay) ProjectionHighWater(ctx context.Context) (int64, string, error) {
	db, err := r.Projection(ctx)
	if err != nil {
		return 0, "", err
	}
	return db.HighWater(ctx)
}

// CheckProjection brings the relay's projections up to date, rebuilds
// them from the ledger in memory up to the same position and returns the
// rows that differ (projection.DB.Dump lines, "-" stored only, "+"
// rebuilt only): none when the incremental projections are exact.
func (r *Relay) CheckProjection(ctx context.Context) ([]string, error) {
	r.projMu.Lock()
	defer r.projMu.Unlock()
	db, err := r.projectionDB(ctx)
	if err == nil && !r.projChecked {
		err = r.checkHighWater(ctx, db)
		r.projChecked = err == nil
	}
	if err == nil {
		r.projPos, err = r.applyLog(ctx, db, r.projPos, 0)
	}
	if err != nil {
		return nil, err
	}
	fresh, err := projection.Open(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("gateway: projections: %w", err)
	}
	defer fresh.Close()
	if _, err := r.applyLog(ctx, fresh, 0, r.projPos); err != nil {
		return nil, err
	}
	stored, err := db.Dump(ctx)
	if err != nil {
		return nil, err
	}
	rebuilt, err := fresh.Dump(ctx)
	if err != nil {
		return nil, err
	}
	return diffLines(stored, rebuilt), nil
}

// diffLines returns the lines only in a ("-") or only in b ("+"), as
// multisets.
func diffLines(a, b []string) []string {
	n := map[string]int{}
	for _, l := range a {
		n[l]++
	}
	for _, l := range b {
		n[l]--
	}
	var out []string
	for _, l := range a {
		if n[l] > 0 {
			out = append(out, "- "+l)
			n[l]--
		}
	}
	for _, l := range b {
		if n[l] < 0 {
			out = append(out, "+ "+l)
			n[l]++
		}
	}
	return out
}

// checkHighWater sets projPos from db's high-water mark when the ledger
// holds the event it names at that position, and otherwise empties db.
func (r *Relay) checkHighWater(ctx context.Context, db *projection.DB) error {
	pos, id, err := db.HighWater(ctx)
	if err != nil {
		return fmt.Errorf("gateway: projections: %w", err)
	}
	if pos > 0 {
		l, err := r.store.LogBefore(ctx, pos+1, 1)
		if err != nil {
			return fmt.Errorf("gateway: projections: reading the log at %d: %w", pos, err)
		}
		if len(l) == 1 && l[0].Pos == pos && l[0].ID == id {
			r.projPos = pos
			return nil
		}
		r.log.Warn("projections are of another ledger: rebuilding them", "position", pos, "event", id)
	}
	r.projPos = 0
	if err := db.Reset(ctx); err != nil {
		return fmt.Errorf("gateway: projections: %w", err)
	}
	return nil
}

// Reindex empties the relay's projections and rebuilds them from the
// whole ledger (`crosstalk ledger reindex`).
func (r *Relay) Reindex(ctx context.Context) error {
	r.projMu.Lock()
	db, err := r.projectionDB(ctx)
	if err == nil {
		err = db.Reset(ctx)
	}
	if err != nil {
		r.projMu.Unlock()
		return fmt.Errorf("gateway: reindex: %w", err)
	}
	r.projPos, r.projChecked = 0, true
	r.projMu.Unlock()
	return r.SyncProjection(ctx)
}

// Projection returns the relay's projection DB, up to date with the
// ledger (SyncProjection).
func (r *Relay) Projection(ctx context.Context) (*projection.DB, error) {
	if err := r.SyncProjection(ctx); err != nil {
		return nil, err
	}
	r.projMu.Lock()
	defer r.projMu.Unlock()
	return r.proj, nil
}

// closeProjection closes the projection DB the relay opened itself.
func (r *Relay) closeProjection() error {
	r.projMu.Lock()
	defer r.projMu.Unlock()
	if r.proj == nil || !r.projOwned {
		return nil
	}
	err := r.proj.Close()
	r.proj = nil
	return err
}

// factsOf is what the projections keep of l: the same rules as a
// tracker's walk (tracker.observe) and the actor index, for every agent
// at once. An event whose data does not parse leaves only its group's
// count.
func (r *Relay) factsOf(l ledger.Logged) projection.Facts {
	ev := l.Event
	f := projection.Facts{Pos: l.Pos, Group: ev.GroupID, Seq: ev.Seq, EventID: ev.ID, TS: ev.TS}
	d, err := ParseData(ev)
	if err != nil {
		return f
	}
	ae := AttentionEvent(ev, d)
	mark := func(id string, k projection.MarkKind, actor string) {
		if id != "" {
			f.Marks = append(f.Marks, projection.Mark{Event: id, Kind: k, Actor: actor})
		}
	}
	switch ev.Kind {
	case KindAck:
		mark(d.EventID, projection.MarkAck, d.ActorID)
	case KindNotifyAck:
		mark(d.NotifyEventID, projection.MarkAck, d.ActorID) // CCCS §7.2
	case KindDischarge:
		mark(d.EventID, projection.MarkDischarged, "")
	case KindClaim:
		mark(d.EventID, projection.MarkClaimed, "")
	}
	if ev.By != "" {
		switch {
		case ev.Kind == KindMessage && d.ReplyTo != "":
			mark(d.ReplyTo, projection.MarkResponded, ev.By)
		case ev.Kind == KindDisposition:
			mark(d.EventID, projection.MarkResponded, ev.By)
		}
	}
	// Thread participation (C2A): the author, and every recipient named
	// (to_me) unless the event is a broadcast.
	if ae.Thread != "" {
		if ev.By != "" {
			f.Joins = append(f.Joins, projection.Join{Thread: ae.Thread, Kind: projection.JoinAuthor, Token: ev.By})
		}
		if ae.Intent.Canonical() != attention.IntentBroadcast {
			for _, to := range ae.To {
				if strings.TrimSpace(to) != "" {
					f.Joins = append(f.Joins, projection.Join{Thread: ae.Thread, Kind: projection.JoinNamed, Token: to})
				}
			}
		}
	}
	f.Actors = r.actorFacts(ev, d, ae)
	return f
}

// actorFacts is what ev says of its author and recipients for the
// agents list (Relay.Actors).
func (r *Relay) actorFacts(ev ledger.Event, d EventData, ae attention.Event) []projection.ActorFact {
	var out []projection.ActorFact
	if ev.By != "" {
		by := projection.ActorFact{ID: r.book.ActorID(ev.By), Wrote: true}
		switch ev.Kind {
		case KindAck, KindDisposition:
			by.Settles = []string{d.EventID}
		case KindMessage:
			if x := d.X; x != nil && x.Envelope != nil && x.Envelope.Parent != "" {
				by.Settles = []string{x.Envelope.Parent}
			}
		}
		out = append(out, by)
	}
	if ev.Kind != KindMessage {
		return out
	}
	msg := ""
	if x := d.X; x != nil && x.Envelope != nil {
		msg = x.Envelope.Message
	}
	for _, to := range d.To {
		id := r.book.ActorID(to)
		if id == "" || strings.EqualFold(id, ev.By) {
			continue
		}
		a := attention.Agent{ID: id}
		if entry, ok := r.book.Agent(id); ok {
			a.Roles = entry.Roles
		}
		// Owed as decided on arrival, without thread or claim state.
		owes := attention.Decide(ae, a, attention.State{}, r.now()).Policy == attention.MustRespond
		out = append(out, projection.ActorFact{ID: id, Addressed: true, Owes: owes, Msg: msg})
	}
	return out
}

// projView answers a delivery's questions about the history around an
// event from the projections: is the agent in the event's thread, and
// what did later events do to it. It caches per thread for one page.
type projView struct {
	db    *projection.DB
	agent attention.Agent
	// joined is, per group and thread, the seq of the first event that
	// made the agent a participant (math.MaxInt64 when none).
	joined map[[2]string]int64
}

func newProjView(db *projection.DB, agent attention.Agent) *projView {
	return &projView{db: db, agent: agent, joined: map[[2]string]int64{}}
}

// participant reports whether the agent takes part in thread of group
// before the event seq: it wrote in it, or an earlier event named it.
func (v *projView) participant(ctx context.Context, group, thread string, seq int64) (bool, error) {
	key := [2]string{group, thread}
	first, ok := v.joined[key]
	if !ok {
		joins, err := v.db.Joins(ctx, group, thread)
		if err != nil {
			return false, err
		}
		first = math.MaxInt64
		for _, j := range joins {
			if j.Seq < first && v.joinedBy(j) {
				first = j.Seq
			}
		}
		v.joined[key] = first
	}
	return first < seq, nil
}

// joinedBy reports whether j makes the view's agent a participant: the
// rule of tracker.observe (the author, or to_me by C2A directedness).
func (v *projView) joinedBy(j projection.Join) bool {
	if j.Kind == projection.JoinAuthor {
		return strings.EqualFold(j.Token, v.agent.ID)
	}
	probe := attention.Event{Kind: KindMessage, Intent: attention.IntentRequest, To: []string{j.Token}}
	return attention.Decide(probe, v.agent, attention.State{}, time.Time{}).Directedness == attention.ToMe
}

// markSet is the marks on a page's events, for one agent.
type markSet struct {
	acked, responded, discharged, claimed map[string]bool
}

// marksOf reads the marks on the events of evs for agent.
func marksOf(ctx context.Context, db *projection.DB, agent string, evs []ledger.Logged) (markSet, error) {
	ms := markSet{acked: map[string]bool{}, responded: map[string]bool{}, discharged: map[string]bool{}, claimed: map[string]bool{}}
	byGroup := map[string][]string{}
	for _, l := range evs {
		byGroup[l.GroupID] = append(byGroup[l.GroupID], l.ID)
	}
	for g, ids := range byGroup {
		marks, err := db.Marks(ctx, g, ids)
		if err != nil {
			return ms, fmt.Errorf("gateway: %w", err)
		}
		for _, m := range marks {
			switch m.Kind {
			case projection.MarkAck:
				ms.acked[m.Event] = ms.acked[m.Event] || strings.EqualFold(m.Actor, agent)
			case projection.MarkResponded:
				ms.responded[m.Event] = ms.responded[m.Event] || strings.EqualFold(m.Actor, agent)
			case projection.MarkDischarged:
				ms.discharged[m.Event] = true
			case projection.MarkClaimed:
				ms.claimed[m.Event] = true
			}
		}
	}
	return ms, nil
}
