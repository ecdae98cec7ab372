package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// Limits of the writer.
const (
	// maxBatchMsgs is the most messages in one atomic batch
	// (nats-server's default max_batch_size is 1000).
	maxBatchMsgs = 1000
	// retryLimit is how long one round of appends keeps retrying
	// conflicts and transient errors before it gives up.
	retryLimit = 2 * time.Minute
	// msgOverhead is a generous allowance for an event message's
	// subject, headers and envelope fields beyond its data.
	msgOverhead = 4096
)

// NATS headers the writer sets.
const (
	hdrMsgID         = "Nats-Msg-Id"
	hdrExpLastSubj   = "Nats-Expected-Last-Subject-Sequence"
	hdrExpLastSubjOn = "Nats-Expected-Last-Subject-Sequence-Subject"
	hdrBatchID       = "Nats-Batch-Id"
	hdrBatchSeq      = "Nats-Batch-Sequence"
	hdrBatchCommit   = "Nats-Batch-Commit"
)

// writeReq is one Append or ImportEvents call, queued for the writer.
type writeReq struct {
	ctx    context.Context
	recs   []ledger.Record // Append; nil for an import
	events []ledger.Event  // ImportEvents
	done   chan writeDone  // buffered, one answer
}

type writeDone struct {
	res []ledger.Result
	n   int
	err error
}

// head is what the writer knows of a group's last event.
type head struct {
	seq  int64     // last seq, 0 for an empty group
	sseq uint64    // its stream sequence, 0 for an empty group
	ts   time.Time // its ts
}

// Append implements ledger.Store. All records of one call are committed
// in one JetStream atomic batch, together with their index messages; see
// the package documentation for how the writer combines concurrent calls.
func (s *Store) Append(ctx context.Context, recs []ledger.Record) ([]ledger.Result, error) {
	if len(recs) == 0 {
		return nil, s.check("append")
	}
	if len(recs) > MaxRecords {
		return nil, fmt.Errorf("jetstream: append: %w: %d records in one batch, at most %d", ledger.ErrInvalid, len(recs), MaxRecords)
	}
	norm := make([]ledger.Record, len(recs))
	limit := int(s.nc.MaxPayload())
	for i, r := range recs {
		r, err := r.Normalized()
		if err != nil {
			return nil, fmt.Errorf("jetstream: append record %d: %w", i, err)
		}
		if size := len(r.Data) + len(r.Kind) + len(r.GroupID) + len(r.ScopeKey) + len(r.By) + 2*len(r.DedupeKey) + msgOverhead; limit > 0 && size > limit {
			return nil, fmt.Errorf("jetstream: append record %d: %w: about %d bytes, more than the server's max_payload %d", i, ledger.ErrInvalid, size, limit)
		}
		if len(r.DedupeKey) > 1024 {
			return nil, fmt.Errorf("jetstream: append record %d: %w: dedupe key longer than 1024 bytes", i, ledger.ErrInvalid)
		}
		norm[i] = r
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("jetstream: append: %w", err)
	}
	d, err := s.submit(ctx, &writeReq{ctx: ctx, recs: norm}, "append")
	return d.res, err
}

// ImportEvents implements ledger.Store.
func (s *Store) ImportEvents(ctx context.Context, evs []ledger.Event) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("jetstream: import: %w", err)
	}
	if len(evs) == 0 {
		return 0, s.check("import")
	}
	d, err := s.submit(ctx, &writeReq{ctx: ctx, events: evs}, "import")
	return d.n, err
}

// submit queues req for the writer and waits for its answer. Once queued,
// the request is carried out even if ctx ends (the caller then gets ctx's
// error, and the write may or may not be committed).
func (s *Store) submit(ctx context.Context, req *writeReq, what string) (writeDone, error) {
	req.done = make(chan writeDone, 1)
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return writeDone{}, fmt.Errorf("jetstream: %s: %w", what, ledger.ErrClosed)
	}
	select {
	case s.queue <- req:
	case <-ctx.Done():
		s.mu.RUnlock()
		return writeDone{}, fmt.Errorf("jetstream: %s: %w", what, ctx.Err())
	}
	s.mu.RUnlock()
	select {
	case d := <-req.done:
		return d, d.err
	case <-ctx.Done():
		return writeDone{}, fmt.Errorf("jetstream: %s: %w (it may still be committed)", what, ctx.Err())
	}
}

