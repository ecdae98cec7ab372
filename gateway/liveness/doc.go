// Package liveness keeps agents' liveness in the ledger (BeadBoard
// Operative Protocol v1 §4, docs/spec/beadboard-operative-protocol-v1.md;
// docs/agents.md "Liveness"; issue 15).
//
// An agent is active until StaleAfter (default 15 min, §4.1) after its
// last sighting, stale until twice that, then evicted (§4.3). Sightings
// are heartbeats and any activity the relay ascribes to the agent (API
// and MCP calls, its channel or streams). A [Tracker] keeps each relay's
// sightings in memory and records in the ledger (events of kind
// ledger.KindLiveness in group [DefaultGroup]) what other relays, and
// this one after a restart, need to judge the same way:
//
//   - transitions: back to active on a sighting, and stale and evicted
//     when the thresholds pass with no sighting. A relay-side sweeper
//     ([Tracker.Sweep], run every [Tracker.SweepEvery] by [Tracker.Run]
//     with the tracker's clock) records stale and evicted, since no one
//     beats then;
//   - renewals: a sighting renews the recorded one when that is older
//     than StaleAfter/2, and a sweep records this relay's latest sighting
//     StaleAfter/4 before the recorded one alone would make the agent
//     stale.
//
// So the ledger grows with transitions and with time (at most about two
// events per StaleAfter per continuously active agent: 8 an hour at the
// default), never with the number of beats. Every event carries a dedupe
// key naming the agent's previous event, so relays sharing one ledger
// (JetStream) that judge the same projection record one event between
// them; folding is deterministic, and a stale or evicted judged on an
// older sighting than a renewal folded before it is void.
//
// What is not exact: a relay that dies takes its unrecorded sightings
// (under StaleAfter/2 old) with it, so other relays, or it after a
// restart, may judge that agent up to StaleAfter/2 early. The package
// does not decide takeovers; package reserve and the relay's claims ask
// it for last sightings.
package liveness
