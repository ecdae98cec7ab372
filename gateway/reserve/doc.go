// Package reserve implements scope reservations for agents sharing one
// codebase (BeadBoard Operative Protocol v1 §4.4 and §5,
// docs/spec/beadboard-operative-protocol-v1.md; issue 15).
//
// It canonicalises path scopes (§5.1), classifies a scope against another
// as exact, partial or disjoint (§5.2), and decides reservations: an agent
// may overlap its own reservations; another agent's overlapping live
// reservation refuses the request, unless its holder is stale or evicted
// (§4.3) and the caller asks for a takeover (§4.4), in which case the old
// reservation is archived as expired.
//
// The package is pure: it does no I/O and reads no clock. [Table] is the
// in-memory projection; it is built by folding ledger events of kind
// ledger.KindReservation ([Table.Apply]), so a relay rebuilds it from its
// ledger on start and every relay on a shared ledger folds the same events
// in the same order to the same table. Appending the events, and
// serialising decisions, is the caller's job (see [Service]).
package reserve
