package gateway

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
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
	return s.appendData(ctx, recs, nil)
}

// appendData is Append with the data the relay marshalled into recs
// (data[i] for recs[i]; nil, or a nil entry, when it has none): the
// projections then take the facts of the appended events from it
// instead of decoding the stored data again.
func (s projectingStore) appendData(ctx context.Context, recs []ledger.Record, data []*EventData) ([]ledger.Result, error) {
	res, err := s.Store.Append(ctx, recs)
	if err == nil {
		s.r.projectAppended(ctx, res, data)
	}
	return res, err
}

// CursorsOf implements ledger.CursorLister: the ledger's own, or an
// error wrapping errors.ErrUnsupported when it has none.
func (s projectingStore) CursorsOf(ctx context.Context, actor string) (map[string]ledger.Cursor, error) {
	return ledger.CursorsOf(ctx, s.Store, actor)
}

func (s projectingStore) ImportEvents(ctx context.Context, evs []ledger.Event) (int, error) {
	n, err := s.Store.ImportEvents(ctx, evs)
	if n > 0 {
		s.r.projQ.markStale()
		s.r.syncAfterWrite(ctx)
	}
	return n, err
}

// projEvery is the least time between two syncs on the write path.
// Each sync is a transaction whose fixed cost (the counters, the mark,
// COMMIT's page writes) is several events' worth; under load one sync
// per projEvery applies every append of that time at once. At 50 ms
// rather than 10 ms, a sync under load carries ~250 events instead of
// ~50: COMMIT writes the same tail pages of each table once instead of
// five times, and the multi-row inserts run in fewer, fuller statements
// (docs/performance.md "Session 7"). Reads sync first, so they still see
// every append; only the write path's high-water mark lags more.
const projEvery = 50 * time.Millisecond

// projGapWait is how long the write path waits for the facts of a log
// position that the appends after it have passed (an append still on its
// way back, or one by another process) before it reads the log instead.
const projGapWait = 250 * time.Millisecond

// projQueueMax bounds the facts waiting in the queue; beyond it the write
// path reads the log.
const projQueueMax = 4 * projectionPage

// projEpoch is the origin of Relay.projAt (a monotonic clock).
var projEpoch = time.Now()

// projQueue holds the facts of the relay's own appends, by log
// position, until a sync applies them: the write path projects what it
// appended without reading it back from the ledger and decoding it
// again, as long as the positions it holds follow the high-water mark
// without a gap. Anything else (a store that does not report positions,
// an import, a gap that stays open) makes the next sync read the log.
//
// Appenders only add to in, under mu, for as short as an append to a
// slice; the sorting and the gap bookkeeping are the taker's, who holds
// Relay.projMu. The buffers go round: a run take returns is, once its
// taker is done with it (the next take), the next in.
type projQueue struct {
	mu    sync.Mutex
	in    []projection.Facts // added since the last take, in no order
	stale bool               // appends without positions: read the log

	held  []projection.Facts // taken, after a gap, sorted by position (projMu)
	gapAt int64              // when that gap was first seen (projEpoch), 0 when none (projMu)
	run   []projection.Facts // the buffer of the last run taken (projMu)
}

// projQueueKeep bounds the room of a buffer the queue reuses (a burst
// or a gap may grow one to projQueueMax).
const projQueueKeep = 1024

// add queues facts; stale says an append did not report the positions of
// some of its events.
func (q *projQueue) add(facts []projection.Facts, stale bool) {
	q.mu.Lock()
	q.stale = q.stale || stale || len(q.in)+len(facts) > projQueueMax
	if q.stale {
		// The next sync reads the log, which holds these events
		// (committed before this call): keeping them would only grow
		// the queue while a sync is under way.
		q.in = nil
	} else {
		q.in = append(q.in, facts...)
	}
	q.mu.Unlock()
}

func (q *projQueue) markStale() {
	q.mu.Lock()
	q.stale = true
	q.mu.Unlock()
}

