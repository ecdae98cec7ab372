// Package gateway is the crosstalk relay: it takes envelopes in from
// transports, checks and records them in a durable CCCS ledger, computes
// for every agent whether it must, may or must not respond (C2A), and
// exposes all of it to the HTTP API (gateway/api) and the command line.
//
// The pipeline (docs/design.md §5.1) for one intake — an HTTP POST, a mail, a file,
// a clipboard change — is:
//
//	size limit → envelope.Reader → validate → verify signature (docs/design.md §4.3)
//	→ de-duplication key (docs/design.md §5.3) → CCCS events (docs/design.md §5.2)
//	→ durable append (ledger, group commit) → receipt to the transport
//
// Attention is not stored: deliveries are a pure function of the ledger,
// the address book, claims, liveness and the clock (package attention), so
// they are computed when an agent asks and can never disagree with the
// ledger.
//
// # Guarantees
//
//   - Acknowledged means durable. Ingest returns a receipt for an envelope
//     only after its event is committed by the ledger (ledger.Store.Append
//     returns after fsync). A transport acknowledges its sender only then.
//   - Exactly once in the ledger. Every envelope gets a de-duplication key:
//     its message id, or for an envelope without one the SHA-256 of its
//     signed-bytes payload. Appending the same key again returns the first
//     event (Duplicate set), forever, so senders may retry freely.
//   - Nothing is dropped silently. A rejected envelope (malformed, too
//     large, bad signature, forged sender, no permission) gets an ERROR
//     envelope back through its transport and a system.notify of kind
//     "error" in the ledger.
//   - The relay never edits a signed envelope: the raw text is stored as
//     received, and hops are recorded in the ledger.
//   - by is set by the relay (CCCS §5.3, docs/security.md "Who speaks"):
//     the header's sender when the envelope verifies under a key id the
//     address book or that sender's own first use assigns to it (a
//     forwarded envelope), else the authenticated principal — who may then
//     name only itself as the sender — or, over a transport without
//     authentication, the header's sender. by is also the C2A author and
//     the actor an ACK, NACK or REVOKE acts for.
//   - Checking changes nothing: with a TrustKeeper, a key is pinned on
//     first use, or revoked, only once the envelope is accepted, never
//     under a key id the address book gives another actor.
//   - Identifiers (sender, receivers, context, group, META namespaces) are
//     NFC, with no invisible or bidi characters (docs/format.md §12).
//
// What it does not do: it does not host listeners itself beyond the
// handlers of gateway/api, and it holds no transport code (transports/).
package gateway