// writer is the Store's one writing goroutine. It takes every append
// queued (up to MaxRecords records) and commits them as one atomic batch:
// one round trip to the stream leader, and on replicated streams one
// replication round, for all of them.
func (s *Store) writer() {
	defer close(s.wdone)
	heads := make(map[string]head)
	var next *writeReq
	for {
		req := next
		next = nil
		if req == nil {
			var ok bool
			if req, ok = <-s.queue; !ok {
				return
			}
		}
		if req.recs == nil {
			n, err := s.importEvents(heads, req)
			req.done <- writeDone{n: n, err: err}
			continue
		}
		round := []*writeReq{req}
		n := len(req.recs)
	fill:
		for n < MaxRecords {
			select {
			case r, ok := <-s.queue:
				if !ok {
					break fill
				}
				if r.recs == nil || n+len(r.recs) > MaxRecords {
					next = r
					break fill
				}
				round = append(round, r)
				n += len(r.recs)
			default:
				break fill
			}
		}
		s.appendRound(heads, round)
	}
}

// plannedEvent is one record of a round: a new event, or a duplicate.
type plannedEvent struct {
	ev       ledger.Event
	dup      bool
	dupOf    int // index into plan.events of the new event it duplicates, -1 if stored
	existing ledger.Event
	pos      int // position of the event message in the batch
}

// plan is one atomic batch: the messages and what they mean.
type plan struct {
	reqs    []*writeReq
	recs    [][]plannedEvent // per request, per record
	events  []*plannedEvent  // the new events, in batch order
	msgs    []*nats.Msg
	heads   map[string]head   // the groups' heads after the batch
	expects map[string]uint64 // group → expected last stream sequence, until its first message carries it
	checked map[string]bool   // groups whose compare-and-set is in the batch
}

func newPlan(reqs []*writeReq, heads map[string]head) *plan {
	return &plan{reqs: reqs, heads: heads, expects: make(map[string]uint64), checked: make(map[string]bool)}
}

// touch notes that the batch writes to group, whose head is h before the
// batch: the group's first message in the batch will carry the
// compare-and-set on h.
func (p *plan) touch(group string, h head) {
	if !p.checked[group] {
		p.checked[group] = true
		p.expects[group] = h.sseq
	}
}

// appendRound commits one round of appends, planning again after
// conflicts with other writers, and answers every request.
func (s *Store) appendRound(heads map[string]head, reqs []*writeReq) {
	start := time.Now()
	conflicts := 0
	var lastErr error
	answer := func(r *writeReq, res []ledger.Result, err error) { r.done <- writeDone{res: res, err: err} }
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if time.Since(start) > retryLimit {
				for _, r := range reqs {
					answer(r, nil, fmt.Errorf("jetstream: append: giving up after %v: %w", retryLimit, lastErr))
				}
				return
			}
			backoff(attempt)
		}
		live := reqs[:0:0]
		for _, r := range reqs {
			if err := r.ctx.Err(); err != nil {
				answer(r, nil, fmt.Errorf("jetstream: append: %w", err))
				continue
			}
			live = append(live, r)
		}
		if reqs = live; len(reqs) == 0 {
			return
		}
		p, err := s.planAppend(heads, reqs, conflicts)
		var first uint64
		if err == nil && len(p.msgs) > 0 {
			first, err = s.commitPlan(p, start.Add(retryLimit))
		}
		switch {
		case err == nil:
			s.finish(heads, p, first)
			for i, r := range p.reqs {
				answer(r, results(p, i), nil)
			}
			return
		case isConflict(err) || isTransient(err):
			lastErr = err
			s.count(func(st *Stats) { st.Conflicts++ })
			s.log.Debug("append: conflict with another writer, planning again", "attempt", attempt, "err", err)
			if p != nil {
				for g := range p.heads {
					delete(heads, g)
				}
			}
			conflicts++
		default:
			for _, r := range reqs {
				answer(r, nil, err)
			}
			return
		}
	}
}

