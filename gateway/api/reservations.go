package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
)

// MountReservations adds the scope reservation endpoints (BeadBoard
// §4.4–§5, package reserve, docs/agents.md "Reservations") behind the
// API's gate. An agent reserves and releases only as itself: with tokens,
// the agent named must be the token's principal.
//
//	POST   /v1/reservations                    reserve: {"agent","scopes","ttl","reason","takeover_stale"}
//	DELETE /v1/reservations?agent=A&scope=S…   release the agent's scopes
//	GET    /v1/reservations[?path=P]           live reservations, or those overlapping P
//
// A refused reservation is an answer, not a failure: 200 with
// "granted": false and the conflicts (holder, held scope, class).
// Call it once, after New and before serving.
func (s *Server) MountReservations(svc *reserve.Service) {
	s.reserveOnce.Do(func() {
		s.mux.HandleFunc("POST /v1/reservations", func(w http.ResponseWriter, r *http.Request) { s.reserve(w, r, svc) })
		s.mux.HandleFunc("DELETE /v1/reservations", func(w http.ResponseWriter, r *http.Request) { s.release(w, r, svc) })
		s.mux.HandleFunc("GET /v1/reservations", func(w http.ResponseWriter, r *http.Request) { s.reservations(w, r, svc) })
	})
}

// ReserveBody is the body of POST /v1/reservations.
type ReserveBody struct {
	Agent  string   `json:"agent"`
	Scopes []string `json:"scopes"`
	// TTL is a Go duration ("30m", "1s"); "" means reserve.DefaultTTL.
	TTL           string `json:"ttl,omitempty"`
	Reason        string `json:"reason,omitempty"`
	TakeoverStale bool   `json:"takeover_stale,omitempty"`
}

// ReserveAnswer is the answer of POST /v1/reservations.
type ReserveAnswer = gateway.ReserveAnswer

func (s *Server) reserve(w http.ResponseWriter, r *http.Request, svc *reserve.Service) {
	var body ReserveBody
	if err := readJSON(r, &body, false); err != nil {
		badBody(w, err)
		return
	}
	agent, err := s.agentOf(r, body.Agent)
	if err != nil {
		writeError(w, http.StatusForbidden, gateway.CodePermission, err.Error())
		return
	}
	s.touchActing(r, agent)
	var ttl time.Duration
	if body.TTL != "" {
		if ttl, err = time.ParseDuration(body.TTL); err != nil {
			writeError(w, http.StatusBadRequest, gateway.CodeInvalid, fmt.Sprintf("ttl: %v", err))
			return
		}
		if ttl == 0 {
			// An explicit "0s" is a mistake, not a request for the
			// default (which is asked for by leaving ttl out).
			writeError(w, http.StatusBadRequest, gateway.CodeInvalid, fmt.Sprintf("ttl %q: at least %v", body.TTL, reserve.MinTTL))
			return
		}
	}
	if body.TakeoverStale {
		// Judge holders on every relay's latest sightings (§4.4).
		if err := s.relay.SyncLiveness(r.Context()); err != nil {
			s.reserveError(w, err)
			return
		}
	}
	rs, err := svc.Reserve(r.Context(), reserve.Request{
		Agent: s.relay.Book().ActorID(agent), Scopes: body.Scopes, TTL: ttl, Reason: body.Reason, TakeoverStale: body.TakeoverStale,
	})
	var ce *reserve.ConflictError
	switch {
	case errors.As(err, &ce):
		writeJSON(w, http.StatusOK, ReserveAnswer{Reservations: []reserve.Reservation{}, Conflicts: ce.Conflicts})
	case err != nil:
		s.reserveError(w, err)
	default:
		writeJSON(w, http.StatusOK, ReserveAnswer{Granted: true, Reservations: rs})
	}
}

func (s *Server) release(w http.ResponseWriter, r *http.Request, svc *reserve.Service) {
	q := r.URL.Query()
	agent, err := s.agentOf(r, q.Get("agent"))
	if err != nil {
		writeError(w, http.StatusForbidden, gateway.CodePermission, err.Error())
		return
	}
	s.touchActing(r, agent)
	rs, err := svc.Release(r.Context(), s.relay.Book().ActorID(agent), q["scope"])
	if err != nil {
		s.reserveError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"released": rs})
}

func (s *Server) reservations(w http.ResponseWriter, r *http.Request, svc *reserve.Service) {
	rs, err := svc.List(r.Context(), r.URL.Query().Get("path"))
	if err != nil {
		s.reserveError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"reservations": s.relay.WithLiveness(rs)})
}

// HeldReservation is a live reservation with its holder's liveness, as
// GET /v1/reservations lists it.
type HeldReservation = gateway.HeldReservation

// reserveError answers an error of package reserve: the caller's (400,
// 409 for a scope not held) or the ledger's (500).
func (s *Server) reserveError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, reserve.ErrNotHeld):
		writeError(w, http.StatusConflict, gateway.CodeConflict, err.Error())
	case reserve.IsRequestError(err):
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, err.Error())
	default:
		s.log.Error("reservation failed", "err", err)
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, "reservations: ledger failure")
	}
}

// touchActing records a sighting of the agent a request without a token
// acts for (docs/agents.md "Liveness": reservations are activity); a
// token's principal is seen by the gate already.
func (s *Server) touchActing(r *http.Request, agent string) {
	if _, authenticated := principal(r); !authenticated && agent != "" {
		s.relay.Touch(s.relay.Book().ActorID(agent))
	}
}