// take removes and returns the queued facts that follow position after
// without a gap. log says the caller must read the log instead: the queue
// is stale, or a gap after the mark has stayed open for projGapWait. The
// caller holds Relay.projMu.
//
// run is valid until the next take, which reuses its room.
func (q *projQueue) take(after, now int64) (run []projection.Facts, log bool) {
	free := q.run // the last take's caller is done with it
	clear(free[:cap(free)])
	if cap(free) > projQueueKeep {
		free = nil
	}
	q.mu.Lock()
	in, stale := q.in, q.stale
	q.in = free[:0]
	q.mu.Unlock()
	q.run = in
	if stale || len(q.held)+len(in) > projQueueMax {
		q.markStale() // until the log is read (readLog)
		q.held, q.gapAt = nil, 0
		return nil, true
	}
	// Without a gap held, in is the whole queue: sorted where it is, its
	// run is returned in place, and only what follows a gap is copied.
	all := in
	if len(q.held) > 0 {
		q.held = append(q.held, in...)
		all = q.held
	}
	slices.SortFunc(all, func(a, b projection.Facts) int { return cmp.Compare(a.Pos, b.Pos) })
	i := 0
	for i < len(all) && all[i].Pos <= after {
		i++ // applied from the log before it was queued
	}
	n := i
	for n < len(all) && all[n].Pos == after+1+int64(n-i) {
		n++
	}
	if len(q.held) > 0 {
		run = append(in[:0], q.held[i:n]...)
		q.held = slices.Delete(q.held, 0, n)
		q.run = run
	} else {
		run = in[i:n]
		q.held = append(q.held, in[n:]...)
	}
	switch {
	case len(q.held) == 0:
		q.gapAt = 0
	case len(run) > 0 || q.gapAt == 0:
		q.gapAt = now // a gap, or a new one after this run
	case now-q.gapAt > int64(projGapWait):
		return run, true
	}
	return run, false
}

// readLog is called before the log is read up to its end: appends that
// did not report positions until now are then applied.
func (q *projQueue) readLog() {
	q.mu.Lock()
	q.stale = false
	q.mu.Unlock()
}

// applied drops the queued facts at or before position upTo (the log
// was read up to it). The caller holds Relay.projMu.
func (q *projQueue) applied(upTo int64) {
	done := func(f projection.Facts) bool { return f.Pos <= upTo }
	q.mu.Lock()
	q.in = slices.DeleteFunc(q.in, done)
	q.mu.Unlock()
	q.held = slices.DeleteFunc(q.held, done)
	if len(q.held) == 0 {
		q.gapAt = 0
	}
}

// projectAppended queues the facts of the events res appended (data as
// for appendData) and syncs the projections as syncAfterWrite does.
func (r *Relay) projectAppended(ctx context.Context, res []ledger.Result, data []*EventData) {
	var one [1]projection.Facts // an intake's one event: add copies the facts
	facts := one[:0]
	if len(res) > len(one) {
		facts = make([]projection.Facts, 0, len(res))
	}
	stale := false
	for i, x := range res {
		switch {
		case x.Duplicate:
		case x.Pos == 0:
			stale = true
		default:
			var d *EventData
			if i < len(data) {
				d = data[i]
			}
			facts = append(facts, r.factsOf(ledger.Logged{Pos: x.Pos, Event: x.Event}, d))
		}
	}
	r.projQ.add(facts, stale)
	r.syncAfterWrite(ctx)
}

// syncAfterWrite applies the queued facts after an append that
// succeeded, or reads the log when they do not follow the mark (see
// projQueue). A failure is logged, not returned (the events are
// recorded). It does not run when a sync is already under way (the
// catch-up of a start, another append's) nor within projEvery of the
// last one, nor after Quiesce: every read syncs first, so the next one
// applies what was skipped, an intake never waits for a catch-up, and a
// burst of appends costs one projection transaction per projEvery, not
// one per append. (Running it in a goroutine of its own, off the intake's
// latency, raced with callers' Options.Now clocks and was not measurably
// better: docs/performance.md "Session 7".)
func (r *Relay) syncAfterWrite(ctx context.Context) {
	now := int64(time.Since(projEpoch))
	if now-r.projAt.Load() < int64(r.projEvery) || !r.projMu.TryLock() {
		return
	}
	if r.projQuiet {
		r.projMu.Unlock()
		return
	}
	r.projAt.Store(now)
	err := r.syncQueuedLocked(context.WithoutCancel(ctx), now)
	r.projMu.Unlock()
	if err != nil {
		r.log.Warn("updating the projections after an append", "err", err)
	}
}

// Quiesce waits for a write-path projection sync under way, applies what
// the appends queued since, and lets appends start no more syncs (reads
// still bring the projections up to date first). Call it before closing
// the ledger or the projection DB: an append still running then (a
// shutdown that timed out) does not start a sync against closed files.
func (r *Relay) Quiesce(ctx context.Context) error {
	r.projMu.Lock()
	defer r.projMu.Unlock()
	r.projQuiet = true
	if r.proj == nil || !r.projChecked {
		// Never synced: applying the queue would first read the whole
		// log (a catch-up a command that only closes must not pay);
		// the next start catches up from the log anyway.
		return nil
	}
	return r.syncQueuedLocked(ctx, int64(time.Since(projEpoch)))
}