// commitPlan sends p's batch until its outcome is known. It returns the
// stream sequence of the batch's first message if it was committed, a
// conflict error if it was not (the caller plans again), or another
// error. After a send whose answer was lost (a timeout, a leader change)
// it sends the very same batch again: with the same ids, seqs and
// compare-and-set values, at most one send can ever be committed, and
// the first event's id index tells whether one was.
func (s *Store) commitPlan(p *plan, deadline time.Time) (uint64, error) {
	unsure := false
	for attempt := 0; ; attempt++ {
		first, err := s.publishBatch(p.msgs)
		if err == nil {
			return first, nil
		}
		if unsure {
			f, ok, cerr := s.committedAt(p)
			switch {
			case cerr == nil && ok:
				return f, nil
			case cerr == nil && !isTransient(err):
				return 0, err // not stored: a conflict or a lasting error
			}
		} else if !isTransient(err) {
			return 0, err
		}
		unsure = true
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("jetstream: batch outcome unknown after %v: %w", retryLimit, err)
		}
		s.log.Warn("batch outcome unknown, sending it again", "attempt", attempt, "err", err)
		s.count(func(st *Stats) { st.Resends++ })
		backoff(attempt + 3)
	}
}

// backoff sleeps before retry attempt n: exponential with jitter, at
// most about 100ms, so that writers in several processes spread out.
func backoff(n int) {
	d := time.Duration(1<<min(n, 7)) * time.Millisecond
	time.Sleep(d/2 + rand.N(d))
}

// results builds request i's results after its plan was committed.
func results(p *plan, i int) []ledger.Result {
	out := make([]ledger.Result, len(p.recs[i]))
	for j, pe := range p.recs[i] {
		switch {
		case !pe.dup:
			out[j] = ledger.Result{Event: pe.ev}
		case pe.dupOf >= 0:
			out[j] = ledger.Result{Event: p.events[pe.dupOf].ev, Duplicate: true}
		default:
			out[j] = ledger.Result{Event: pe.existing, Duplicate: true}
		}
	}
	return out
}

// finish records a committed plan whose first message got stream
// sequence first.
func (s *Store) finish(heads map[string]head, p *plan, first uint64) {
	if len(p.msgs) > 0 {
		s.count(func(st *Stats) { st.Batches++; st.Records += int64(len(p.events)) })
	}
	for g, h := range p.heads {
		heads[g] = h
	}
	for _, pe := range p.events {
		sseq := first + uint64(pe.pos)
		s.rememberPos(pe.ev.GroupID, pe.ev.Seq, sseq)
		if h := heads[pe.ev.GroupID]; h.seq == pe.ev.Seq {
			h.sseq = sseq
			heads[pe.ev.GroupID] = h
		}
	}
}

// committedAt reports whether plan p is in the stream, by looking its
// first new event's id index up on the stream leader, and if so the
// stream sequence of p's first message.
func (s *Store) committedAt(p *plan) (uint64, bool, error) {
	if len(p.events) == 0 {
		return 0, false, nil
	}
	ev := p.events[0]
	_, seq, err := s.lookupIndex(context.Background(), s.idSubject(ev.ev.ID), true)
	if errors.Is(err, errNoMsg) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	// The id index message directly follows its event message.
	return seq - 1 - uint64(ev.pos), true, nil
}

// groupHead reads a group's last event. fresh asks the stream leader.
func (s *Store) groupHead(ctx context.Context, group string, fresh bool) (head, error) {
	m, err := s.get(ctx, getRequest{LastFor: s.groupFilter(group)}, fresh)
	if errors.Is(err, errNoMsg) {
		return head{}, nil
	}
	if err != nil {
		return head{}, err
	}
	ev, err := decodeEvent(m)
	if err != nil {
		return head{}, err
	}
	ts, err := ev.Time()
	if err != nil {
		return head{}, err
	}
	s.rememberPos(group, ev.Seq, m.seq)
	return head{seq: ev.Seq, sseq: m.seq, ts: ts}, nil
}

// headsFor returns the current heads of groups, from the writer's cache
// or the server.
func (s *Store) headsFor(heads map[string]head, groups map[string]bool, fresh bool) (map[string]head, error) {
	out := make(map[string]head, len(groups))
	for g := range groups {
		h, ok := heads[g]
		if !ok {
			var err error
			if h, err = s.groupHead(context.Background(), g, fresh); err != nil {
				return nil, err
			}
			heads[g] = h
		}
		out[g] = h
	}
	return out, nil
}

