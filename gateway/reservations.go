package gateway

import (
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
)

// ReserveAnswer is the answer to a reservation request (POST
// /v1/reservations, the MCP tool scope.reserve): granted with the
// agent's reservations, or refused with every conflict (holder, its
// scope, the BeadBoard §5.2 class, its liveness).
type ReserveAnswer struct {
	Granted      bool                  `json:"granted"`
	Reservations []reserve.Reservation `json:"reservations"`
	Conflicts    []reserve.Conflict    `json:"conflicts,omitempty"`
}

// HeldReservation is a live reservation with its holder's liveness, as
// the reservation lists show it.
type HeldReservation struct {
	reserve.Reservation
	HolderLiveness attention.Liveness `json:"holder_liveness"`
	HolderLastSeen time.Time          `json:"holder_last_seen,omitzero"`
}

// WithLiveness returns rs with their holders' liveness (never nil).
func (r *Relay) WithLiveness(rs []reserve.Reservation) []HeldReservation {
	out := make([]HeldReservation, len(rs))
	for i, rv := range rs {
		out[i].Reservation = rv
		out[i].HolderLastSeen, out[i].HolderLiveness = r.AgentLiveness(rv.Agent)
	}
	return out
}