// syncQueuedLocked applies the queued facts that follow the mark, or
// reads the log as syncLocked does when the queue says so.
func (r *Relay) syncQueuedLocked(ctx context.Context, now int64) error {
	if !r.projChecked {
		return r.syncLocked(ctx)
	}
	run, log := r.projQ.take(r.projPos, now)
	if log {
		return r.syncLocked(ctx)
	}
	if len(run) == 0 {
		return nil
	}
	db, err := r.projectionDB(ctx)
	if err != nil {
		return err
	}
	if err := db.Apply(ctx, run); err != nil {
		// The run left the queue: the gap it leaves makes a later sync
		// read the log.
		return fmt.Errorf("gateway: projections: %w", err)
	}
	r.projPos = run[len(run)-1].Pos
	return nil
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
	// Nothing else holds it: close it when the relay is garbage.
	runtime.AddCleanup(r, func(db *projection.DB) { db.Close() }, db)
	r.proj = db
	return db, nil
}

// SyncProjection brings the relay's projections up to the end of the
// ledger's log: it applies the events after their high-water mark, in
// pages. On its first call it checks that the mark still names the same
// event of this ledger (not a restored or replaced one) and rebuilds
// from the start when it does not. Reads call it first, so a relay
// sharing a JetStream ledger also sees the others' appends.
func (r *Relay) SyncProjection(ctx context.Context) error {
	r.projMu.Lock()
	defer r.projMu.Unlock()
	return r.syncLocked(ctx)
}

