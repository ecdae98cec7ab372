// Package memory is a ledger.Store that keeps everything in memory. It
// gives every guarantee of the ledger package except durability: its
// contents are gone when the process ends, so "acknowledged" means only
// "visible to every later read". It is meant for tests of code that uses
// a ledger and for trying the relay out; it passes the same conformance
// suite (ledgertest) as the durable stores.
package memory

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// followPage is how many events Follow takes per read.
const followPage = 256

// Store is an in-memory ledger.Store. The zero value is not usable; call
// New.
type Store struct {
	now func() time.Time

	mu      sync.Mutex
	closed  bool
	closing chan struct{}
	groups  map[string][]ledger.Event // by group, in seq order
	byID    map[string]ledger.Event
	byKey   map[string]string // dedupe key → event id
	cursors map[[2]string]ledger.Cursor
	marks   map[string]ledger.Mark
	claims  map[[2]string]ledger.Claim
	wake    map[string]*wakeup // the group's followers' wake-up
	order   []ledger.Event     // every event in append order: position i+1
	wakeLog chan struct{}      // closed on the next append to any group
	lastTS  time.Time
}

var _ ledger.Store = (*Store)(nil)

// New returns an empty Store. now stamps appended events; nil means
// time.Now.
func New(now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{
		now:     now,
		closing: make(chan struct{}),
		groups:  make(map[string][]ledger.Event),
		byID:    make(map[string]ledger.Event),
		byKey:   make(map[string]string),
		cursors: make(map[[2]string]ledger.Cursor),
		marks:   make(map[string]ledger.Mark),
		claims:  make(map[[2]string]ledger.Claim),
		wake:    make(map[string]*wakeup),
		wakeLog: make(chan struct{}),
	}
}

// lock locks s and reports ErrClosed if it is closed; on error s is
// unlocked.
func (s *Store) lock(what string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("memory: %s: %w", what, ledger.ErrClosed)
	}
	return nil
}

// clone returns ev with its own copy of Data.
func clone(ev ledger.Event) ledger.Event {
	ev.Data = bytes.Clone(ev.Data)
	return ev
}

// add stores ev; s.mu is held.
func (s *Store) add(ev ledger.Event) {
	s.groups[ev.GroupID] = append(s.groups[ev.GroupID], ev)
	s.byID[ev.ID] = ev
	if ev.DedupeKey != "" {
		s.byKey[ev.DedupeKey] = ev.ID
	}
	if w, ok := s.wake[ev.GroupID]; ok {
		close(w.ch)
		delete(s.wake, ev.GroupID)
	}
	s.order = append(s.order, ev)
	close(s.wakeLog)
	s.wakeLog = make(chan struct{})
}

// Append implements ledger.Store. A batch is applied under one lock, so
// it is atomic.
func (s *Store) Append(ctx context.Context, recs []ledger.Record) ([]ledger.Result, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	norm := make([]ledger.Record, len(recs))
	for i, r := range recs {
		r, err := r.Normalized()
		if err != nil {
			return nil, fmt.Errorf("memory: append record %d: %w", i, err)
		}
		norm[i] = r
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memory: append: %w", err)
	}
	if err := s.lock("append"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	res := make([]ledger.Result, len(norm))
	for i, r := range norm {
		if id, ok := s.byKey[r.DedupeKey]; ok && r.DedupeKey != "" {
			res[i] = ledger.Result{Event: clone(s.byID[id]), Duplicate: true}
			continue
		}
		t := s.now().UTC().Truncate(time.Millisecond)
		if t.Before(s.lastTS) {
			t = s.lastTS
		}
		s.lastTS = t
		ev := ledger.Event{
			V: ledger.Version, ID: envelope.NewID(), TS: ledger.FormatTime(t),
			Seq: int64(len(s.groups[r.GroupID]) + 1), Kind: r.Kind, GroupID: r.GroupID,
			ScopeKey: r.ScopeKey, By: r.By, Data: r.Data, DedupeKey: r.DedupeKey,
		}
		s.add(ev)
		res[i] = ledger.Result{Event: clone(ev), Pos: int64(len(s.order))}
	}
	return res, nil
}

// ImportEvents implements ledger.Store.
func (s *Store) ImportEvents(ctx context.Context, evs []ledger.Event) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memory: import: %w", err)
	}
	if err := s.lock("import"); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	for i, ev := range evs {
		if err := ev.Validate(); err != nil {
			return i, fmt.Errorf("memory: import: %w", err)
		}
		ev.Data, _ = ledger.NormalizeData(ev.Data)
		if old, ok := s.byID[ev.ID]; ok {
			if ledger.Equal(old, ev) {
				continue
			}
			return i, fmt.Errorf("memory: import event %s: %w: exists with different content", ev.ID, ledger.ErrConflict)
		}
		if id, ok := s.byKey[ev.DedupeKey]; ok && ev.DedupeKey != "" {
			return i, fmt.Errorf("memory: import event %s: %w: dedupe key %q belongs to event %s", ev.ID, ledger.ErrConflict, ev.DedupeKey, id)
		}
		if want := int64(len(s.groups[ev.GroupID]) + 1); ev.Seq != want {
			return i, fmt.Errorf("memory: import event %s: %w: seq %d in group %q, want %d", ev.ID, ledger.ErrConflict, ev.Seq, ev.GroupID, want)
		}
		s.add(ev)
	}
	return len(evs), nil
}

