// Package attention implements the relay's attention policy: the C2A
// Chat-to-Agents protocol (draft 2026-06-02, docs/spec/
// c2a-chat-to-agents-protocol.txt) as docs/design.md §5.4 adapts it to Crosstalk.
//
// For every ledger event and every agent, [Decide] answers C2A's three
// questions ("Attention Model") and returns a [Delivery]:
//
//   - directedness ([DirectednessOf]): to_me, to_my_role, to_other, ambient
//     (C2A "Directedness");
//   - response policy ([PolicyOf]): must_respond, may_respond, ack_only,
//     must_not_respond, with a [Reason] (C2A "Response Policy", "Default
//     Matrix");
//   - injection ([InjectionOf]): immediate, buffered, notify, tool_mailbox,
//     digest, silent (C2A "Injection Modes"), with a [Knock] for notify.
//
// Around that it provides the pure pieces the relay needs:
// [Merge] / [Buffer] (C2A "buffered": same-author, same-thread fragments,
// quiet 3 s, at most 30 s), [Summarize] (C2A "digest"), claims
// ([Claimable], [DecideClaim], [ApplyClaim], [ReleaseClaim], [ClaimHolder],
// [PruneClaims]; C2A "Coordination And Claims"), liveness ([LivenessOf]; Beadboard Operative
// Protocol §4), and the vocabularies of dispositions ([Disposition],
// [Settles]; C2A "Event Disposition") and reaction signals ([Signal]; C2A
// "Reaction Signals").
//
// What it does not do: no I/O, no goroutines, no clock — now is always a
// parameter, and the same inputs give the same outputs. It does not read the
// ledger, store claims, keep buffers, schedule wake-ups, render prompts,
// deliver anything, or read message bodies: [Event] has no body field, so
// no decision and no knock can depend on untrusted text. It imports neither
// the envelope nor the ledger package; the relay fills [Event] from the
// CCCS event and data.x_crosstalk (docs/design.md §5.2).
//
// All enumerations are string types whose values are spelled exactly as the
// specs spell them ("to_me", "must_respond", "tool_mailbox", "stale",
// "deferred", "agree"), so they marshal to JSON as-is.
//
// # Decisions where the specs are silent or disagree
//
//  1. Precedence of directedness: BROADCAST is ambient whoever it names;
//     then a token naming the agent (to_me); then a selector/role it holds
//     (to_my_role); then a claim it holds or a thread it participates in
//     (to_my_role); then no recipients (ambient); else
//     to_other. So a reply addressed to another agent in a thread this agent
//     participates in is to_my_role (docs/design.md §5.4, C2A matrix row "Thread
//     reply where this agent participates"), not to_other.
//  2. Tokens match without regard to the case of ASCII letters
//     ([SameActor]); other letters match exactly, so "ſam" (long s) is not
//     sam nor "\u212aate" (Kelvin sign) kate, as the ledger keeps such
//     actors apart (docs/security.md). "user" means @user, and "ALL", "*"
//     mean @all (CCCS §5.1, docs/design.md §5.2). Selectors map to roles:
//     @peers→"peer", @foreman→"foreman", @user→"user", any other "@x" or bare
//     "x" → role "x". @all is a group mention every member holds: it makes
//     an event to_my_role for each of them (issue #14).
//  3. DM versus mention: to_me with the agent as the only named receiver is
//     direct_message, otherwise direct_mention. POLL, HANDOFF and ESCALATE
//     to_me carry poll_target, assignment, escalation.
//  4. ack_only: an ACK or NACK to_me — the directed answer to the asker,
//     addressed by the relay to the author of its parent — is ack_only
//     (C2A's "Thanks or acknowledgement" row), as is a to_me CLOSE or
//     REVOKE whose priority is "attention" (or RequiresAck): CCCS §6.2
//     still asks the receiver for a chat.ack, and nothing more. BROADCAST,
//     and ACK, NACK, CLOSE and REVOKE aimed elsewhere, stay
//     must_not_respond (docs/design.md §5.4).
//  5. Injection for to_me events with nothing to answer (ACK, NACK, CLOSE,
//     ack_only) is notify, not buffered: C2A's matrix says "notify or
//     silent" for acknowledgements and C2A "Reaction Signals" says inbound
//     reactions are notify. REVOKE stays immediate (docs/design.md).
//  6. Only X-Priority high or urgent makes an injection immediate; CCCS
//     priority "attention" does not, because docs/design.md §5.2 sets it for every
//     HANDOFF and ESCALATE and it means "needs chat.ack", not "interrupt".
//     X-Priority low changes nothing.
//  7. Roles and claims: an unclaimed role event is may_respond for every
//     holder of the role, with reason claim_required (claim, then answer)
//     and a knock (C2A "may_respond after claim"); once this agent holds a claim in
//     force it is may_respond (reason claimed) and injected buffered
//     (immediate for high/urgent/ESCALATE) — C2A "then claimant gets
//     buffered"; once another agent holds it, must_not_respond
//     (claimed_by_other) and tool_mailbox. A thread participant without a
//     claim gets may_respond (C2A matrix) — no claim is needed to take part
//     in a thread one is already in. Claims never limit to_me events: a
//     POLL or a REQUEST naming two agents asks both.
//  8. No default responder is picked for role events: the first claim wins
//     (docs/design.md §5.4 answers C2A's open question). An event claim beats a
//     thread claim; another agent's live thread claim blocks an event claim
//     in that thread.
//  9. Stale claimants: taking over needs ClaimRequest.TakeoverStale, as
//     Beadboard §4.4 needs --takeover-stale. Claims of evicted holders and
//     expired claims are released without asking. Making or renewing a
//     claim counts as the holder being seen, so a holder absent from
//     State.LastSeen is judged by its claim time. With the default 10 min
//     TTL a claim expires before its holder can go stale; stale takeover
//     matters only for longer TTLs.
//  10. Own events (From equals the agent) are must_not_respond, silent.
//     Bookkeeping kinds (chat.read, system.notify_ack, x.crosstalk.claim,
//     x.crosstalk.disposition) are must_not_respond, silent.
//  11. Events without an intent: a chat.message (or no kind) reads as
//     REQUEST (C2A's "DM to this session" row), chat.ack and chat.reaction
//     as ACK. v1.0 legacy intents are mapped as in docs/design.md §3.1. Any other
//     intent is unknown: to_me may_respond (reason unknown_intent), never
//     forced and never muted; to_my_role follows the claim rules.
//  12. Deadlines: must_respond and ack_only events get Event.Deadline (an
//     obligation its Obligation.Deadline); without one they never go
//     stale — a question is owed until answered or acknowledged, which is
//     what a team relying on the relay expects (issue #14), rather than a
//     fixed window. At or past a deadline the delivery is Expired and
//     must_respond becomes may_respond (C2A "Stale Events"), keeping its
//     reason; an obligation stays must_respond.
//  13. Knock topic: "<intent> about <context>" in lower case ("request about
//     deploy"), or just the intent. The context comes from the sender, so it
//     is cleaned (control and format characters removed, spaces collapsed,
//     at most 64 runes). Where is "thread:<id>" or "group:<id>"; PullWith is
//     chat.read_thread or chat.list_events.
//  14. Buffering: batches are keyed by (agent, group, thread, author). A
//     fragment 3 s or more after the previous one, or 30 s or more after
//     the batch's first, starts a new batch; a batch is ready at
//     last+3 s or first+30 s, whichever is first (both inclusive). An
//     Immediate fragment flushes its batch at once; an edit (Supersedes)
//     drops the edited fragment from the batch.
//  15. Liveness: a zero last-seen is evicted; a last-seen in the future
//     (clock skew) is active. Boundaries are inclusive as in Beadboard
//     §4.3: exactly 15 min is stale, exactly 30 min is evicted.
//  16. Signal glyphs: the spec copy lost the glyphs of claimed, done and
//     unclear; this package uses ✋, ✅ and ❓.
//  17. Dispositions: must_respond is settled by responded, acknowledged,
//     deferred, superseded or failed (C2A), not by claimed or ignored.
//     The relay actions ack, claim, defer, resolve record acknowledged,
//     claimed, deferred, responded.
package attention