// syncLocked is SyncProjection with projMu held.
func (r *Relay) syncLocked(ctx context.Context) error {
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
	// What the queue holds right after the mark needs no log read nor
	// decode: apply it first; the log read then starts after it (most
	// often an empty page).
	if run, _ := r.projQ.take(r.projPos, int64(time.Since(projEpoch))); len(run) > 0 {
		if err := db.Apply(ctx, run); err != nil {
			return fmt.Errorf("gateway: projections: %w", err)
		}
		r.projPos = run[len(run)-1].Pos
	}
	r.projQ.readLog()
	r.projLogs.Add(1)
	r.projPos, err = r.applyLog(ctx, db, r.projPos, 0)
	r.projQ.applied(r.projPos)
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
			facts[i] = r.factsOf(l, nil)
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
	if err := r.syncLocked(ctx); err != nil {
		return nil, err
	}
	db := r.proj
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
	defer r.projMu.Unlock()
	db, err := r.projectionDB(ctx)
	if err == nil {
		err = db.Reset(ctx)
	}
	if err != nil {
		return fmt.Errorf("gateway: reindex: %w", err)
	}
	r.projPos, r.projChecked = 0, true
	return r.syncLocked(ctx)
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

// factsOf is what the projections keep of l: the same rules as a
// tracker's walk (tracker.observe) and the actor index, for every agent
// at once. pd is l's data as the relay marshalled it, nil to decode it
// from l. An event whose data does not parse leaves only its group's
// count.
func (r *Relay) factsOf(l ledger.Logged, pd *EventData) projection.Facts {
	ev := l.Event
	f := projection.Facts{Pos: l.Pos, Group: ev.GroupID, Seq: ev.Seq, EventID: ev.ID, TS: ev.TS}
	if pd == nil {
		d, err := ParseData(ev)
		if err != nil {
			return f
		}
		pd = &d
	}
	d := *pd
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
	in := ae.Intent.Canonical()
	// Thread participation (C2A): the author, and every recipient named
	// (to_me) unless the event is a broadcast.
	if ae.Thread != "" {
		f.Joins = make([]projection.Join, 0, 1+len(ae.To))
		if ev.By != "" {
			f.Joins = append(f.Joins, projection.Join{Thread: ae.Thread, Kind: projection.JoinAuthor, Token: ev.By})
		}
		if in != attention.IntentBroadcast {
			for _, to := range ae.To {
				if strings.TrimSpace(to) != "" {
					f.Joins = append(f.Joins, projection.Join{Thread: ae.Thread, Kind: projection.JoinNamed, Token: to})
				}
			}
		}
	}
	// A message's recipients as the address book names them (ids[i] for
	// d.To[i]), which the actor and the owe facts both need.
	var buf [4]string
	var ids []string
	if ev.Kind == KindMessage {
		ids = buf[:0]
		for _, to := range d.To {
			ids = append(ids, r.book.ActorID(to))
		}
	}
	f.Actors = r.actorFacts(ev, d, ae, ids)
	r.openSetFacts(&f, ev, d, in, ids)
	return f
}

// oweTokens returns the tokens a recipient as recorded may owe under:
// a role or group selector as such ("@all" for every spelling of it), an
// actor as written and as the address book names it (id, its ActorID),
// in lower case. They are one or two: out is room for them.
func oweTokens(out *[2]string, to, id string) []string {
	t := strings.ToLower(strings.TrimSpace(to))
	switch {
	case t == "":
		return nil
	case t == "all" || t == "*":
		t = "@all"
	case t == "user":
		t = "@user"
	case strings.HasPrefix(t, "@"):
	default:
		if id := strings.ToLower(id); id != t {
			out[0], out[1] = t, id
			return out[:2]
		}
	}
	out[0] = t
	return out[:1]
}

// openSetFacts adds to f what Owed and WaitingOn read: who may owe a
// message (a superset: reads decide each item again), the obligation's
// author and delegate, what an event settles, discharges, resolves or
// answers (the rules of obligationWalk.apply). in is the event's
// canonical intent, ids a message's recipients' ActorIDs (factsOf).
func (r *Relay) openSetFacts(f *projection.Facts, ev ledger.Event, d EventData, in attention.Intent, ids []string) {
	answer := func(event string, reply, ack bool) {
		if event != "" && ev.By != "" {
			f.Answers = append(f.Answers, projection.Answer{Event: event, Actor: ev.By, Reply: reply, Ack: ack})
		}
	}
	settle := func(event, actor string, ack bool) {
		if event != "" && actor != "" {
			f.Settles = append(f.Settles, projection.Settle{Event: event, Token: strings.ToLower(actor), Ack: ack})
		}
	}
	switch ev.Kind {
	case KindMessage:
		ob := d.Obligation
		if in != attention.IntentBroadcast && (ob != nil || in.AsksToMe()) {
			var tokens [2]string
			for i, to := range d.To {
				for _, t := range oweTokens(&tokens, to, ids[i]) {
					if strings.HasPrefix(t, "@") && ob == nil {
						continue // a role's request is claimed first, never owed
					}
					f.Owes = append(f.Owes, projection.Owe{Token: t, Obligation: ob != nil, Ack: ob != nil && ob.Ack})
				}
			}
		}
		if ob != nil {
			f.Waits = append(f.Waits, strings.ToLower(ev.By))
			if dl := strings.ToLower(ob.Delegate); dl != "" && dl != f.Waits[0] {
				f.Waits = append(f.Waits, dl)
			}
			f.WaitAuthor, f.WaitHandoff = ev.By, d.Protocol != nil && d.Protocol.EventType == ProtocolHandoff
		}
		if d.ReplyTo != "" {
			settle(d.ReplyTo, ev.By, false)
			answer(d.ReplyTo, true, false)
		}
	case KindAck:
		settle(d.EventID, d.ActorID, true)
		answer(d.EventID, false, true)
	case KindNotifyAck:
		settle(d.NotifyEventID, d.ActorID, true)
	case KindDisposition:
		settle(d.EventID, ev.By, false)
		answer(d.EventID, false, false)
	case KindReaction:
		answer(d.EventID, false, false)
	case KindDischarge:
		f.Discharges, f.DischargedBy = d.EventID, ev.By
	case KindNotify:
		if d.Kind == KindUnblocked && d.RelatedEventID != "" {
			f.Resolves, f.ResolvedBy = d.RelatedEventID, d.ActorID
		}
		if rd, ok := rungOf(ev); ok {
			f.RungOf, f.Rung, f.EscalatedTo = rd.RelatedEventID, rd.Rung, rd.EscalatedTo
		}
	}
}

// actorFacts is what ev says of its author and recipients for the
// agents list (Relay.Actors); ids are a message's recipients' ActorIDs
// (factsOf).
func (r *Relay) actorFacts(ev ledger.Event, d EventData, ae attention.Event, ids []string) []projection.ActorFact {
	out := make([]projection.ActorFact, 0, 1+len(ids))
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
	for _, id := range ids {
		if id == "" || attention.SameActor(id, ev.By) {
			continue
		}
		a := r.agentOf(id)
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
		return attention.SameActor(j.Token, v.agent.ID)
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
				ms.acked[m.Event] = ms.acked[m.Event] || attention.SameActor(m.Actor, agent)
			case projection.MarkResponded:
				ms.responded[m.Event] = ms.responded[m.Event] || attention.SameActor(m.Actor, agent)
			case projection.MarkDischarged:
				ms.discharged[m.Event] = true
			case projection.MarkClaimed:
				ms.claimed[m.Event] = true
			}
		}
	}
	return ms, nil
}
