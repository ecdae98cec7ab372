package reserve

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TTL bounds and default.
const (
	MinTTL     = time.Second
	MaxTTL     = 7 * 24 * time.Hour
	DefaultTTL = 30 * time.Minute
	// MaxScopes bounds the scopes of one request.
	MaxScopes = 64
	// MaxReasonLen and MaxAgentLen bound a request's reason and agent
	// name in bytes.
	MaxReasonLen = 1024
	MaxAgentLen  = 256
)

// Sentinel errors of Decide and Release.
var (
	// ErrConflict reports that another agent holds an overlapping live
	// reservation; the error is a *ConflictError naming each.
	ErrConflict = errors.New("reserve: scope reserved by another agent")
	// ErrInvalid reports a malformed request: no agent, no scopes, too
	// many, or a TTL outside [MinTTL, MaxTTL]. Bad scopes wrap ErrBadScope
	// or ErrEscapesRoot instead.
	ErrInvalid = errors.New("reserve: invalid request")
	// ErrNotHeld reports a release of a scope the agent does not hold.
	ErrNotHeld = errors.New("reserve: scope not held by the agent")
)

// Reservation is one agent's live reservation of one canonical scope.
type Reservation struct {
	// ID is the id of the ledger event that granted it.
	ID        string    `json:"id"`
	Agent     string    `json:"agent"`
	Scope     string    `json:"scope"`
	Reason    string    `json:"reason,omitempty"`
	GrantedAt time.Time `json:"granted_at"`
	// RenewedAt is the last renewal, GrantedAt when never renewed.
	RenewedAt time.Time `json:"renewed_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Live reports whether the reservation is unexpired at now.
func (r Reservation) Live(now time.Time) bool { return now.Before(r.ExpiresAt) }

// Conflict is one overlap that refuses a request: the requested scope,
// the other agent's reservation and the §5.2 class of the overlap.
type Conflict struct {
	Scope         string             `json:"scope"`
	Holder        string             `json:"holder"`
	HeldScope     string             `json:"held_scope"`
	Class         Class              `json:"class"`
	ReservationID string             `json:"reservation_id"`
	Liveness      attention.Liveness `json:"liveness"`
}

// ConflictError is Decide's refusal; it wraps ErrConflict.
type ConflictError struct{ Conflicts []Conflict }

func (e *ConflictError) Error() string {
	parts := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		parts[i] = fmt.Sprintf("%s: held by %s as %s (%s, holder %s)", c.Scope, c.Holder, c.HeldScope, c.Class, c.Liveness)
	}
	return ErrConflict.Error() + ": " + strings.Join(parts, "; ")
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// Request asks for reservations of scopes for an agent.
type Request struct {
	Agent  string
	Scopes []string
	// TTL is how long the reservations last; 0 means DefaultTTL.
	TTL    time.Duration
	Reason string
	// TakeoverStale asks to take over overlapping reservations whose
	// holder is stale or evicted (BeadBoard §4.4).
	TakeoverStale bool
}

// Policy is how Decide judges a holder's liveness (BeadBoard §4.1, §4.3).
type Policy struct {
	// StaleAfter is the stale threshold; eviction comes at twice it. 0
	// means attention.StaleAfter (15 min).
	StaleAfter time.Duration
	// LastSeen returns an agent's last activity known elsewhere
	// (heartbeats, API calls); nil or zero means unknown. Granting or
	// renewing a reservation also counts as activity.
	LastSeen func(agent string) time.Time
}

// Plan is what Decide allows: grants of new reservations, renewals of
// the agent's own exact reservations, and takeovers of stale holders'
// reservations, which must be archived as expired before the grants.
type Plan struct {
	Agent     string
	Reason    string
	ExpiresAt time.Time
	// KeepLonger says the request gave no TTL: a renewal then never
	// shortens a reservation that lasts longer than DefaultTTL from now
	// (a renewal with an explicit TTL sets it, shorter or longer).
	KeepLonger bool
	// Grants are new canonical scopes.
	Grants []string
	// Renewals are the agent's own live reservations of a requested scope.
	Renewals []Reservation
	// Takeovers are other agents' reservations to archive as expired.
	Takeovers []Reservation
}

// Table is the projection of reservation events: the live reservations.
// It is not safe for concurrent use.
type Table struct {
	res map[string]Reservation // by id
	// bySeg indexes res by the first segment of the scope's base ("" for
	// the whole repository): only scopes sharing it, or covering the
	// root, can overlap.
	bySeg  map[string]map[string]bool
	voided map[string]voidedGrant // grants that lost to an earlier overlap
	// takeovers are the latest MaxTakeovers takeovers, oldest first.
	takeovers []Takeover
	// Seq is the seq of the last event applied.
	Seq int64
	// applied counts the reservation events applied, for pruning.
	applied int
}

// voidedGrant is what voided a grant, kept until the grant would have
// expired.
type voidedGrant struct {
	conflicts []Conflict
	expiresAt time.Time
}

// Takeover is a reservation archived as expired because another agent
// took it over (BeadBoard §4.4), as the ledger recorded it.
type Takeover struct {
	// EventID is the takeover event's id; At its time.
	EventID string    `json:"event_id"`
	At      time.Time `json:"at"`
	// Reservation is the reservation taken over, as it was.
	Reservation Reservation `json:"reservation"`
	By          string      `json:"by"`
}

// MaxTakeovers is how many takeovers a Table remembers.
const MaxTakeovers = 100

// Takeovers returns the latest takeovers, newest first.
func (t *Table) Takeovers() []Takeover {
	out := make([]Takeover, len(t.takeovers))
	for i, tk := range t.takeovers {
		out[len(out)-1-i] = tk
	}
	return out
}

// pruneEvery is how many events Apply folds between two prunes of
// expired reservations (they are ignored anyway; pruning frees memory).
const pruneEvery = 1024

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{res: map[string]Reservation{}, bySeg: map[string]map[string]bool{}, voided: map[string]voidedGrant{}}
}

// seg is the index key of a canonical scope.
func seg(scope string) string {
	b := base(scope)
	if b == Root {
		return ""
	}
	first, _, _ := strings.Cut(b, "/")
	return first
}

func (t *Table) add(r Reservation) {
	t.res[r.ID] = r
	k := seg(r.Scope)
	if t.bySeg[k] == nil {
		t.bySeg[k] = map[string]bool{}
	}
	t.bySeg[k][r.ID] = true
}

func (t *Table) remove(id string) {
	r, ok := t.res[id]
	if !ok {
		return
	}
	delete(t.res, id)
	k := seg(r.Scope)
	delete(t.bySeg[k], id)
	if len(t.bySeg[k]) == 0 {
		delete(t.bySeg, k)
	}
}

// overlapping calls f for each reservation live at now that may overlap
// the canonical scope (same index key, or covering the root), then
// f decides with Classify.
func (t *Table) overlapping(scope string, now time.Time, f func(Reservation, Class)) {
	visit := func(ids map[string]bool) {
		for id := range ids {
			r := t.res[id]
			if !r.Live(now) {
				continue
			}
			if cls := Classify(scope, r.Scope); cls != Disjoint {
				f(r, cls)
			}
		}
	}
	k := seg(scope)
	if k == "" {
		for _, ids := range t.bySeg {
			visit(ids)
		}
		return
	}
	visit(t.bySeg[k])
	visit(t.bySeg[""])
}

// List returns the reservations live at now, ordered by scope then
// grant time; with path non-empty, only those overlapping its canonical
// form ("who holds this path").
func (t *Table) List(now time.Time, path string) ([]Reservation, error) {
	var p string
	if path != "" {
		c, err := Canonical(path)
		if err != nil {
			return nil, err
		}
		p = c
	}
	var out []Reservation
	if p != "" {
		t.overlapping(p, now, func(r Reservation, _ Class) { out = append(out, r) })
	} else {
		for _, r := range t.res {
			if r.Live(now) {
				out = append(out, r)
			}
		}
	}
	sortRes(out)
	return out, nil
}

func sortConflicts(cs []Conflict) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Scope != cs[j].Scope {
			return cs[i].Scope < cs[j].Scope
		}
		return cs[i].HeldScope < cs[j].HeldScope || cs[i].HeldScope == cs[j].HeldScope && cs[i].ReservationID < cs[j].ReservationID
	})
}

func sortRes(rs []Reservation) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].Scope != rs[j].Scope {
			return rs[i].Scope < rs[j].Scope
		}
		return rs[i].GrantedAt.Before(rs[j].GrantedAt) || rs[i].GrantedAt.Equal(rs[j].GrantedAt) && rs[i].ID < rs[j].ID
	})
}

// Get returns the live-or-not reservation with the given id.
func (t *Table) Get(id string) (Reservation, bool) {
	r, ok := t.res[id]
	return r, ok
}

// Voided returns the conflicts that voided the grant event id, and
// whether it was voided: an earlier event in the ledger granted an
// overlapping scope to another agent (two relays decided at once). A
// voided grant is forgotten with the expired reservations, once the
// time it asked for has passed, so that races do not grow the table for
// ever; for such an old grant Voided reports false and Get finds nothing:
// neither voided nor held, it has lapsed.
func (t *Table) Voided(id string) ([]Conflict, bool) {
	v, ok := t.voided[id]
	return v.conflicts, ok
}

// canonAll canonicalises and de-duplicates scopes, keeping order.
func canonAll(scopes []string) ([]string, error) {
	if len(scopes) == 0 {
		return nil, fmt.Errorf("%w: no scopes", ErrInvalid)
	}
	if len(scopes) > MaxScopes {
		return nil, fmt.Errorf("%w: %d scopes, at most %d", ErrInvalid, len(scopes), MaxScopes)
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range scopes {
		c, err := Canonical(s)
		if err != nil {
			return nil, err
		}
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out, nil
}

// Decide decides req at now against the live reservations (BeadBoard
// §4.4, issue 15): the agent's own overlaps are allowed (an exact one is
// renewed); another agent's overlapping reservation refuses the whole
// request with a *ConflictError, unless req.TakeoverStale and its holder
// is stale or evicted, in which case the plan takes it over. An active
// holder is never taken over. Decide changes nothing: apply the plan's
// events to change the table.
func (t *Table) Decide(req Request, now time.Time, p Policy) (Plan, error) {
	switch {
	case req.Agent == "":
		return Plan{}, fmt.Errorf("%w: no agent", ErrInvalid)
	case len(req.Agent) > MaxAgentLen || strings.ContainsFunc(req.Agent, isControl):
		return Plan{}, fmt.Errorf("%w: agent name longer than %d bytes or with control characters", ErrInvalid, MaxAgentLen)
	case len(req.Reason) > MaxReasonLen:
		return Plan{}, fmt.Errorf("%w: reason longer than %d bytes", ErrInvalid, MaxReasonLen)
	case strings.ContainsFunc(req.Reason, envelope.BreaksLine):
		// Other agents read it in `crosstalk reservations`: no terminal
		// escapes, no second line faking a row, nothing reordered.
		return Plan{}, fmt.Errorf("%w: reason with a control, bidi or line separator character", ErrInvalid)
	}
	ttl := req.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < MinTTL || ttl > MaxTTL {
		return Plan{}, fmt.Errorf("%w: ttl %v outside [%v, %v]", ErrInvalid, ttl, MinTTL, MaxTTL)
	}
	scopes, err := canonAll(req.Scopes)
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{Agent: req.Agent, Reason: req.Reason, ExpiresAt: now.Add(ttl), KeepLonger: req.TTL == 0}
	var conflicts []Conflict
	taken := map[string]bool{}
	active := map[string]time.Time{} // holders' latest grant or renewal
	for _, r := range t.res {
		if r.Live(now) && r.RenewedAt.After(active[r.Agent]) {
			active[r.Agent] = r.RenewedAt
		}
	}
	for _, s := range scopes {
		var renew *Reservation
		t.overlapping(s, now, func(r Reservation, cls Class) {
			if r.Agent == req.Agent {
				if cls == Exact && (renew == nil || r.ID < renew.ID) {
					renew = &r
				}
				return
			}
			last := active[r.Agent]
			if p.LastSeen != nil {
				if seen := p.LastSeen(r.Agent); seen.After(last) {
					last = seen
				}
			}
			lv := attention.LivenessAfter(last, now, p.StaleAfter)
			if req.TakeoverStale && lv != attention.Active {
				if !taken[r.ID] {
					taken[r.ID] = true
					plan.Takeovers = append(plan.Takeovers, r)
				}
				return
			}
			conflicts = append(conflicts, Conflict{Scope: s, Holder: r.Agent, HeldScope: r.Scope, Class: cls, ReservationID: r.ID, Liveness: lv})
		})
		if renew != nil {
			plan.Renewals = append(plan.Renewals, *renew)
		} else {
			plan.Grants = append(plan.Grants, s)
		}
	}
	sortRes(plan.Takeovers)
	if len(conflicts) > 0 {
		sortConflicts(conflicts)
		return Plan{}, &ConflictError{Conflicts: conflicts}
	}
	return plan, nil
}

// Held returns the agent's live reservations of the given scopes, for a
// release; a scope the agent does not hold is ErrNotHeld.
func (t *Table) Held(agent string, scopes []string, now time.Time) ([]Reservation, error) {
	cs, err := canonAll(scopes)
	if err != nil {
		return nil, err
	}
	var out []Reservation
	for _, s := range cs {
		n := len(out)
		t.overlapping(s, now, func(r Reservation, cls Class) {
			if r.Agent == agent && cls == Exact {
				out = append(out, r)
			}
		})
		if len(out) == n {
			return nil, fmt.Errorf("%w: %s does not hold %s", ErrNotHeld, agent, s)
		}
	}
	sortRes(out)
	return out, nil
}

// Actions of reservation events (data.action of ledger.KindReservation).
const (
	ActionGrant    = "grant"
	ActionRenew    = "renew"
	ActionRelease  = "release"
	ActionTakeover = "takeover" // the reservation is archived as expired, taken over
)

// EventData is the payload of a ledger.KindReservation event.
type EventData struct {
	Action string `json:"action"`
	// ReservationID names the reservation of a renew, release or
	// takeover; a grant's reservation id is the event's own id.
	ReservationID string `json:"reservation_id,omitempty"`
	Agent         string `json:"agent"`
	Scope         string `json:"scope"`
	Reason        string `json:"reason,omitempty"`
	// ExpiresAt is when a grant or renewal lapses (ledger.TimeLayout).
	ExpiresAt string `json:"expires_at,omitempty"`
	// State is "expired" on a takeover: the old reservation's archived
	// state (BeadBoard §4.4).
	State string `json:"state,omitempty"`
	// TakenOverBy is the agent taking over.
	TakenOverBy string `json:"taken_over_by,omitempty"`
	// RenewedAt is, on a takeover, the reservation's last grant or
	// renewal (ledger.TimeLayout) when the taker judged its holder stale:
	// a renewal appended since makes the takeover void. Takeovers
	// recorded before this field was written have none and always take.
	RenewedAt string `json:"renewed_at,omitempty"`
}

// Records returns the ledger records that carry out the plan in group:
// takeovers first, then renewals, then grants, to append in one batch.
func (p Plan) Records(group string) []ledger.Record {
	var out []ledger.Record
	add := func(d EventData) {
		b, _ := json.Marshal(d) // EventData always marshals
		out = append(out, ledger.Record{Kind: ledger.KindReservation, GroupID: group, By: p.Agent, Data: b})
	}
	exp := ledger.FormatTime(p.ExpiresAt)
	for _, r := range p.Takeovers {
		add(EventData{Action: ActionTakeover, ReservationID: r.ID, Agent: r.Agent, Scope: r.Scope, State: "expired", TakenOverBy: p.Agent, RenewedAt: ledger.FormatTime(r.RenewedAt)})
	}
	for _, r := range p.Renewals {
		e := exp
		if p.KeepLonger && r.ExpiresAt.After(p.ExpiresAt) {
			e = ledger.FormatTime(r.ExpiresAt)
		}
		add(EventData{Action: ActionRenew, ReservationID: r.ID, Agent: p.Agent, Scope: r.Scope, Reason: p.Reason, ExpiresAt: e})
	}
	for _, s := range p.Grants {
		add(EventData{Action: ActionGrant, Agent: p.Agent, Scope: s, Reason: p.Reason, ExpiresAt: exp})
	}
	return out
}

// ReleaseRecords returns the records releasing rs, by agent.
func ReleaseRecords(group, agent string, rs []Reservation) []ledger.Record {
	out := make([]ledger.Record, len(rs))
	for i, r := range rs {
		b, _ := json.Marshal(EventData{Action: ActionRelease, ReservationID: r.ID, Agent: r.Agent, Scope: r.Scope})
		out[i] = ledger.Record{Kind: ledger.KindReservation, GroupID: group, By: agent, Data: b}
	}
	return out
}

// Apply folds one ledger event into the table, judging it at the event's
// own time so every relay folds the same events to the same table. Events
// of other kinds only advance Seq. A grant that overlaps another agent's
// reservation live at the grant's time (taken over neither before it) is
// voided: two relays decided at once, and the earlier event wins. A renew
// or release of a reservation by anyone but its agent, or of one no longer
// live, changes nothing; so does a takeover of a reservation renewed
// after the taker saw it. A malformed event is an error, and skipped.
func (t *Table) Apply(ev ledger.Event) error {
	if ev.Seq > t.Seq {
		t.Seq = ev.Seq
	}
	if ev.Kind != ledger.KindReservation {
		return nil
	}
	var d EventData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return fmt.Errorf("reserve: event %s: %w", ev.ID, err)
	}
	at, err := ev.Time()
	if err != nil {
		return err
	}
	if t.applied++; t.applied%pruneEvery == 0 {
		t.prune(at)
	}
	switch d.Action {
	case ActionGrant:
		exp, err := time.Parse(time.RFC3339Nano, d.ExpiresAt)
		if err != nil {
			return fmt.Errorf("reserve: grant %s: bad expires_at: %w", ev.ID, err)
		}
		scope, err := Canonical(d.Scope)
		if err != nil || scope != d.Scope || d.Agent == "" {
			return fmt.Errorf("reserve: grant %s: bad scope %q or agent %q", ev.ID, d.Scope, d.Agent)
		}
		var cs []Conflict
		t.overlapping(scope, at, func(r Reservation, cls Class) {
			if r.Agent != d.Agent {
				cs = append(cs, Conflict{Scope: scope, Holder: r.Agent, HeldScope: r.Scope, Class: cls, ReservationID: r.ID, Liveness: attention.Active})
			}
		})
		if len(cs) > 0 {
			sortConflicts(cs)
			t.voided[ev.ID] = voidedGrant{conflicts: cs, expiresAt: exp}
			return nil
		}
		t.add(Reservation{ID: ev.ID, Agent: d.Agent, Scope: scope, Reason: d.Reason, GrantedAt: at, RenewedAt: at, ExpiresAt: exp})
	case ActionRenew:
		r, ok := t.res[d.ReservationID]
		exp, err := time.Parse(time.RFC3339Nano, d.ExpiresAt)
		if err != nil {
			return fmt.Errorf("reserve: renew %s: bad expires_at: %w", ev.ID, err)
		}
		if ok && r.Agent == d.Agent && r.Live(at) {
			r.RenewedAt, r.ExpiresAt, r.Reason = at, exp, d.Reason
			t.res[r.ID] = r
		}
	case ActionRelease:
		if r, ok := t.res[d.ReservationID]; ok && r.Agent == ev.By {
			t.remove(r.ID)
		}
	case ActionTakeover:
		r, ok := t.res[d.ReservationID]
		if ok && d.RenewedAt != "" && d.RenewedAt != ledger.FormatTime(r.RenewedAt) {
			// The holder renewed after the taker judged it stale (another
			// relay appended the renewal first, and told the holder it
			// took): the holder is active and keeps it (§4.4).
			return nil
		}
		if ok {
			if len(t.takeovers) == MaxTakeovers {
				t.takeovers = append(t.takeovers[:0], t.takeovers[1:]...)
			}
			t.takeovers = append(t.takeovers, Takeover{EventID: ev.ID, At: at, Reservation: r, By: d.TakenOverBy})
		}
		t.remove(d.ReservationID)
	default:
		return fmt.Errorf("reserve: event %s: unknown action %q", ev.ID, d.Action)
	}
	return nil
}

// prune drops reservations expired at now, so the table holds only live
// ones (an expired reservation never conflicts nor renews), and the
// voided grants that would have expired by now.
func (t *Table) prune(now time.Time) {
	for id, r := range t.res {
		if !r.Live(now) {
			t.remove(id)
		}
	}
	for id, v := range t.voided {
		if !now.Before(v.expiresAt) {
			delete(t.voided, id)
		}
	}
}
