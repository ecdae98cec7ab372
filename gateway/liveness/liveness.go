package liveness

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// DefaultGroup is the ledger group liveness events go to by default.
const DefaultGroup = "x.crosstalk.liveness"

// MaxAgentLen bounds an agent id in bytes.
const MaxAgentLen = 256

// EventData is the payload of a ledger.KindLiveness event.
type EventData struct {
	// Agent is the agent's id, lower-cased.
	Agent string `json:"agent"`
	// State is the state entered; an "active" event for an agent already
	// active is a renewal of its last sighting.
	State attention.Liveness `json:"state"`
	// SeenAt is the agent's last sighting known to the recorder
	// (ledger.TimeLayout).
	SeenAt string `json:"seen_at"`
	// At is when the state was entered, by the recorder's clock: the
	// sighting for active, the threshold crossed for stale and evicted.
	At string `json:"at"`
}

// Status is an agent's liveness as one relay knows it.
type Status struct {
	Agent string `json:"agent"`
	// Liveness is derived now from LastSeen (BeadBoard §4.3).
	Liveness attention.Liveness `json:"liveness"`
	// LastSeen is the latest sighting: this relay's own, or one recorded
	// in the ledger by any relay. Zero when never seen.
	LastSeen time.Time `json:"last_seen,omitzero"`
	// Recorded is the last state recorded in the ledger and Since when it
	// holds; empty when nothing is recorded.
	Recorded attention.Liveness `json:"recorded,omitempty"`
	Since    time.Time          `json:"since,omitzero"`
}

// Options configures a Tracker.
type Options struct {
	// Group is the ledger group; "" means DefaultGroup.
	Group string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// StaleAfter is the stale threshold; eviction comes at twice it
	// (BeadBoard §4.1). Non-positive means attention.StaleAfter.
	StaleAfter time.Duration
	// Logger logs the transitions recorded; nil discards.
	Logger *slog.Logger
}

// entry is the projection of one agent's events.
type entry struct {
	state attention.Liveness // last state recorded
	since time.Time          // when it was entered
	seen  time.Time          // latest sighting recorded
	seq   int64              // seq of the agent's last event
}

// Tracker keeps agents' liveness: sightings in memory, and in the ledger
// the transitions between states plus a bounded number of renewals (see
// the package comment). It is safe for concurrent use.
type Tracker struct {
	store ledger.Store
	group string
	now   func() time.Time
	stale time.Duration
	log   *slog.Logger

	io sync.Mutex // serialises ledger reads and writes

	mu     sync.Mutex
	synced bool
	seq    int64
	proj   map[string]*entry
	mem    map[string]time.Time // this relay's sightings
}

