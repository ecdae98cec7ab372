package reserve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// DefaultGroup is the ledger group reservation events go to by default.
const DefaultGroup = "x.crosstalk.reservations"

// Service keeps reservations in a ledger group: each decision appends
// events of kind ledger.KindReservation, and queries read a Table folded
// from them, so reservations survive a restart and are shared by every
// relay on the same ledger. Decisions of one Service are serialised by a
// mutex; between relays, every decision is checked after its append by
// folding the group in ledger order, where the earlier of two overlapping
// grants wins and the later is voided (and released by its relay), so
// exactly one of two concurrent overlapping requests is granted.
type Service struct {
	store  ledger.Store
	group  string
	now    func() time.Time
	policy Policy

	mu sync.Mutex
	t  *Table
	// beforeAppend, when set by tests, runs between a decision and its
	// append: where another relay's decision can slip in.
	beforeAppend func()
}

// Options configures a Service.
type Options struct {
	// Group is the ledger group; "" means DefaultGroup.
	Group string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Policy judges holders' liveness.
	Policy Policy
}

// NewService returns a Service on store, its table rebuilt from the
// ledger.
func NewService(ctx context.Context, store ledger.Store, o Options) (*Service, error) {
	if o.Group == "" {
		o.Group = DefaultGroup
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Service{store: store, group: o.Group, now: o.Now, policy: o.Policy, t: NewTable()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.sync(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// sync folds the group's events appended since the last sync. The caller
// holds s.mu.
func (s *Service) sync(ctx context.Context) error {
	for {
		evs, err := s.store.Range(ctx, s.group, s.t.Seq, []string{ledger.KindReservation}, 1000)
		if err != nil {
			return fmt.Errorf("reserve: reading group %s: %w", s.group, err)
		}
		for _, ev := range evs {
			// A malformed event (written by hand or a future version) is
			// skipped; the others still count.
			_ = s.t.Apply(ev)
		}
		if len(evs) < 1000 {
			return nil
		}
	}
}

// Reserve decides req now and, when granted, appends its events and
// returns the agent's resulting reservations of the requested scopes. A
// refusal is a *ConflictError (errors.Is ErrConflict).
func (s *Service) Reserve(ctx context.Context, req Request) ([]Reservation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserve(ctx, req, 3)
}

// reserve is Reserve with s.mu held; tries bounds the retries after a
// renewal that did not take (its reservation lapsed meanwhile).
func (s *Service) reserve(ctx context.Context, req Request, tries int) ([]Reservation, error) {
	if err := s.sync(ctx); err != nil {
		return nil, err
	}
	now := s.now()
	plan, err := s.t.Decide(req, now, s.policy)
	if err != nil {
		return nil, err
	}
	if s.beforeAppend != nil {
		s.beforeAppend()
	}
	res, err := s.store.Append(ctx, plan.Records(s.group))
	if err != nil {
		return nil, fmt.Errorf("reserve: appending to %s: %w", s.group, err)
	}
	if err := s.sync(ctx); err != nil {
		return nil, err
	}
	// Check the outcome in ledger order: another relay may have granted
	// an overlapping scope between our sync and our append.
	var granted, got []Reservation
	var lost []Conflict
	lapsed := false
	for i, r := range res {
		if cs, voided := s.t.Voided(r.Event.ID); voided {
			lost = append(lost, cs...)
		} else if rv, ok := s.t.Get(r.Event.ID); ok {
			granted = append(granted, rv)
		} else if i >= len(res)-len(plan.Grants) {
			// A grant (they come last) that expired, and was pruned
			// with what voided it, before this fold: decide again.
			lapsed = true
		}
	}
	for _, r := range plan.Renewals {
		// A renewal took when the reservation now lasts as planned
		// (events keep milliseconds).
		if rv, ok := s.t.Get(r.ID); ok && rv.Agent == req.Agent && !rv.ExpiresAt.Before(plan.ExpiresAt.Truncate(time.Millisecond)) {
			got = append(got, rv)
			continue
		}
		// Taken over or expired between the decision and the append.
		lapsed = true
		s.t.overlapping(r.Scope, now, func(o Reservation, cls Class) {
			if o.Agent != req.Agent {
				lost = append(lost, Conflict{Scope: r.Scope, Holder: o.Agent, HeldScope: o.Scope, Class: cls, ReservationID: o.ID, Liveness: attention.Active})
			}
		})
	}
	if lapsed && len(lost) == 0 && tries > 1 {
		// Only expired: decide again, which renews what this request
		// just got and grants the lapsed scopes afresh.
		return s.reserve(ctx, req, tries-1)
	}
	if lapsed && len(lost) == 0 {
		return nil, fmt.Errorf("reserve: reservations of %s kept lapsing while renewing; try again", req.Agent)
	}
	if len(lost) > 0 {
		// All or nothing: give back what this request was granted.
		if len(granted) > 0 {
			if _, err := s.store.Append(ctx, ReleaseRecords(s.group, req.Agent, granted)); err != nil {
				return nil, fmt.Errorf("reserve: releasing after a lost race: %w", err)
			}
			if err := s.sync(ctx); err != nil {
				return nil, err
			}
		}
		return nil, &ConflictError{Conflicts: lost}
	}
	got = append(got, granted...)
	sortRes(got)
	return got, nil
}

// Release releases the agent's reservations of scopes (all or none: a
// scope the agent does not hold is ErrNotHeld) and returns them.
func (s *Service) Release(ctx context.Context, agent string, scopes []string) ([]Reservation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.sync(ctx); err != nil {
		return nil, err
	}
	rs, err := s.t.Held(agent, scopes, s.now())
	if err != nil {
		return nil, err
	}
	if _, err := s.store.Append(ctx, ReleaseRecords(s.group, agent, rs)); err != nil {
		return nil, fmt.Errorf("reserve: appending to %s: %w", s.group, err)
	}
	return rs, s.sync(ctx)
}

// List returns the live reservations, only those overlapping path when
// it is not "" ("who holds this path").
func (s *Service) List(ctx context.Context, path string) ([]Reservation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.sync(ctx); err != nil {
		return nil, err
	}
	return s.t.List(s.now(), path)
}

// Takeovers returns the latest takeovers (at most MaxTakeovers), newest
// first.
func (s *Service) Takeovers(ctx context.Context) ([]Takeover, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.sync(ctx); err != nil {
		return nil, err
	}
	return s.t.Takeovers(), nil
}

// IsRequestError reports whether err is the caller's fault (a bad
// request, a conflict or a scope not held) rather than the ledger's.
func IsRequestError(err error) bool {
	return errors.Is(err, ErrInvalid) || errors.Is(err, ErrConflict) || errors.Is(err, ErrNotHeld) ||
		errors.Is(err, ErrBadScope) || errors.Is(err, ErrEscapesRoot)
}