// lookupEvents follows the index messages on subjects to their events
// and returns those found, by subject. fresh asks the stream leader,
// subject by subject; otherwise one multi-get answers for all.
func (s *Store) lookupEvents(subjects []string, fresh bool) (map[string]ledger.Event, error) {
	out := make(map[string]ledger.Event)
	if len(subjects) == 0 {
		return out, nil
	}
	ctx := context.Background()
	if fresh {
		for _, subj := range subjects {
			ev, err := s.eventByIndex(ctx, subj, true)
			if errors.Is(err, errNoMsg) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[subj] = ev
		}
		return out, nil
	}
	for len(subjects) > 0 {
		chunk := subjects[:min(len(subjects), 1000)]
		subjects = subjects[len(chunk):]
		msgs, err := s.directMany(ctx, getRequest{MultiLast: chunk})
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			var e indexEntry
			if err := json.Unmarshal(m.data, &e); err != nil {
				return nil, fmt.Errorf("jetstream: index %s: %w", m.subject, err)
			}
			if e.Back == 0 || e.Back >= m.seq {
				return nil, fmt.Errorf("jetstream: index %s: bad back pointer %d at %d", m.subject, e.Back, m.seq)
			}
			ev, err := s.eventAt(ctx, m.seq-e.Back)
			if err != nil {
				return nil, fmt.Errorf("jetstream: index %s: %w", m.subject, err)
			}
			if ev.ID != e.ID {
				return nil, fmt.Errorf("jetstream: index %s points to event %s, want %s", m.subject, ev.ID, e.ID)
			}
			out[m.subject] = ev
		}
	}
	return out, nil
}

// existingKeys returns the stored events of those dedupe keys that are
// in the dedupe index, by key.
func (s *Store) existingKeys(keys map[string]bool, fresh bool) (map[string]ledger.Event, error) {
	subjects := make([]string, 0, len(keys))
	bySubj := make(map[string]string, len(keys))
	for k := range keys {
		subj := s.keySubject(k)
		subjects = append(subjects, subj)
		bySubj[subj] = k
	}
	found, err := s.lookupEvents(subjects, fresh)
	if err != nil {
		return nil, err
	}
	out := make(map[string]ledger.Event, len(found))
	for subj, ev := range found {
		if ev.DedupeKey != bySubj[subj] {
			return nil, fmt.Errorf("jetstream: dedupe index %s points to event %s with key %q", subj, ev.ID, ev.DedupeKey)
		}
		out[ev.DedupeKey] = ev
	}
	return out, nil
}

// planAppend turns a round of appends into one atomic batch. The first
// plan of a round is optimistic: it takes the group heads from the cache
// and does not look the dedupe keys up, since the batch's own
// compare-and-set refuses a key that exists. After a conflict, it reads
// the heads again and looks the keys up with one multi-get; after more
// conflicts, both on the stream leader.
func (s *Store) planAppend(heads map[string]head, reqs []*writeReq, conflicts int) (*plan, error) {
	keys := make(map[string]bool)
	groups := make(map[string]bool)
	for _, r := range reqs {
		for _, rec := range r.recs {
			if rec.DedupeKey != "" {
				keys[rec.DedupeKey] = true
			}
			groups[rec.GroupID] = true
		}
	}
	stored := map[string]ledger.Event{}
	if conflicts > 0 {
		var err error
		if stored, err = s.existingKeys(keys, conflicts > 1); err != nil {
			return nil, err
		}
	}
	cur, err := s.headsFor(heads, groups, conflicts > 0)
	if err != nil {
		return nil, err
	}
	p := newPlan(reqs, cur)
	newKeys := make(map[string]int) // key → index in p.events
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, r := range reqs {
		out := make([]plannedEvent, len(r.recs))
		for j, rec := range r.recs {
			if ev, ok := stored[rec.DedupeKey]; ok && rec.DedupeKey != "" {
				out[j] = plannedEvent{dup: true, dupOf: -1, existing: ev}
				continue
			}
			if k, ok := newKeys[rec.DedupeKey]; ok && rec.DedupeKey != "" {
				out[j] = plannedEvent{dup: true, dupOf: k}
				continue
			}
			h := p.heads[rec.GroupID]
			ts := now
			if ts.Before(h.ts) {
				ts = h.ts
			}
			ev := ledger.Event{
				V: ledger.Version, ID: envelope.NewID(), TS: ledger.FormatTime(ts), Seq: h.seq + 1,
				Kind: rec.Kind, GroupID: rec.GroupID, ScopeKey: rec.ScopeKey, By: rec.By,
				Data: rec.Data, DedupeKey: rec.DedupeKey,
			}
			p.touch(rec.GroupID, h)
			p.heads[rec.GroupID] = head{seq: ev.Seq, ts: ts}
			out[j] = plannedEvent{ev: ev}
			if rec.DedupeKey != "" {
				newKeys[rec.DedupeKey] = len(p.events)
			}
			if err := s.addEvent(p, &out[j]); err != nil {
				return nil, err
			}
		}
		p.recs = append(p.recs, out)
	}
	return p, nil
}

