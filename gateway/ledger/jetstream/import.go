package jetstream

import (
	"fmt"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// importChunk is how many events one import batch considers.
const importChunk = 200

// importEvents carries out an ImportEvents call in the writer: chunk by
// chunk, each chunk one atomic batch, so every event counted is durable.
func (s *Store) importEvents(heads map[string]head, req *writeReq) (int, error) {
	evs := req.events
	start := time.Now()
	done := 0
	fresh := false
	var lastErr error
	for attempt := 0; done < len(evs); attempt++ {
		if err := req.ctx.Err(); err != nil {
			return done, fmt.Errorf("jetstream: import: %w", err)
		}
		if attempt > 0 && lastErr != nil {
			if time.Since(start) > retryLimit {
				return done, fmt.Errorf("jetstream: import: giving up after %v: %w", retryLimit, lastErr)
			}
			backoff(attempt)
		}
		p, n, stop, err := s.planImport(heads, evs[done:], fresh)
		var first uint64
		if err == nil && len(p.msgs) > 0 {
			first, err = s.commitPlan(p, start.Add(retryLimit))
		}
		switch {
		case err == nil:
			if len(p.msgs) > 0 {
				s.finish(heads, p, first)
			}
			done += n
			lastErr = nil
			if stop != nil {
				return done, stop
			}
		case isConflict(err) || isTransient(err):
			lastErr = err
			s.count(func(st *Stats) { st.Conflicts++ })
			if p != nil {
				for g := range p.heads {
					delete(heads, g)
				}
			}
			fresh = true
		default:
			return done, err
		}
	}
	return done, nil
}

// planImport plans one batch for the first events of evs. It returns how
// many events the batch covers (stored or skipped as already present)
// and, if it stopped at a bad event, that event's error.
func (s *Store) planImport(heads map[string]head, evs []ledger.Event, fresh bool) (p *plan, n int, stop error, err error) {
	evs = evs[:min(len(evs), importChunk)]
	groups := make(map[string]bool)
	var subjects []string
	for _, ev := range evs {
		if ev.GroupID != "" {
			groups[ev.GroupID] = true
		}
		if ev.ID != "" {
			subjects = append(subjects, s.idSubject(ev.ID))
		}
		if ev.DedupeKey != "" {
			subjects = append(subjects, s.keySubject(ev.DedupeKey))
		}
	}
	found, err := s.lookupEvents(subjects, fresh)
	if err != nil {
		return nil, 0, nil, err
	}
	cur, err := s.headsFor(heads, groups, fresh)
	if err != nil {
		return nil, 0, nil, err
	}
	p = newPlan(nil, cur)
	planned := make(map[string]ledger.Event) // by subject, like found
	lookup := func(subj string) (ledger.Event, bool) {
		if ev, ok := planned[subj]; ok {
			return ev, true
		}
		ev, ok := found[subj]
		return ev, ok
	}
	for i, ev := range evs {
		if len(p.msgs)+4 > maxBatchMsgs {
			return p, i, nil, nil
		}
		if err := ev.Validate(); err != nil {
			return p, i, fmt.Errorf("jetstream: import: %w", err), nil
		}
		ev.Data, _ = ledger.NormalizeData(ev.Data) // checked by Validate
		if old, ok := lookup(s.idSubject(ev.ID)); ok {
			if ledger.Equal(old, ev) {
				continue
			}
			return p, i, fmt.Errorf("jetstream: import event %s: %w: exists with different content", ev.ID, ledger.ErrConflict), nil
		}
		if ev.DedupeKey != "" {
			if old, ok := lookup(s.keySubject(ev.DedupeKey)); ok {
				return p, i, fmt.Errorf("jetstream: import event %s: %w: dedupe key %q belongs to event %s", ev.ID, ledger.ErrConflict, ev.DedupeKey, old.ID), nil
			}
		}
		h := p.heads[ev.GroupID]
		if ev.Seq != h.seq+1 {
			return p, i, fmt.Errorf("jetstream: import event %s: %w: seq %d in group %q, want %d", ev.ID, ledger.ErrConflict, ev.Seq, ev.GroupID, h.seq+1), nil
		}
		ts, _ := ev.Time() // checked by Validate
		p.touch(ev.GroupID, h)
		p.heads[ev.GroupID] = head{seq: ev.Seq, ts: ts}
		pe := &plannedEvent{ev: ev}
		if err := s.addEvent(p, pe); err != nil {
			return nil, 0, nil, err
		}
		planned[s.idSubject(ev.ID)] = ev
		if ev.DedupeKey != "" {
			planned[s.keySubject(ev.DedupeKey)] = ev
		}
	}
	return p, len(evs), nil, nil
}
