// Package c2a is what agent interfaces share (docs/design.md §5.6): the C2A
// "Event Envelope" as it travels to a harness ([Event], C2A "Event
// Envelope"), its model-visible form in the C2A "Prompt Injection Format"
// ([Render], [ResponseRules]), and one [Backend] interface over a relay —
// in-process ([Local], over *gateway.Relay and its ledger) or remote
// ([Remote], over the relay's HTTP API) — so the MCP server
// (gateway/mcpserver) and the JSON-RPC delivery channel (gateway/channel)
// work the same against either.
//
// What it does:
//
//   - maps a gateway.Delivery (the relay's C2A decision, package attention)
//     to the C2A envelope fields: eventId, conversation (kind dm, thread,
//     channel or system), author, target.directedness, attention (policy,
//     reason, priority, deadlineMs), injection (mode, context, role),
//     reliability (attempt, idempotencyKey) and — unless the event is only
//     a knock — content;
//   - renders an event for a model: the `C2A EVENT` header block, then the
//     message fenced and labelled as untrusted data (C2A "Security And
//     Trust": quoted chat is never presented as instructions), or for a
//     knock (C2A "notify") the knock fields and no body;
//   - composes outbound envelopes with deliberate directedness and a stable
//     idempotency key ([Compose], C2A "Outbound Posture", "Outbound Retry").
//
// What it does not do: it computes no attention (package attention does),
// keeps no state beyond what the relay's ledger holds, and does not speak
// any wire protocol itself.
//
// Departures from C2A: Crosstalk envelopes cannot be edited or deleted, so
// "superseded" only happens when a thread is closed (intent CLOSE); the
// `source.platform` is always "crosstalk" and `source.workspaceId` the
// ledger group.
package c2a
