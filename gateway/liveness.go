package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/liveness"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
)

// AgentStatus is one actor of the ledger or the address book with its
// presence (docs/design.md §5.4; Beadboard §4): when the relay last saw it over
// the API, MCP or a delivery channel, and what that makes it now, a
// column, not a filter (issue 13).
type AgentStatus struct {
	ID    string   `json:"agent"`
	Names []string `json:"names,omitempty"`
	Roles []string `json:"roles,omitempty"`
	// LastSeen is zero when no relay on the ledger has seen the agent
	// (package liveness).
	LastSeen time.Time          `json:"last_seen,omitzero"`
	Liveness attention.Liveness `json:"liveness"`
	// Events, Addressed, Owes and LastTS are the actor's in the ledger
	// (Actor).
	Events    int64  `json:"events"`
	Addressed int64  `json:"addressed"`
	Owes      int    `json:"owes"`
	LastTS    string `json:"last_ts,omitempty"`
}

// Presence is what a heartbeat answers (the API's POST
// /v1/agents/{agent}/heartbeat, MCP's agent.heartbeat): the agent's last
// sighting and liveness, without the ledger counts of AgentStatus, which a
// heartbeat does not read (GET /v1/agents has them).
type Presence struct {
	ID       string             `json:"agent"`
	LastSeen time.Time          `json:"last_seen,omitzero"`
	Liveness attention.Liveness `json:"liveness"`
}

// AgentLiveness returns an agent's last activity and its liveness now,
// from what this relay has folded of the ledger (SyncLiveness first for
// other relays' latest).
func (r *Relay) AgentLiveness(agent string) (time.Time, attention.Liveness) {
	st := r.live.Status(r.book.ActorID(agent))
	return st.LastSeen, st.Liveness
}

// Heartbeat records a heartbeat of agent (BeadBoard §4.2; the API, MCP
// and `crosstalk heartbeat`) and returns its liveness.
func (r *Relay) Heartbeat(ctx context.Context, agent string) (liveness.Status, error) {
	st, err := r.live.Beat(ctx, r.book.ActorID(agent))
	if err != nil {
		return st, fmt.Errorf("gateway: heartbeat of %s: %w", agent, err)
	}
	return st, nil
}

// SyncLiveness folds the liveness events other relays recorded, before a
// decision that depends on them (a takeover).
func (r *Relay) SyncLiveness(ctx context.Context) error { return r.live.Sync(ctx) }

// Liveness returns the liveness tracker: statuses, the sweeper (Run).
func (r *Relay) Liveness() *liveness.Tracker { return r.live }

// ReservePolicy is how reservations judge holders (BeadBoard §4.4): on
// this relay's liveness, with its threshold.
func (r *Relay) ReservePolicy() reserve.Policy {
	return reserve.Policy{StaleAfter: r.StaleAfter(), LastSeen: func(agent string) time.Time { t, _ := r.AgentLiveness(agent); return t }}
}

// Now returns the time by the relay's clock (Options.Now).
func (r *Relay) Now() time.Time { return r.now() }

// StaleAfter returns the liveness stale threshold (Options.StaleAfter).
func (r *Relay) StaleAfter() time.Duration { return r.live.StaleAfter() }

// Agents lists every actor of the ledger (Actors), every agent of the
// address book and every other agent the relay has seen, ordered by id,
// with liveness.
func (r *Relay) Agents(ctx context.Context) ([]AgentStatus, error) {
	actors, err := r.Actors(ctx)
	if err != nil {
		return nil, err
	}
	seen := r.LastSeen()
	now := r.now()
	byID := map[string]*AgentStatus{}
	for _, a := range actors {
		byID[strings.ToLower(a.ID)] = &AgentStatus{ID: a.ID, Events: a.Events, Addressed: a.Addressed, Owes: a.Owes, LastTS: a.LastTS}
	}
	for _, a := range r.book.Agents() {
		st, ok := byID[strings.ToLower(a.ID)]
		if !ok {
			st = &AgentStatus{}
			byID[strings.ToLower(a.ID)] = st
		}
		st.ID, st.Names, st.Roles = a.ID, a.Names, a.Roles
	}
	for id := range seen {
		if _, ok := byID[id]; !ok {
			byID[id] = &AgentStatus{ID: id}
		}
	}
	out := make([]AgentStatus, 0, len(byID))
	for id, st := range byID {
		st.LastSeen = seen[id]
		st.Liveness = attention.LivenessAfter(st.LastSeen, now, r.StaleAfter())
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i].ID) < strings.ToLower(out[j].ID) })
	return out, nil
}

