// Package a2a bridges the relay and the Agent2Agent protocol (A2A v1.0, as
// implemented by the Go SDK github.com/a2aproject/a2a-go/v2), in both
// directions (docs/agents.md, section "A2A").
//
// Inbound, a Bridge serves, for every address-book agent that opts in
// (gateway.Agent.A2A):
//
//	GET  /a2a/{agent}/.well-known/agent-card.json   the agent card
//	POST /a2a/{agent}                               the JSON-RPC endpoint the card names
//
// An A2A SendMessage (or SendStreamingMessage, over Server-Sent Events)
// becomes a REQUEST envelope from the caller — the principal the API's gate
// authenticated, never a name the request carries — to that agent, ingested
// like any envelope (spec "Relay Behavior": verified, recorded in the CCCS
// ledger, delivered). The task then waits for the agent's reply: the first
// envelope from that agent whose parent is the request. The reply's intent
// decides the task's state (RESPOND → completed, ERROR → failed, NACK →
// rejected, REQUEST → input-required, ACK → still working), and its body
// becomes the status message and, when completed, the artifact "reply".
// GetTask and CancelTask work on the caller's own tasks; a cancel records a
// CLOSE envelope to the agent. The A2A protocol work (JSON-RPC, SSE, task
// state) is the SDK's; this package maps messages and tasks to envelopes
// and ledger events.
//
// Outbound, Sender delivers envelopes to agents whose address-book
// transport is "a2a": each envelope becomes one A2A message (text part =
// the envelope text) sent to the agent's A2A endpoint; the outbound
// dispatcher (gateway.Relay.RunOutbound) retries it like any delivery. What
// the agent answers at once (a message, a settled task) is recorded as its
// reply envelope.
//
// What it does not do: keep tasks across a relay restart (tasks live in
// memory, and Close fails those still waiting; the envelopes and replies
// stay in the ledger), push
// notifications, ListTasks, the REST and gRPC bindings, file parts, or
// follow a remote agent's task that is still working.
package a2a
