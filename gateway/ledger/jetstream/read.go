package jetstream

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// rangePage is how many events one direct get of Range asks for, and
// how many a follower buffers.
const rangePage = 256

// followExpiry is the pull expiry of Follow's consumer; its heartbeats
// come every half of it.
const followExpiry = 4 * time.Second

// Get implements ledger.Store, through the id index.
func (s *Store) Get(ctx context.Context, id string) (ledger.Event, error) {
	if err := s.check("get"); err != nil {
		return ledger.Event{}, err
	}
	if id == "" {
		return ledger.Event{}, fmt.Errorf("jetstream: get %q: %w", id, ledger.ErrNotFound)
	}
	ev, err := s.eventByIndex(ctx, s.idSubject(id), false)
	if errors.Is(err, errNoMsg) {
		return ledger.Event{}, fmt.Errorf("jetstream: get %s: %w", id, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Event{}, fmt.Errorf("jetstream: get %s: %w", id, err)
	}
	return ev, nil
}

// GetByDedupeKey implements ledger.Store, through the dedupe index.
func (s *Store) GetByDedupeKey(ctx context.Context, key string) (ledger.Event, error) {
	if err := s.check("get by dedupe key"); err != nil {
		return ledger.Event{}, err
	}
	if key == "" {
		return ledger.Event{}, fmt.Errorf("jetstream: get by dedupe key %q: %w", key, ledger.ErrNotFound)
	}
	ev, err := s.eventByIndex(ctx, s.keySubject(key), false)
	if errors.Is(err, errNoMsg) {
		return ledger.Event{}, fmt.Errorf("jetstream: get by dedupe key %q: %w", key, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Event{}, fmt.Errorf("jetstream: get by dedupe key %q: %w", key, err)
	}
	return ev, nil
}

// startFor returns a stream sequence at or before the group's event seq,
// from which reading the group's subjects forward reaches that event
// after at most posEvery-1 earlier ones. ok is false when the group has
// no event seq yet.
func (s *Store) startFor(ctx context.Context, group string, seq int64) (uint64, bool, error) {
	if sseq, ok := s.knownPos(group, seq); ok {
		return sseq, true, nil
	}
	if sseq, ok := s.knownPos(group, seq-1); ok {
		return sseq + 1, true, nil
	}
	e, at, err := s.lookupIndex(ctx, s.posSubject(group, seq), false)
	if errors.Is(err, errNoMsg) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if e.Back == 0 || e.Back >= at {
		return 0, false, fmt.Errorf("jetstream: position index %s: bad back pointer %d at %d", s.posSubject(group, seq), e.Back, at)
	}
	return at - e.Back, true, nil
}

// Range implements ledger.Store. It learns the group's last seq (from the
// stream leader when the stream is replicated, so that it sees every
// acknowledged append), finds where event sinceSeq+1 is in the stream
// (position cache, else the checkpoint of its block), and reads the
// group's subjects forward with batched direct gets, which any replica
// may answer. The kinds filter is applied while reading.
func (s *Store) Range(ctx context.Context, group string, sinceSeq int64, kinds []string, limit int) ([]ledger.Event, error) {
	if err := s.check("range"); err != nil {
		return nil, err
	}
	sinceSeq = max(sinceSeq, 0)
	h, err := s.groupHead(ctx, group, s.replicas > 1)
	if err != nil {
		return nil, fmt.Errorf("jetstream: range %q: %w", group, err)
	}
	if h.seq <= sinceSeq {
		return nil, nil
	}
	start, ok, err := s.startFor(ctx, group, sinceSeq+1)
	if err != nil {
		return nil, fmt.Errorf("jetstream: range %q: %w", group, err)
	}
	if !ok {
		start = 1 // cannot happen for seqs ≤ h.seq; read from the start
	}
	var out []ledger.Event
	next := sinceSeq + 1
	for stale := 0; next <= h.seq; {
		page, err := s.readGroup(ctx, group, start, stale > 10)
		if err != nil {
			return nil, fmt.Errorf("jetstream: range %q: %w", group, err)
		}
		if len(page) == 0 {
			// The replica that answered has not applied the
			// events up to h yet: ask again, in the end the leader.
			if stale++; stale > 100 {
				return nil, fmt.Errorf("jetstream: range %q: events %d to %d not found after stream sequence %d", group, next, h.seq, start)
			}
			if err := sleepCtx(ctx, time.Duration(stale)*5*time.Millisecond); err != nil {
				return nil, fmt.Errorf("jetstream: range %q: %w", group, err)
			}
			continue
		}
		for _, pm := range page {
			start = pm.sseq + 1
			ev := pm.ev
			if ev.Seq < next {
				continue
			}
			if ev.Seq != next {
				return nil, fmt.Errorf("jetstream: range %q: found seq %d at stream sequence %d, want %d", group, ev.Seq, pm.sseq, next)
			}
			next++
			if len(kinds) == 0 || slices.Contains(kinds, ev.Kind) {
				out = append(out, ev)
				if limit > 0 && len(out) == limit {
					return out, nil
				}
			}
			if next > h.seq {
				break
			}
		}
	}
	return out, nil
}

// posEvent is an event and its stream sequence.
type posEvent struct {
	ev   ledger.Event
	sseq uint64
}

// readGroup reads the group's next events from stream sequence start on:
// a page by batched direct get, or one event from the stream leader.
func (s *Store) readGroup(ctx context.Context, group string, start uint64, leader bool) ([]posEvent, error) {
	var msgs []*rawMsg
	if leader {
		m, err := s.leaderGet(ctx, getRequest{Seq: start, NextFor: s.groupFilter(group)})
		if err != nil && !errors.Is(err, errNoMsg) {
			return nil, err
		}
		if m != nil {
			msgs = append(msgs, m)
		}
	} else {
		var err error
		if msgs, err = s.directMany(ctx, getRequest{Seq: start, NextFor: s.groupFilter(group), Batch: rangePage, MaxBytes: 8 << 20}); err != nil {
			return nil, err
		}
	}
	out := make([]posEvent, 0, len(msgs))
	for _, m := range msgs {
		ev, err := decodeEvent(m)
		if err != nil {
			return nil, err
		}
		if ev.GroupID != group {
			return nil, fmt.Errorf("jetstream: stream message %d on %s belongs to group %q, not %q", m.seq, m.subject, ev.GroupID, group)
		}
		s.rememberPos(group, ev.Seq, m.seq)
		out = append(out, posEvent{ev, m.seq})
	}
	return out, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Groups implements ledger.Store. It asks the stream leader for the
// message count of every event subject; a group's last seq is the sum
// over its kinds, since seqs are dense and events are never deleted.
func (s *Store) Groups(ctx context.Context) ([]ledger.Group, error) {
	if err := s.check("groups"); err != nil {
		return nil, err
	}
	info, err := s.stream.Info(ctx, natsjs.WithSubjectFilter(s.prefix+".ev.>"))
	if err != nil {
		return nil, fmt.Errorf("jetstream: groups: %w", err)
	}
	counts := make(map[string]int64)
	pre := s.prefix + ".ev."
	for subj, n := range info.State.Subjects {
		tok, _, ok := strings.Cut(strings.TrimPrefix(subj, pre), ".")
		if !ok || !strings.HasPrefix(subj, pre) {
			continue
		}
		counts[tok] += int64(n)
	}
	out := make([]ledger.Group, 0, len(counts))
	for tok, n := range counts {
		id, ok := untoken(tok)
		if !ok { // a hashed token: the events know the group
			m, err := s.get(ctx, getRequest{LastFor: pre + tok + ".*"}, false)
			if err != nil {
				return nil, fmt.Errorf("jetstream: groups: %w", err)
			}
			ev, err := decodeEvent(m)
			if err != nil {
				return nil, err
			}
			id = ev.GroupID
		}
		out = append(out, ledger.Group{ID: id, LastSeq: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Follow implements ledger.Store with an ordered consumer on the group's
// subjects, started at (or a little before) event sinceSeq+1: it
// replays the stored events and then delivers new ones as they are
// stored, in stream order; the ordered consumer recreates itself after
// a gap or a lost server. Follow also checks seq itself: it skips
// anything at or below the last seq it yielded, and after a gap starts
// over from that seq. A slow follower only slows its own consumer.
func (s *Store) Follow(ctx context.Context, group string, sinceSeq int64) iter.Seq2[ledger.Event, error] {
	return func(yield func(ledger.Event, error) bool) {
		last := max(sinceSeq, 0)
		s.follow(ctx, fmt.Sprintf("follow %q", group), func(err error) { yield(ledger.Event{}, err) },
			func(fctx context.Context) (bool, error) { return s.followOnce(fctx, group, &last, yield) })
	}
}

// follow runs consumers one after the other (once) for Follow and
// FollowLog until the caller stops (once returns false, nil), ctx ends,
// the store closes (fail gets ErrClosed) or 20 consumers in a row end
// without progress (fail gets the last error). what names the follower
// in errors and logs.
func (s *Store) follow(ctx context.Context, what string, fail func(error), once func(context.Context) (progressed bool, err error)) {
	if err := s.check(what); err != nil {
		fail(err)
		return
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-fctx.Done():
		}
	}()
	failures := 0
	for {
		progressed, err := once(fctx)
		if err == nil && !progressed {
			return // the caller stopped
		}
		switch {
		case ctx.Err() != nil:
			return
		case s.check(what) != nil:
			fail(fmt.Errorf("jetstream: %s: %w", what, ledger.ErrClosed))
			return
		}
		if progressed {
			failures = 0
		}
		if failures++; failures > 20 {
			fail(fmt.Errorf("jetstream: %s: %w", what, err))
			return
		}
		s.log.Debug("consumer ended, starting again", "follower", what, "err", err)
		if sleepCtx(fctx, time.Duration(failures)*50*time.Millisecond) != nil {
			continue // the switch above ends it
		}
	}
}

// followOnce runs one ordered consumer for Follow. It returns
// (false, nil) when the caller stopped the iteration; otherwise it
// reports whether it yielded anything and why it ended.
func (s *Store) followOnce(ctx context.Context, group string, last *int64, yield func(ledger.Event, error) bool) (progressed bool, err error) {
	start, err := s.followStart(ctx, group, *last)
	if err != nil {
		return false, err
	}
	cons, err := s.js.OrderedConsumer(ctx, s.opts.Stream, natsjs.OrderedConsumerConfig{
		FilterSubjects:    []string{s.groupFilter(group)},
		DeliverPolicy:     natsjs.DeliverByStartSequencePolicy,
		OptStartSeq:       start,
		InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return false, fmt.Errorf("jetstream: follow %q: consumer: %w", group, err)
	}
	// A 4s pull expiry means 2s heartbeats: a consumer whose server
	// was lost is noticed, and recreated elsewhere, within seconds.
	it, err := cons.Messages(natsjs.PullExpiry(followExpiry), natsjs.PullMaxMessages(rangePage))
	if err != nil {
		return false, fmt.Errorf("jetstream: follow %q: consumer: %w", group, err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(natsjs.NextContext(ctx))
		if err != nil {
			return progressed, fmt.Errorf("jetstream: follow %q: %w", group, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return progressed, fmt.Errorf("jetstream: follow %q: %w", group, err)
		}
		ev, err := decodeEvent(&rawMsg{subject: m.Subject(), seq: meta.Sequence.Stream, data: m.Data()})
		if err != nil {
			return progressed, err
		}
		s.rememberPos(group, ev.Seq, meta.Sequence.Stream)
		if ev.Seq <= *last {
			continue
		}
		if ev.Seq != *last+1 {
			return progressed, fmt.Errorf("jetstream: follow %q: got seq %d after %d", group, ev.Seq, *last)
		}
		*last = ev.Seq
		if !yield(ev, nil) {
			return false, nil
		}
		progressed = true
	}
}

// followStart returns the stream sequence a consumer for the group's
// events after seq last starts at.
func (s *Store) followStart(ctx context.Context, group string, last int64) (uint64, error) {
	start, ok, err := s.startFor(ctx, group, last+1)
	if err != nil || ok {
		return max(start, 1), err
	}
	// Event last+1 does not exist yet: start after the group's last
	// event (events up to last are skipped if it is behind).
	h, err := s.groupHead(ctx, group, s.replicas > 1)
	if err != nil {
		return 0, err
	}
	if h.seq > last {
		return 1, nil // cannot happen: a checkpoint exists; read from the start
	}
	return h.sseq + 1, nil
}