// ReleaseEvictedClaim releases the claim on an event when its holder is
// evicted (docs/design.md §5.4: claims of evicted agents are released), so the
// next claim can win. The ledger's claims only know their TTL; this adds
// liveness. As in package attention, making the claim counts as activity,
// so a holder is judged by the later of its last activity and its claim
// time. It returns the released claim and true when it released one, and
// records a system.notify (kind claim_released) for the holder.
func (r *Relay) ReleaseEvictedClaim(ctx context.Context, group, eventID string) (ledger.Claim, bool, error) {
	return r.releaseClaim(ctx, group, eventID, false)
}

// releaseClaim is ReleaseEvictedClaim; with stale, a stale holder's
// claim is released too (a takeover, BeadBoard §4.4).
func (r *Relay) releaseClaim(ctx context.Context, group, eventID string, stale bool) (ledger.Claim, bool, error) {
	if err := r.SyncLiveness(ctx); err != nil {
		return ledger.Claim{}, false, err
	}
	now := r.now()
	c, err := r.store.GetClaim(ctx, group, eventID, now)
	if errors.Is(err, ledger.ErrNotFound) {
		return ledger.Claim{}, false, nil
	}
	if err != nil {
		return ledger.Claim{}, false, fmt.Errorf("gateway: claim of %s: %w", eventID, err)
	}
	seen, _ := r.AgentLiveness(c.Actor)
	// Liveness is in the ledger (package liveness); the claim itself says
	// the holder was active when it last claimed or renewed
	// (expires_at - ttl).
	for _, t := range []time.Time{c.ClaimedAt, c.ExpiresAt.Add(-r.claimTTL)} {
		if t.After(seen) {
			seen = t
		}
	}
	l := attention.LivenessAfter(seen, now, r.StaleAfter())
	if l == attention.Active || l == attention.Stale && !stale {
		return c, false, nil
	}
	// Only the claim as read: a holder renewing meanwhile (through
	// another relay) was told it holds the claim, and keeps it.
	switch err := r.store.ReleaseClaimAsRead(ctx, c); {
	case errors.Is(err, ledger.ErrClaimed):
		return c, false, nil
	case err != nil && !errors.Is(err, ledger.ErrNotFound):
		return c, false, fmt.Errorf("gateway: releasing %s's claim on %s: %w", c.Actor, eventID, err)
	}
	r.log.LogAttrs(ctx, slog.LevelInfo, "claim of "+string(l)+" agent released", slog.String("group", group), slog.String("event", eventID), slog.String("holder", c.Actor))
	msg := fmt.Sprintf("claim on %s released: %s was %s (last seen %s)", eventID, c.Actor, l, seen.UTC().Format(time.RFC3339))
	if err := r.NotifyAgent(ctx, c.Actor, group, eventID, "claim_released", msg); err != nil {
		return c, true, err
	}
	return c, true, nil
}

// NotifyAgent appends a system.notify of kind for agent about event
// eventID of group (CCCS §7.1): delivery failures of the agent channel,
// released claims.
func (r *Relay) NotifyAgent(ctx context.Context, agent, group, eventID, kind, message string) error {
	d := EventData{Kind: kind, Title: kind + " for " + agent, Message: oneLineNote(message),
		TargetActorID: r.book.ActorID(agent), RelatedEventID: eventID, Priority: "normal", RequiresAck: true,
		ActorID: r.book.ActorID(agent)} // who reported it: the text is the agent's, not the relay's
	if _, err := r.store.Append(ctx, []ledger.Record{{Kind: KindNotify, GroupID: group, By: "system", Data: mustJSON(d)}}); err != nil {
		return fmt.Errorf("gateway: recording %s: %w", kind, err)
	}
	return nil
}