// Get implements ledger.Store.
func (s *Store) Get(ctx context.Context, id string) (ledger.Event, error) {
	if err := s.lock("get"); err != nil {
		return ledger.Event{}, err
	}
	defer s.mu.Unlock()
	ev, ok := s.byID[id]
	if !ok {
		return ledger.Event{}, fmt.Errorf("memory: get %s: %w", id, ledger.ErrNotFound)
	}
	return clone(ev), nil
}

// GetByDedupeKey implements ledger.Store.
func (s *Store) GetByDedupeKey(ctx context.Context, key string) (ledger.Event, error) {
	if err := s.lock("get by dedupe key"); err != nil {
		return ledger.Event{}, err
	}
	defer s.mu.Unlock()
	id, ok := s.byKey[key]
	if !ok || key == "" {
		return ledger.Event{}, fmt.Errorf("memory: get by dedupe key %q: %w", key, ledger.ErrNotFound)
	}
	return clone(s.byID[id]), nil
}

// Range implements ledger.Store.
func (s *Store) Range(ctx context.Context, group string, sinceSeq int64, kinds []string, limit int) ([]ledger.Event, error) {
	if err := s.lock("range"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []ledger.Event
	evs := s.groups[group]
	for _, ev := range evs[min(max(sinceSeq, 0), int64(len(evs))):] {
		if len(kinds) > 0 && !slices.Contains(kinds, ev.Kind) {
			continue
		}
		out = append(out, clone(ev))
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}

// Groups implements ledger.Store.
func (s *Store) Groups(ctx context.Context) ([]ledger.Group, error) {
	if err := s.lock("groups"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var gs []ledger.Group
	for id, evs := range s.groups {
		gs = append(gs, ledger.Group{ID: id, LastSeq: int64(len(evs))})
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].ID < gs[j].ID })
	return gs, nil
}

// wakeup is a group's wake channel, closed by the group's next append,
// and the number of followers holding it. A follower holds it from the
// arm of ledger.Pages until its next arm or its end, so a group is
// registered exactly while someone follows it: a follower whose ctx
// ends, whose range loop breaks or whose pull iterator is stopped lets
// go at once, and a stream opened on a group that is never appended to
// leaves nothing behind.
type wakeup struct {
	ch   chan struct{}
	held int
}

// Follow implements ledger.Store.
func (s *Store) Follow(ctx context.Context, group string, sinceSeq int64) iter.Seq2[ledger.Event, error] {
	read := func(after int64) ([]ledger.Event, error) { return s.Range(ctx, group, after, nil, followPage) }
	return func(yield func(ledger.Event, error) bool) {
		var held *wakeup
		defer func() {
			s.mu.Lock()
			s.release(group, held)
			s.mu.Unlock()
		}()
		ledger.Pages(ctx, sinceSeq, followPage, read, func(ev ledger.Event) int64 { return ev.Seq }, func() (func() error, error) {
			if err := s.lock("follow"); err != nil {
				return nil, err
			}
			cur, ok := s.wake[group]
			if !ok {
				cur = &wakeup{ch: make(chan struct{})}
				s.wake[group] = cur
			}
			if cur != held {
				s.release(group, held)
				cur.held++
				held = cur
			}
			s.mu.Unlock()
			return s.waiter(ctx, cur.ch, "follow "+strconv.Quote(group)), nil
		})(yield)
	}
}

// release lets go of w, a wake-up of group (nil: none), and drops it if
// nobody else holds it; s.mu is held.
func (s *Store) release(group string, w *wakeup) {
	if w == nil {
		return
	}
	if w.held--; w.held == 0 && s.wake[group] == w {
		delete(s.wake, group)
	}
}

// waiter returns the wait of ledger.Pages on wake: nil when it fires,
// ctx.Err() or ErrClosed.
func (s *Store) waiter(ctx context.Context, wake <-chan struct{}, what string) func() error {
	return func() error {
		select {
		case <-wake:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closing:
			return fmt.Errorf("memory: %s: %w", what, ledger.ErrClosed)
		}
	}
}

// Log implements ledger.Store: an event's position is its index in
// append order plus one.
func (s *Store) Log(ctx context.Context, after int64, limit int) ([]ledger.Logged, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("memory: log: %w: limit %d is not positive", ledger.ErrInvalid, limit)
	}
	if err := s.lock("log"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	start := min(max(after, 0), int64(len(s.order)))
	page := s.order[start:min(start+int64(limit), int64(len(s.order)))]
	out := make([]ledger.Logged, len(page))
	for i, ev := range page {
		out[i] = ledger.Logged{Pos: start + int64(i) + 1, Event: clone(ev)}
	}
	return out, nil
}

// LogBefore implements ledger.Store.
func (s *Store) LogBefore(ctx context.Context, before int64, limit int) ([]ledger.Logged, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("memory: log before: %w: limit %d is not positive", ledger.ErrInvalid, limit)
	}
	if err := s.lock("log before"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	end := int64(len(s.order)) // positions 1..end; before excludes itself
	if before > 0 {
		end = min(end, before-1)
	}
	out := make([]ledger.Logged, 0, min(int64(limit), max(end, 0)))
	for pos := end; pos >= 1 && len(out) < limit; pos-- {
		out = append(out, ledger.Logged{Pos: pos, Event: clone(s.order[pos-1])})
	}
	return out, nil
}

// FollowLog implements ledger.Store.
func (s *Store) FollowLog(ctx context.Context, after int64) iter.Seq2[ledger.Logged, error] {
	read := func(after int64) ([]ledger.Logged, error) { return s.Log(ctx, after, followPage) }
	return ledger.Pages(ctx, after, followPage, read, func(l ledger.Logged) int64 { return l.Pos }, func() (func() error, error) {
		if err := s.lock("follow log"); err != nil {
			return nil, err
		}
		wake := s.wakeLog
		s.mu.Unlock()
		return s.waiter(ctx, wake, "follow log"), nil
	})
}

// eventSeq returns the seq of eventID in group; s.mu is held.
func (s *Store) eventSeq(group, eventID string) (int64, error) {
	ev, ok := s.byID[eventID]
	if !ok || ev.GroupID != group {
		return 0, fmt.Errorf("event %s in group %q: %w", eventID, group, ledger.ErrNotFound)
	}
	return ev.Seq, nil
}

// SetCursor implements ledger.Store.
func (s *Store) SetCursor(ctx context.Context, group, actor, eventID string) (ledger.Cursor, error) {
	return s.moveCursor("set cursor", false, group, actor, eventID)
}

// AdvanceCursor implements ledger.Store.
func (s *Store) AdvanceCursor(ctx context.Context, group, actor, eventID string) (ledger.Cursor, error) {
	return s.moveCursor("advance cursor", true, group, actor, eventID)
}

// moveCursor sets the cursor to eventID — unless forward and it stands at
// or past it — and returns the cursor as it then stands.
func (s *Store) moveCursor(what string, forward bool, group, actor, eventID string) (ledger.Cursor, error) {
	if group == "" || actor == "" || eventID == "" {
		return ledger.Cursor{}, fmt.Errorf("memory: %s: %w: empty group, actor or event id", what, ledger.ErrInvalid)
	}
	if err := s.lock(what); err != nil {
		return ledger.Cursor{}, err
	}
	defer s.mu.Unlock()
	seq, err := s.eventSeq(group, eventID)
	if err != nil {
		return ledger.Cursor{}, fmt.Errorf("memory: %s %q/%q: %w", what, group, actor, err)
	}
	k := [2]string{group, actor}
	if cur, ok := s.cursors[k]; forward && ok && cur.Seq >= seq {
		return cur, nil
	}
	c := ledger.Cursor{GroupID: group, Actor: actor, EventID: eventID, Seq: seq}
	s.cursors[k] = c
	return c, nil
}

// GetCursor implements ledger.Store.
func (s *Store) GetCursor(ctx context.Context, group, actor string) (ledger.Cursor, error) {
	if err := s.lock("get cursor"); err != nil {
		return ledger.Cursor{}, err
	}
	defer s.mu.Unlock()
	c, ok := s.cursors[[2]string{group, actor}]
	if !ok {
		return ledger.Cursor{}, fmt.Errorf("memory: get cursor %q/%q: %w", group, actor, ledger.ErrNotFound)
	}
	return c, nil
}

// CursorsOf implements ledger.CursorLister; it looks at every cursor.
func (s *Store) CursorsOf(ctx context.Context, actor string) (map[string]ledger.Cursor, error) {
	if err := s.lock("cursors of"); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := map[string]ledger.Cursor{}
	for k, c := range s.cursors {
		if k[1] == actor {
			out[k[0]] = c
		}
	}
	return out, nil
}

// SetMark implements ledger.Store.
func (s *Store) SetMark(ctx context.Context, name string, m ledger.Mark) error {
	if name == "" || m.Pos < 0 {
		return fmt.Errorf("memory: set mark %q: %w: empty name or negative position %d", name, ledger.ErrInvalid, m.Pos)
	}
	if err := s.lock("set mark"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.marks[name] = m
	return nil
}

// GetMark implements ledger.Store.
func (s *Store) GetMark(ctx context.Context, name string) (ledger.Mark, error) {
	if err := s.lock("get mark"); err != nil {
		return ledger.Mark{}, err
	}
	defer s.mu.Unlock()
	m, ok := s.marks[name]
	if !ok {
		return ledger.Mark{}, fmt.Errorf("memory: get mark %q: %w", name, ledger.ErrNotFound)
	}
	return m, nil
}

// Claim implements ledger.Store.
func (s *Store) Claim(ctx context.Context, group, eventID, actor string, ttl time.Duration, now time.Time) (ledger.Claim, error) {
	if group == "" || actor == "" || eventID == "" {
		return ledger.Claim{}, fmt.Errorf("memory: claim: %w: empty group, actor or event id", ledger.ErrInvalid)
	}
	if ttl <= 0 || now.IsZero() {
		return ledger.Claim{}, fmt.Errorf("memory: claim: %w: ttl %v at %v", ledger.ErrInvalid, ttl, now)
	}
	if err := s.lock("claim"); err != nil {
		return ledger.Claim{}, err
	}
	defer s.mu.Unlock()
	if _, err := s.eventSeq(group, eventID); err != nil {
		return ledger.Claim{}, fmt.Errorf("memory: claim %s: %w", eventID, err)
	}
	k := [2]string{group, eventID}
	cur, ok := s.claims[k]
	if ok && cur.Actor != actor && !cur.Expired(now) {
		return cur, fmt.Errorf("memory: claim %s: held by %q until %s: %w", eventID, cur.Actor, cur.ExpiresAt.Format(time.RFC3339), ledger.ErrClaimed)
	}
	c := ledger.Claim{GroupID: group, EventID: eventID, Actor: actor, ClaimedAt: now.UTC(), ExpiresAt: now.Add(ttl).UTC()}
	if ok && cur.Actor == actor && !cur.Expired(now) {
		c.ClaimedAt = cur.ClaimedAt // a renewal
	}
	s.claims[k] = c
	return c, nil
}

// ReleaseClaim implements ledger.Store.
func (s *Store) ReleaseClaim(ctx context.Context, group, eventID, actor string) error {
	if err := s.lock("release claim"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	k := [2]string{group, eventID}
	cur, ok := s.claims[k]
	switch {
	case !ok:
		return fmt.Errorf("memory: release claim %s: %w", eventID, ledger.ErrNotFound)
	case cur.Actor != actor:
		return fmt.Errorf("memory: release claim %s: held by %q: %w", eventID, cur.Actor, ledger.ErrClaimed)
	}
	delete(s.claims, k)
	return nil
}

// ReleaseClaimAsRead implements ledger.Store.
func (s *Store) ReleaseClaimAsRead(ctx context.Context, c ledger.Claim) error {
	if err := s.lock("release claim"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	k := [2]string{c.GroupID, c.EventID}
	cur, ok := s.claims[k]
	switch {
	case !ok:
		return fmt.Errorf("memory: release claim %s: %w", c.EventID, ledger.ErrNotFound)
	case cur.Actor != c.Actor || !cur.ExpiresAt.Equal(c.ExpiresAt):
		return fmt.Errorf("memory: release claim %s: held by %q until %s: %w", c.EventID, cur.Actor, cur.ExpiresAt.Format(time.RFC3339Nano), ledger.ErrClaimed)
	}
	delete(s.claims, k)
	return nil
}

// GetClaim implements ledger.Store.
func (s *Store) GetClaim(ctx context.Context, group, eventID string, now time.Time) (ledger.Claim, error) {
	if err := s.lock("get claim"); err != nil {
		return ledger.Claim{}, err
	}
	defer s.mu.Unlock()
	c, ok := s.claims[[2]string{group, eventID}]
	if !ok || c.Expired(now) {
		return ledger.Claim{}, fmt.Errorf("memory: get claim %s: %w", eventID, ledger.ErrNotFound)
	}
	return c, nil
}

// Close implements ledger.Store. Calling it again is harmless.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
	return nil
}
