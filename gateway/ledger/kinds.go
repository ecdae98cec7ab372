package ledger

// Event kinds the relay writes and reads (CCCS v1 §6–7, docs/spec/; the
// x.crosstalk.* kinds carry C2A state, docs/design.md §5.2). They are
// defined here, once: package gateway re-exports them, package attention
// uses them.
const (
	KindMessage     = "chat.message"
	KindAck         = "chat.ack"
	KindRead        = "chat.read"
	KindReaction    = "chat.reaction"
	KindNotify      = "system.notify"
	KindNotifyAck   = "system.notify_ack"
	KindClaim       = "x.crosstalk.claim"
	KindDisposition = "x.crosstalk.disposition"
	// KindDelivery records the final state of delivering one envelope to
	// one receiver over its transport: data.state "delivered" or "failed".
	KindDelivery = "x.crosstalk.delivery"
	// KindReservation records a scope reservation's grant, renewal,
	// release or takeover (data.action; BeadBoard §4.4–§5, package
	// gateway/reserve).
	KindReservation = "x.crosstalk.reservation"
	// KindDischarge records that an obligation's author or delegate
	// discharged it: data.event_id, data.actor_id (issue #14).
	KindDischarge = "x.crosstalk.discharge"
	// KindLiveness records an agent's liveness transition (active, stale,
	// evicted; BeadBoard §4.3) or the renewal of its last sighting
	// (data.state, data.seen_at; package gateway/liveness).
	KindLiveness = "x.crosstalk.liveness"
)