// New returns a Tracker on store. It reads nothing yet: the first Beat,
// Sync or Sweep folds the group.
func New(store ledger.Store, o Options) *Tracker {
	if o.Group == "" {
		o.Group = DefaultGroup
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = attention.StaleAfter
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Tracker{store: store, group: o.Group, now: o.Now, stale: o.StaleAfter, log: o.Logger,
		proj: map[string]*entry{}, mem: map[string]time.Time{}}
}

// StaleAfter returns the stale threshold; eviction comes at twice it.
func (t *Tracker) StaleAfter() time.Duration { return t.stale }

// renewEvery is how old the recorded sighting of an active agent must be
// before a sighting renews it in the ledger: it bounds what the ledger
// misses when a relay dies (see the package comment).
func (t *Tracker) renewEvery() time.Duration { return t.stale / 2 }

// flushBefore is how long before the recorded sighting would make an
// agent stale a sweep records this relay's later sighting.
func (t *Tracker) flushBefore() time.Duration { return t.stale / 4 }

// SweepEvery is the interval Run sweeps at: often enough that a flush
// lands before the threshold it guards.
func (t *Tracker) SweepEvery() time.Duration { return min(t.stale/8, 30*time.Second) }

// Sync folds the events other relays appended since the last sync.
func (t *Tracker) Sync(ctx context.Context) error {
	t.io.Lock()
	defer t.io.Unlock()
	return t.sync(ctx)
}

// sync is Sync with t.io held.
func (t *Tracker) sync(ctx context.Context) error {
	const page = 1000
	for {
		t.mu.Lock()
		from := t.seq
		t.mu.Unlock()
		evs, err := t.store.Range(ctx, t.group, from, []string{ledger.KindLiveness}, page)
		if err != nil {
			return fmt.Errorf("liveness: reading group %s: %w", t.group, err)
		}
		t.mu.Lock()
		for _, ev := range evs {
			// A malformed event (written by hand or a future version) is
			// skipped; the others still count.
			_ = t.apply(ev)
		}
		if len(evs) < page {
			t.synced = true
			t.mu.Unlock()
			return nil
		}
		t.mu.Unlock()
	}
}

// apply folds one event; t.mu is held. Transitions only move forward
// (active → stale → evicted, any → active), and a stale or evicted
// judged on an older sighting than one already recorded is void: a
// renewal that landed first wins. Every relay folds the same events in
// the same order to the same projection.
func (t *Tracker) apply(ev ledger.Event) error {
	if ev.Seq > t.seq {
		t.seq = ev.Seq
	}
	if ev.Kind != ledger.KindLiveness {
		return nil
	}
	var d EventData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return fmt.Errorf("liveness: event %s: %w", ev.ID, err)
	}
	seen, err1 := time.Parse(time.RFC3339Nano, d.SeenAt)
	at, err2 := time.Parse(time.RFC3339Nano, d.At)
	if err1 != nil || err2 != nil || d.Agent == "" || d.Agent != strings.ToLower(d.Agent) {
		return fmt.Errorf("liveness: event %s: bad agent, seen_at or at", ev.ID)
	}
	e := t.proj[d.Agent]
	if e == nil {
		e = &entry{}
		t.proj[d.Agent] = e
	}
	e.seq = ev.Seq
	switch d.State {
	case attention.Active:
		if e.state != attention.Active {
			e.state, e.since = attention.Active, at
		}
	case attention.Stale, attention.Evicted:
		if seen.Before(e.seen) || e.state == attention.Evicted || e.state == d.State {
			return nil
		}
		e.state, e.since = d.State, at
	default:
		return fmt.Errorf("liveness: event %s: unknown state %q", ev.ID, d.State)
	}
	if seen.After(e.seen) {
		e.seen = seen
	}
	return nil
}

// Beat records a sighting of agent now (a heartbeat, an API or MCP call,
// channel activity) and returns its status. It writes to the ledger only
// when the recorded state is not active (a transition back to active) or
// the recorded sighting is older than StaleAfter/2 (a renewal), so
// frequent beats cost no I/O. BeadBoard §4.2: idempotent, safe to repeat.
func (t *Tracker) Beat(ctx context.Context, agent string) (Status, error) {
	id := strings.ToLower(agent)
	if id == "" || len(id) > MaxAgentLen {
		return Status{}, fmt.Errorf("liveness: agent id empty or longer than %d bytes", MaxAgentLen)
	}
	now := t.now()
	t.mu.Lock()
	if now.After(t.mem[id]) {
		t.mem[id] = now
	}
	fresh := t.synced && t.current(id, now)
	t.mu.Unlock()
	if !fresh {
		if err := t.beatSlow(ctx, id, now); err != nil {
			return t.Status(id), err
		}
	}
	return t.Status(id), nil
}

// current reports whether the ledger already says id is active with a
// sighting recent enough; t.mu is held.
func (t *Tracker) current(id string, now time.Time) bool {
	e := t.proj[id]
	return e != nil && e.state == attention.Active && now.Sub(e.seen) < t.renewEvery()
}

func (t *Tracker) beatSlow(ctx context.Context, id string, now time.Time) error {
	t.io.Lock()
	defer t.io.Unlock()
	if err := t.sync(ctx); err != nil {
		return err
	}
	t.mu.Lock()
	done := t.current(id, now)
	t.mu.Unlock()
	if done {
		return nil
	}
	return t.record(ctx, id, attention.Active, now, now)
}

// record appends a transition (or renewal) of id to state, judged on the
// sighting seen, and folds it; t.io is held. The dedupe key names the
// agent's previous event, so relays that judge the same projection the
// same way append one event between them.
func (t *Tracker) record(ctx context.Context, id string, state attention.Liveness, seen, at time.Time) error {
	t.mu.Lock()
	var prev int64
	var from attention.Liveness
	if e := t.proj[id]; e != nil {
		prev, from = e.seq, e.state
	}
	t.mu.Unlock()
	b, err := json.Marshal(EventData{Agent: id, State: state, SeenAt: ledger.FormatTime(seen), At: ledger.FormatTime(at)})
	if err != nil {
		return fmt.Errorf("liveness: encoding %s: %w", id, err)
	}
	rec := ledger.Record{Kind: ledger.KindLiveness, GroupID: t.group, By: "system", Data: b,
		DedupeKey: fmt.Sprintf("liveness/%s/%d/%s", id, prev, state)}
	res, err := t.store.Append(ctx, []ledger.Record{rec})
	if err != nil {
		return fmt.Errorf("liveness: recording %s %s: %w", id, state, err)
	}
	if from != state && len(res) == 1 && !res[0].Duplicate {
		t.log.LogAttrs(ctx, slog.LevelInfo, "liveness transition", slog.String("agent", id),
			slog.String("from", string(from)), slog.String("to", string(state)), slog.Time("last_seen", seen))
	}
	return t.sync(ctx)
}

