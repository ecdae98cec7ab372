package c2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/client"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
)

// Coordinator is a relay's scope reservations and liveness as agent
// interfaces see them (BeadBoard §4–§5; docs/agents.md "Reservations",
// "Liveness"). [Remote] implements it, and [Local] with Scopes set.
type Coordinator interface {
	// Reserve asks for req; a refusal is an answer (Granted false with
	// the conflicts), not an error.
	Reserve(ctx context.Context, req reserve.Request) (gateway.ReserveAnswer, error)
	// Release releases agent's reservations of scopes (all or none).
	Release(ctx context.Context, agent string, scopes []string) ([]reserve.Reservation, error)
	// Reservations lists the live reservations, those overlapping path
	// when it is not "" ("who is touching this").
	Reservations(ctx context.Context, path string) ([]gateway.HeldReservation, error)
	// Heartbeat records that agent is alive and returns its liveness.
	Heartbeat(ctx context.Context, agent string) (gateway.Presence, error)
}

// ErrNoReservations reports a Local backend without a reservation
// service.
var ErrNoReservations = errors.New("c2a: this relay keeps no reservations")

// Reserve calls the reservation service, judging holders on every
// relay's latest liveness when taking over.
func (l *Local) Reserve(ctx context.Context, req reserve.Request) (gateway.ReserveAnswer, error) {
	if l.Scopes == nil {
		return gateway.ReserveAnswer{}, ErrNoReservations
	}
	req.Agent = l.Relay.Book().ActorID(req.Agent)
	l.Relay.Touch(req.Agent)
	if req.TakeoverStale {
		if err := l.Relay.SyncLiveness(ctx); err != nil {
			return gateway.ReserveAnswer{}, err
		}
	}
	rs, err := l.Scopes.Reserve(ctx, req)
	var ce *reserve.ConflictError
	switch {
	case errors.As(err, &ce):
		return gateway.ReserveAnswer{Reservations: []reserve.Reservation{}, Conflicts: ce.Conflicts}, nil
	case err != nil:
		return gateway.ReserveAnswer{}, err
	}
	return gateway.ReserveAnswer{Granted: true, Reservations: rs}, nil
}

// Release calls the reservation service.
func (l *Local) Release(ctx context.Context, agent string, scopes []string) ([]reserve.Reservation, error) {
	if l.Scopes == nil {
		return nil, ErrNoReservations
	}
	agent = l.Relay.Book().ActorID(agent)
	l.Relay.Touch(agent)
	return l.Scopes.Release(ctx, agent, scopes)
}

// Reservations lists live reservations with their holders' liveness.
func (l *Local) Reservations(ctx context.Context, path string) ([]gateway.HeldReservation, error) {
	if l.Scopes == nil {
		return nil, ErrNoReservations
	}
	if err := l.Relay.SyncLiveness(ctx); err != nil {
		return nil, err
	}
	rs, err := l.Scopes.List(ctx, path)
	if err != nil {
		return nil, err
	}
	return l.Relay.WithLiveness(rs), nil
}

// Heartbeat calls Relay.Heartbeat.
func (l *Local) Heartbeat(ctx context.Context, agent string) (gateway.Presence, error) {
	st, err := l.Relay.Heartbeat(ctx, agent)
	if err != nil {
		return gateway.Presence{}, err
	}
	return gateway.Presence{ID: l.Relay.Book().ActorID(agent), LastSeen: st.LastSeen, Liveness: st.Liveness}, nil
}

// Reserve posts POST /v1/reservations.
func (rm *Remote) Reserve(ctx context.Context, req reserve.Request) (gateway.ReserveAnswer, error) {
	ttl := ""
	if req.TTL != 0 {
		ttl = req.TTL.String()
	}
	body, _ := json.Marshal(map[string]any{"agent": req.Agent, "scopes": req.Scopes, "ttl": ttl, "reason": req.Reason, "takeover_stale": req.TakeoverStale})
	var ans gateway.ReserveAnswer
	err := rm.do(ctx, client.Request{Method: "POST", Path: "/v1/reservations", Agent: req.Agent, Body: body}, &ans)
	return ans, rm.notServed(err, "POST /v1/reservations")
}

// Release sends DELETE /v1/reservations.
func (rm *Remote) Release(ctx context.Context, agent string, scopes []string) ([]reserve.Reservation, error) {
	var ans struct {
		Released []reserve.Reservation `json:"released"`
	}
	q := url.Values{"agent": {agent}, "scope": scopes}
	err := rm.do(ctx, client.Request{Method: "DELETE", Path: "/v1/reservations?" + q.Encode(), Agent: agent}, &ans)
	return ans.Released, rm.notServed(err, "DELETE /v1/reservations")
}

// Reservations reads GET /v1/reservations.
func (rm *Remote) Reservations(ctx context.Context, path string) ([]gateway.HeldReservation, error) {
	p := "/v1/reservations"
	if path != "" {
		p += "?" + url.Values{"path": {path}}.Encode()
	}
	var ans struct {
		Reservations []gateway.HeldReservation `json:"reservations"`
	}
	err := rm.do(ctx, client.Request{Method: "GET", Path: p, Retry: true}, &ans)
	return ans.Reservations, rm.notServed(err, "GET /v1/reservations")
}

// Heartbeat posts POST /v1/agents/{agent}/heartbeat.
func (rm *Remote) Heartbeat(ctx context.Context, agent string) (gateway.Presence, error) {
	var st gateway.Presence
	err := rm.do(ctx, client.Request{Method: "POST", Path: "/v1/agents/" + client.PathSegment(agent) + "/heartbeat", Agent: agent, Body: []byte("{}"), Retry: true}, &st)
	return st, rm.notServed(err, "POST /v1/agents/{agent}/heartbeat")
}

// notServed names the endpoint a relay did not mount.
func (rm *Remote) notServed(err error, endpoint string) error {
	if errors.Is(err, errNotServed) {
		return fmt.Errorf("c2a: %w: %s (a relay before reservations and liveness)", err, endpoint)
	}
	return err
}
