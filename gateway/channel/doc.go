// Package channel is the relay's push delivery channel for agent harnesses
// (docs/design.md §5.6 "agent stream", C2A "Lifecycle", "Event Envelope",
// "Reliability", "Cancellation And Progress"): JSON-RPC 2.0 over a
// WebSocket (served by gateway/api at /v1/agents/{agent}/channel) or over
// stdio (`crosstalk harness`), one agent per connection.
//
// The protocol, host (relay) ↔ harness:
//
//   - the harness sends `initialize` with its capabilities (C2A shape:
//     delivery, injection, chatTools, utilities); the host answers with
//     the negotiated ones — the intersection — its protocol version, the
//     standing response rules and the resume point per group. Nothing else
//     but `ping` is accepted before it (-32002).
//   - the host sends each delivery as a `chat/deliver` request whose
//     params are the C2A event envelope (package c2a: eventId,
//     conversation, author, target.directedness, attention, injection,
//     reliability with attempt and idempotencyKey, content or knock). Modes
//     the harness did not declare are sent as tool_mailbox.
//   - the harness acknowledges with the JSON-RPC response — `{}` or
//     `{"disposition": "deferred", "note": "…"}` — or later with a
//     `chat/ack` request. An error response, `{"accepted": false}` or no
//     answer within the ack timeout makes the host redeliver the same
//     eventId and idempotencyKey with attempt+1, with exponential backoff;
//     after MaxAttempts it sends `notifications/cancelled`, records a
//     system.notify (kind delivery_failed) in the ledger and closes the
//     channel. Nothing is lost: the event stays unacknowledged.
//   - resume: an acknowledgement moves the agent's delivery cursor
//     (gateway.ActionDelivered) of the group to the highest event below
//     which every delivery is acknowledged; a new connection starts after
//     it. The delivery cursor is not the CCCS read cursor (chat.read,
//     §6.3): marking events read, in any order, never moves it.
//     So a disconnect mid-stream redelivers exactly the unacknowledged
//     events, and never an acknowledged one.
//   - dispositions: acknowledged (reaction seen, and chat.ack for an
//     attention message to the agent), deferred, responded (resolve) and
//     claimed are recorded in the ledger through the relay's actions;
//     ignored is the delivery cursor alone; failed is a system.notify. The
//     harness may also send `chat/react`, `chat/claim`, `chat/defer`,
//     `chat/resolve` requests for any event delivered to its agent.
//   - `notifications/cancelled` from the host withdraws a pending delivery
//     whose thread was closed (intent CLOSE) — Crosstalk envelopes are
//     never edited or deleted, so that is the only supersession — or that
//     was given up.
//   - `notifications/progress`: the host reports the replay of the
//     backlog after (re)connecting; the harness may report its own work,
//     which counts as activity.
//   - heartbeats: the host sends `ping` every Heartbeat and closes the
//     channel after three unanswered; either side may ping. Every message
//     from the harness marks the agent seen (liveness, docs/design.md §5.4).
//
// Errors are JSON-RPC errors with a reason in message and data: -32700
// parse error, -32600 invalid request (also an oversized message, and a
// batch: the channel takes one message object at a time), -32601
// unknown method, -32602 invalid params (missing fields, an ack for an
// event never delivered on this channel), -32002 not initialized, -32001
// conflict (a claim held by another agent), -32003 permission denied,
// -32603 internal.
//
// What it does not do: it decides no attention (the relay does), and it
// keeps no state across connections beyond the ledger's delivery cursors.
package channel
