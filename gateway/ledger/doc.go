// Package ledger defines the relay's durable event ledger: the CCCS v1
// event envelope (see the CCCS standard, §4), the Store interface every
// ledger implementation provides (docs/design.md §6), and JSON Lines export and
// import. Implementations live in subpackages: sqlite (the durable
// default), jetstream (several relays on one NATS JetStream ledger) and
// memory (for tests; everything but durability). ledgertest holds the conformance suite each of them runs.
//
// # Guarantees
//
// Every Store gives the following guarantees. The conformance suite in
// ledgertest checks each of them.
//
//   - Append-only. Events are never changed or deleted once appended. The
//     only mutable state in a Store is read cursors and claims, which are
//     not events.
//   - Ordering. Within a group, the authoritative order is append order,
//     expressed by seq (CCCS §4.3): seq is dense, starting at 1, without
//     gaps or repeats, even under concurrent appends. There is no order
//     across groups. ts is assigned by the store at append time (RFC 3339,
//     UTC, millisecond precision) and is informational; callers order by
//     seq, never by ts or id.
//   - Acknowledged means durable. Append returns success only after the
//     events are committed to stable storage (for sqlite: the WAL is
//     fsynced after the commit, before the caller is answered). An event whose Append returned is present
//     after a crash or power loss; an Append that did not return may or may
//     not have been committed, as a whole batch or not at all.
//   - Atomic batches. The records of one Append call are committed together
//     or not at all, and get consecutive seqs in their groups.
//   - Idempotency forever. A record with a DedupeKey that was appended
//     before (in any group, at any time, including earlier in the same
//     batch) is not appended again: Append returns the first event with
//     Duplicate set (docs/design.md §5.3). This replaces CCCS §6.1's bounded
//     client_id window with an unbounded one. Dedupe keys are global to the
//     store, not per group.
//   - Follow is lossless. A follower sees every event of its group with
//     seq > sinceSeq exactly once, in seq order, first the stored ones and
//     then live ones. A slow follower never blocks appends: followers are
//     woken by a notification and re-read the store by seq, so they cannot
//     miss events either.
//   - Read cursors (CCCS §6.3) and claims are independent of each other
//     and of acknowledgements (chat.ack events).
//
// # Crash behaviour
//
// After a crash, the store holds exactly the batches whose commit reached
// stable storage: every acknowledged batch, and possibly batches whose
// callers were not yet answered. Because appends are idempotent by
// DedupeKey, a client that retries an unanswered append with the same key
// gets the original event back instead of a second copy.
//
// # Export format
//
// Export writes one CCCS v1 event per line (JSON Lines), all groups, in
// (group_id, seq) order. An event appended with a dedupe key carries it in
// one extra top-level member, "x_dedupe_key", so that idempotency survives
// an export/import round trip. CCCS §4.1 asks readers to ignore unknown
// fields, and JSON readers generally skip unknown members; still, this is
// the one departure from the bare CCCS envelope. Import accepts lines with
// or without it.
package ledger