// addEvent appends pe's messages to the batch: the event itself (with
// the group's compare-and-set the first time the batch touches the
// group), its id index, its dedupe index and, every posEvery events, a
// position checkpoint. Index messages must not exist yet (expected last
// subject sequence 0), which makes ids and dedupe keys unique forever.
func (s *Store) addEvent(p *plan, pe *plannedEvent) error {
	ev := pe.ev
	data, err := encodeEvent(ev)
	if err != nil {
		return err
	}
	m := nats.NewMsg(s.evSubject(ev.GroupID, ev.Kind))
	m.Data = data
	if ev.DedupeKey != "" {
		m.Header.Set(hdrMsgID, ev.DedupeKey)
	}
	if sseq, ok := p.expects[ev.GroupID]; ok {
		m.Header.Set(hdrExpLastSubj, strconv.FormatUint(sseq, 10))
		m.Header.Set(hdrExpLastSubjOn, s.groupFilter(ev.GroupID))
		delete(p.expects, ev.GroupID) // only the group's first message checks
	}
	pe.pos = len(p.msgs)
	p.msgs = append(p.msgs, m)
	p.events = append(p.events, pe)
	index := func(subj string) error {
		b, err := json.Marshal(indexEntry{ID: ev.ID, Group: ev.GroupID, Seq: ev.Seq, Back: uint64(len(p.msgs) - pe.pos)})
		if err != nil {
			return fmt.Errorf("jetstream: index %s: %w", subj, err)
		}
		im := nats.NewMsg(subj)
		im.Data = b
		im.Header.Set(hdrExpLastSubj, "0")
		p.msgs = append(p.msgs, im)
		return nil
	}
	if err := index(s.idSubject(ev.ID)); err != nil {
		return err
	}
	if ev.DedupeKey != "" {
		if err := index(s.keySubject(ev.DedupeKey)); err != nil {
			return err
		}
	}
	if (ev.Seq-1)%posEvery == 0 {
		if err := index(s.posSubject(ev.GroupID, ev.Seq)); err != nil {
			return err
		}
	}
	return nil
}

// batchAck is the answer to an atomic batch's commit message.
type batchAck struct {
	Stream string    `json:"stream"`
	Seq    uint64    `json:"seq"`
	Batch  string    `json:"batch"`
	Count  int       `json:"count"`
	Error  *apiError `json:"error"`
}

// publishBatch sends msgs as one JetStream atomic batch (nats-server
// 2.12+: Nats-Batch-Id, Nats-Batch-Sequence, Nats-Batch-Commit) and
// returns the stream sequence of the first message. The server stages
// the messages, runs every header check (compare-and-set, duplicate ids)
// against the staged whole, and stores all of them in consecutive
// sequences or none. Only the commit message asks for an answer.
func (s *Store) publishBatch(msgs []*nats.Msg) (uint64, error) {
	if len(msgs) > maxBatchMsgs {
		return 0, fmt.Errorf("jetstream: batch of %d messages, at most %d", len(msgs), maxBatchMsgs)
	}
	id := nuid.Next()
	for i, m := range msgs {
		m.Header.Set(hdrBatchID, id)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		m.Header.Del(hdrBatchCommit)
		m.Reply = ""
		if i < len(msgs)-1 {
			if err := s.nc.PublishMsg(m); err != nil {
				return 0, fmt.Errorf("jetstream: publish batch: %w", err)
			}
		}
	}
	last := msgs[len(msgs)-1]
	last.Header.Set(hdrBatchCommit, "1")
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	resp, err := s.nc.RequestMsgWithContext(ctx, last)
	if err != nil {
		return 0, fmt.Errorf("jetstream: commit batch: %w", err)
	}
	if st := resp.Header.Get("Status"); st == "503" {
		return 0, fmt.Errorf("jetstream: commit batch: %w", nats.ErrNoResponders)
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("jetstream: commit batch: bad answer %q: %w", resp.Data, err)
	}
	if ack.Error != nil {
		return 0, fmt.Errorf("jetstream: commit batch: %w", ack.Error)
	}
	if ack.Count != len(msgs) || ack.Batch != id || ack.Seq < uint64(len(msgs)) {
		return 0, fmt.Errorf("jetstream: commit batch: answer %+v does not match batch %s of %d messages", ack, id, len(msgs))
	}
	return ack.Seq - uint64(len(msgs)) + 1, nil
}
