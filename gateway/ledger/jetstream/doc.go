// Package jetstream is a ledger.Store on NATS JetStream, for running
// several relays on one shared ledger (docs/design.md §6, scale-out). It gives
// every guarantee of the ledger package (see its documentation) to any
// number of Stores in any number of processes sharing one stream, and it
// passes the same conformance suite (ledgertest) as the SQLite store.
//
// It does not start or configure NATS servers, does not manage accounts
// or credentials (pass them as Options.NATSOptions), and does not shard:
// one stream holds the whole ledger. It needs nats-server 2.12 or later
// (atomic batch publish, expected-last-subject-sequence on a subject
// filter, per-message TTLs).
//
// # Layout
//
// One stream (Options.Stream, default "CROSSTALK") owns every subject
// under a prefix p (Options.Prefix, default the stream name in lower
// case):
//
//	p.ev.<group>.<kind>   one message per event: its CCCS JSON, plus
//	                      "x_dedupe_key" as in the export format
//	p.id.<event id>       id index, one per event
//	p.key.<dedupe key>    dedupe index, one per dedupe key, forever
//	p.pos.<group>.<n>     position checkpoint of the group's event
//	                      n*32+1
//
// Groups, kinds, ids and keys become subject tokens like this: ASCII
// letters, digits, '-' and '_' stay, every other byte is written "=XX"
// (upper-case hex), so "chat.message" is "chat=2Emessage". A token that
// would be longer than 128 bytes is "=H" followed by the hex SHA-256 of
// the string instead; the messages carry the original strings.
//
// An index message holds {"id","group_id","seq","back"}: the event it
// points to is "back" messages before it in the stream.
//
// The stream has DenyDelete and DenyPurge set: the ledger is append-only
// at the server too. Read cursors and claims live in two KV buckets,
// <Stream>_cursors (one key per group and actor) and <Stream>_claims (one
// key per group and event).
//
// # Appends
//
// Each Store has one writer goroutine. It takes every Append queued (up
// to MaxRecords records) and commits them as one JetStream atomic batch,
// which nats-server stores completely, in consecutive stream sequences,
// or not at all:
//
//   - Dense seq: the writer knows each group's last event (seq and stream
//     sequence, cached, read from the stream when unknown) and numbers
//     the new events from there. The group's first message in the batch
//     carries Nats-Expected-Last-Subject-Sequence = that stream sequence
//     with Nats-Expected-Last-Subject-Sequence-Subject = p.ev.<group>.*:
//     an optimistic compare-and-set on the whole group. If another writer
//     (another relay) appended to the group meanwhile, the server refuses
//     the batch; the writer rereads the heads from the stream leader and
//     plans the batch again, with jittered backoff.
//   - Idempotency forever: before planning, the writer looks the batch's
//     dedupe keys up in the dedupe index (one multi-get). Keys found give
//     Duplicate results. Every index message of a new event is published
//     with expected last subject sequence 0 ("this subject is empty"), so
//     two writers racing with one key cannot both commit; the loser plans
//     again and finds the winner's event. The index is in the stream
//     itself, not in a separate KV bucket, because an atomic batch covers
//     one stream: the event and its index entries are committed together,
//     and no crash can leave an event without its index. The event also
//     carries Nats-Msg-Id = its dedupe key (docs/design.md §6); JetStream's own
//     duplicate window (Options.DuplicateWindow) is a second line of
//     defence, not the one relied on.
//   - Atomic batches: one Append is one atomic batch, or part of one.
//     Appends combined into one batch succeed or fail together; a
//     conflict makes the writer retry the whole round. An Append of more
//     than MaxRecords records is refused with ErrInvalid rather than
//     split: nats-server commits at most 1000 messages atomically.
//   - Acknowledged means stored as durably as the stream is configured
//     (below): Append returns after the server's answer to the commit.
//     When that answer is lost (a timeout, a server or leader lost), the
//     writer sends the identical batch again (same ids, seqs and
//     compare-and-set values, so at most one copy can ever be stored)
//     until it succeeds, or it is refused and the first event's id index
//     on the stream leader shows whether an earlier send was stored.
//
// ImportEvents goes through the same writer, in atomic batches of up to
// 200 events; the events counted in its result are stored.
//
// # Reads
//
// Get and GetByDedupeKey follow the index to the event: two direct gets.
// Range asks for the group's last event, finds where event sinceSeq+1
// is (a position cache, else the checkpoint of its block of 32) and reads
// forward with batched direct gets on p.ev.<group>.*; the kinds filter is
// applied while reading, so a filter for a rare kind still reads the
// group's events. Groups sums the message counts of the event subjects
// (one stream info). Follow runs an ordered consumer on p.ev.<group>.*
// from event sinceSeq+1: stored events, then live ones; it checks seq
// itself and starts over after a gap, so it yields no gaps and no
// repeats, and a slow follower only slows its own consumer.
//
// On a replicated stream, direct gets may be answered by a follower that
// has not applied the latest writes yet. Reads that must see every
// acknowledged write ask the stream leader: "not found" answers are
// confirmed there, Range and Follow read the group's last event there
// and retry a replica that is behind. The KV buckets are created with
// direct get off, so cursor and claim reads always go to the leader.
//
// # Cursors and claims
//
// SetCursor is a KV Put (last write wins). AdvanceCursor, which the relay
// uses, is a compare-and-set on the entry's revision, so two relays
// marking the same agent's reads at once never move its cursor back.
// Options.CursorTTL, when set, makes cursors not written for that long
// disappear. Marks (SetMark) are entries of the cursors bucket too, under
// the group token "=", which no cursor has; CursorTTL applies to them
// alike. Claims: the first
// claim is a KV Create, which exactly one of several concurrent
// claimants (in any relay) wins; a renewal, or the takeover of a lapsed
// claim, is a write conditional on the revision read; a release is a
// purge conditional on it. Whether a claim has lapsed is decided by its
// stored expires_at against the caller's now, as in every Store; each
// write also carries a per-key TTL of ttl + 5 minutes, so lapsed claims
// leave the bucket by themselves.
//
// # Durability
//
// JetStream acknowledges a write when the stream's replicas have it in
// their write-ahead log, not when it is fsynced: by default nats-server
// syncs every 2 minutes (sync_interval). Two ways to get the guarantee
// "acknowledged means durable" (ledger package documentation):
//
//   - replicas ≥ 3 (Options.Replicas when the stream is created): an
//     acknowledged append is on a majority of servers, so it survives
//     the crash or loss of any one of them. A simultaneous power loss of
//     the majority can still lose the last seconds.
//   - sync_interval: always in the server configuration: every write is
//     fsynced before it is acknowledged, as the sqlite store's commits are.
//     Needed for one server; with replicas it also covers power loss.
//
// docs/scaling.md has a complete server configuration.
//
// # Limits
//
// Each event costs the servers about 100 bytes of memory for the id
// index subject (nats-server keeps per-subject state in memory), and
// each dedupe key as much again. An event must fit into the server's
// max_payload (1 MB by default; envelopes up to 1 MiB need it raised,
// e.g. to 8 MB).
package jetstream
