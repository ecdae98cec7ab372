package jetstream

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// eventsFilter is the subject filter of every group's events.
func (s *Store) eventsFilter() string { return s.prefix + ".ev.>" }

// Log implements ledger.Store. An event's position is its stream
// sequence: the stream's own order, the same for every relay sharing it.
// A page is one batched direct get, which any replica may answer; a
// replica that is behind holds a prefix of the stream, so a short page
// leaves no gap.
func (s *Store) Log(ctx context.Context, after int64, limit int) ([]ledger.Logged, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("jetstream: log: %w: limit %d is not positive", ledger.ErrInvalid, limit)
	}
	if err := s.check("log"); err != nil {
		return nil, err
	}
	msgs, err := s.directMany(ctx, getRequest{Seq: uint64(max(after, 0)) + 1, NextFor: s.eventsFilter(), Batch: limit, MaxBytes: 8 << 20})
	if err != nil {
		return nil, fmt.Errorf("jetstream: log: %w", err)
	}
	out := make([]ledger.Logged, 0, len(msgs))
	for _, m := range msgs {
		ev, err := decodeEvent(m)
		if err != nil {
			return nil, err
		}
		s.rememberPos(ev.GroupID, ev.Seq, m.seq)
		out = append(out, ledger.Logged{Pos: int64(m.seq), Event: ev})
	}
	return out, nil
}

// FollowLog implements ledger.Store with an ordered consumer on every
// group's events, started after position after; like Follow it starts
// again after a lost server, skipping what it has yielded.
func (s *Store) FollowLog(ctx context.Context, after int64) iter.Seq2[ledger.Logged, error] {
	return func(yield func(ledger.Logged, error) bool) {
		last := max(after, 0)
		s.follow(ctx, "follow log", func(err error) { yield(ledger.Logged{}, err) },
			func(fctx context.Context) (bool, error) { return s.followLogOnce(fctx, &last, yield) })
	}
}

// followLogOnce runs one ordered consumer for FollowLog, as followOnce
// does for Follow.
func (s *Store) followLogOnce(ctx context.Context, last *int64, yield func(ledger.Logged, error) bool) (progressed bool, err error) {
	cons, err := s.js.OrderedConsumer(ctx, s.opts.Stream, natsjs.OrderedConsumerConfig{
		FilterSubjects:    []string{s.eventsFilter()},
		DeliverPolicy:     natsjs.DeliverByStartSequencePolicy,
		OptStartSeq:       uint64(*last) + 1,
		InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return false, fmt.Errorf("jetstream: follow log: consumer: %w", err)
	}
	it, err := cons.Messages(natsjs.PullExpiry(followExpiry), natsjs.PullMaxMessages(rangePage))
	if err != nil {
		return false, fmt.Errorf("jetstream: follow log: consumer: %w", err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(natsjs.NextContext(ctx))
		if err != nil {
			return progressed, fmt.Errorf("jetstream: follow log: %w", err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return progressed, fmt.Errorf("jetstream: follow log: %w", err)
		}
		pos := int64(meta.Sequence.Stream)
		if pos <= *last {
			continue
		}
		ev, err := decodeEvent(&rawMsg{subject: m.Subject(), seq: meta.Sequence.Stream, data: m.Data()})
		if err != nil {
			return progressed, err
		}
		s.rememberPos(ev.GroupID, ev.Seq, meta.Sequence.Stream)
		*last = pos
		if !yield(ledger.Logged{Pos: pos, Event: ev}, nil) {
			return false, nil
		}
		progressed = true
	}
}
