// Package mcpserver is the relay's MCP interface (docs/design.md §5.6): an MCP
// server, built on the official Go SDK (github.com/modelcontextprotocol/go-sdk),
// that lets one agent read its C2A inbox and answer by envelope through
// tools. `crosstalk mcp` runs it over stdio (StreamTransport: a line that is
// not one JSON-RPC message is answered with a JSON-RPC error, not the end of
// the session; a client that reads no answer for WriteTimeout is dropped).
//
// Tools (C2A "Chat Tools"; names as in docs/design.md §5.6 — the SDK accepts dots):
//
//   - chat.list_events — the agent's deliveries, newest last, each in the
//     C2A prompt injection format (C2A "Prompt Injection Format"); with
//     eventId it pulls one event's content, knock or not;
//   - chat.read_thread — a thread with every message's content (pulls
//     knocks, C2A "notify");
//   - chat.send_message — composes, optionally signs and sends an
//     envelope with deliberate directedness (`to` and `directedness`
//     required, checked against each other) and an idempotency key that
//     fixes the message id, so a retry records once (C2A "Outbound
//     Posture", "Outbound Retry");
//   - chat.react — a typed reaction signal (C2A "Reaction Signals");
//   - chat.claim, chat.defer, chat.resolve — C2A "Coordination And
//     Claims", "Event Disposition";
//   - chat.discharge — close an obligation the agent sent (chat.send_message
//     with obligation) or is the delegate of (docs/agents.md "Obligations");
//   - chat.owe, chat.waiting — the open-set queries: what the agent owes,
//     the obligations it waits on (docs/agents.md "Open-set queries");
//   - envelope.parse, envelope.compose, envelope.verify — the envelope
//     toolkit (docs/design.md §3, §4).
//
// Every input schema is complete — required fields, enums for intents,
// signals, policies and directedness, bounds on sizes — and every result
// is structured (structuredContent) with a text rendering for the model.
// Chat text is untrusted: it is only ever shown fenced under a MESSAGE line
// that labels it data, with the standing C2A response rules in the
// server's instructions and in every listing.
//
// Errors: arguments that fail the schema, and refusals (an event never
// delivered to the agent, a claim held by another agent, a reply to a
// must_not_respond event, an oversized message), are tool errors
// (isError, with the reason), as the MCP specification asks, so a model can
// correct itself; an unknown tool is a JSON-RPC -32602 from the SDK.
//
// What it does not do: it holds no state of its own — every call reads or
// writes the relay through a c2a.Backend (in-process or over HTTP) — and it
// does not push events: a harness that wants pushed events uses the
// delivery channel (gateway/channel).
package mcpserver
