// Package envelope finds, parses, validates, formats and composes AI
// Crosstalk envelopes — the `[[SENDER→RECEIVER v1]] … [[END]]` text blocks
// of the AI Crosstalk protocol v1.1 (docs/spec/ai-crosstalk-protocol-v1.1.md;
// the grammar as implemented is docs/format.md, docs/design.md §3).
//
// A Reader finds every envelope in noisy text — a chat transcript, a mail
// body, a clipboard — and returns them one at a time: lenient outside an
// envelope (chat text, ``` and ~~~ fences, one level of "> " quoting, CRLF
// or CR line ends, a BOM), exact inside it. A malformed envelope is a
// *SyntaxError with an E-* code and the input line; the Reader then skips to
// the next envelope. Each Envelope keeps its source bytes (Source), from
// which package signing computes the signed payload.
//
// Marshal and Writer produce the canonical form (docs/format.md §10), which
// reads back byte for byte; Unmarshal reads exactly one envelope strictly.
// New, NewReply and NewError compose envelopes (the last one the spec's
// "Error Envelope Format"); NewID makes ULIDs; NormalizeIntent maps the v1.0
// intents; ParseAddress classifies senders and receivers.
//
// What it does not do: verify or make signatures (package signing), assign
// ids to v1.0 envelopes that lack them (the relay does, docs/design.md §5.3), or
// interpret META namespaces beyond keeping them in order. It imports only the
// standard library.
//
// Departures from the spec, all written down in docs/format.md: unknown
// intents are kept and warned about rather than rejected; ids that are not
// ULIDs or UUIDv7 are warnings in lenient mode (the spec's own examples are
// not valid ULIDs); a column-0 `sig:` line ends the body with or without a
// blank after the colon; only blank lines may stand between `sig:` and
// [[END]]; text that is not UTF-8 inside an envelope is an error.
package envelope