// Sweep records the transitions that are due with no one beating: an
// active agent whose last sighting is StaleAfter old becomes stale, and
// evicted at twice that. Before the recorded sighting alone would make an
// agent stale, it first records this relay's later sighting, if any, so
// other relays judge from the exact one. It returns the number of events
// it appended. Any relay may sweep; the dedupe keys make relays that sweep
// at once record each transition once.
func (t *Tracker) Sweep(ctx context.Context) (int, error) {
	t.io.Lock()
	defer t.io.Unlock()
	if err := t.sync(ctx); err != nil {
		return 0, err
	}
	type due struct {
		id       string
		state    attention.Liveness
		seen, at time.Time
	}
	var todo []due
	now := t.now()
	t.mu.Lock()
	for id, e := range t.proj {
		mem := t.mem[id]
		seen := later(mem, e.seen)
		switch attention.LivenessAfter(seen, now, t.stale) {
		case attention.Active:
			if e.state == attention.Active && mem.After(e.seen) && !now.Before(e.seen.Add(t.stale-t.flushBefore())) {
				todo = append(todo, due{id: id, state: attention.Active, seen: mem, at: mem})
			}
		case attention.Stale:
			if e.state == attention.Active {
				todo = append(todo, due{id: id, state: attention.Stale, seen: seen, at: seen.Add(t.stale)})
			}
		case attention.Evicted:
			if e.state != attention.Evicted {
				todo = append(todo, due{id: id, state: attention.Evicted, seen: seen, at: seen.Add(2 * t.stale)})
			}
		}
	}
	t.mu.Unlock()
	sort.Slice(todo, func(i, j int) bool { return todo[i].id < todo[j].id })
	n := 0
	for _, d := range todo {
		if err := t.record(ctx, d.id, d.state, d.seen, d.at); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Run syncs and sweeps every SweepEvery until ctx ends, logging failures.
func (t *Tracker) Run(ctx context.Context) {
	tick := time.NewTicker(t.SweepEvery())
	defer tick.Stop()
	for {
		if _, err := t.Sweep(ctx); err != nil && ctx.Err() == nil {
			t.log.LogAttrs(ctx, slog.LevelWarn, "liveness sweep failed", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// LastSeen returns agent's latest sighting known here: this relay's own
// or one recorded in the ledger; zero when never seen.
func (t *Tracker) LastSeen(agent string) time.Time {
	return t.Status(agent).LastSeen
}

// Status returns agent's liveness now, from what this relay has folded
// (call Sync first to include other relays' latest events).
func (t *Tracker) Status(agent string) Status {
	id := strings.ToLower(agent)
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status(id, now)
}

func (t *Tracker) status(id string, now time.Time) Status {
	st := Status{Agent: id, LastSeen: t.mem[id]}
	if e := t.proj[id]; e != nil {
		st.LastSeen = later(st.LastSeen, e.seen)
		st.Recorded, st.Since = e.state, e.since
	}
	st.Liveness = attention.LivenessAfter(st.LastSeen, now, t.stale)
	return st
}

// All returns the status of every agent seen here or recorded in the
// ledger, ordered by id.
func (t *Tracker) All() []Status {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make([]string, 0, len(t.proj)+len(t.mem))
	for id := range t.proj {
		ids = append(ids, id)
	}
	for id := range t.mem {
		if t.proj[id] == nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	out := make([]Status, len(ids))
	for i, id := range ids {
		out[i] = t.status(id, now)
	}
	return out
}

// Seen returns every known agent's latest sighting, by lower-cased id.
func (t *Tracker) Seen() map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]time.Time, len(t.proj)+len(t.mem))
	for id, s := range t.mem {
		out[id] = s
	}
	for id, e := range t.proj {
		out[id] = later(out[id], e.seen)
	}
	return out
}
