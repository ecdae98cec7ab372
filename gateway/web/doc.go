// Package web is the relay's page for people (docs/design.md §5.6, issue 8): a web
// inbox served on the relay's own listener, at "/" and under /ui/, behind
// the same gate as the HTTP API (gateway/api.Server.Mount).
//
// It does:
//
//   - show the groups with unread counts (the viewing agent's CCCS read
//     cursor) and attention items (its pending C2A deliveries);
//   - show a group or a thread: envelopes in seq order with sender →
//     receiver, intent, time, the verification badge of
//     data.x_crosstalk.verification, META blocks collapsed, the body as
//     text, replies indented by their parent; new envelopes arrive over a
//     Server-Sent-Events stream that resumes with Last-Event-ID;
//   - show an agent's C2A deliveries (directedness, policy, injection),
//     pending must-respond items first, with claim, ack, defer and resolve
//     buttons (gateway.Relay.Act);
//   - preview pasted chat text with the relay's own lenient Reader — every
//     envelope and every error with its line — and send it through
//     gateway.Relay.Ingest with transport "web";
//   - compose or reply: a canonical envelope (gateway.Relay.Compose,
//     unsigned) with "copy" and "copy fenced" buttons;
//   - list the trust store's pinned keys and the ledger's first-use and
//     key-changed envelopes, and re-pin or revoke keys after a
//     confirmation step (signing.TrustStore).
//
// Security model: the gate refuses foreign Host headers (DNS rebinding)
// and cross-origin state changes (Origin, Sec-Fetch-Site). Without tokens
// the caller is the local user, who may view and act as any agent (as the
// X-Crosstalk-Agent hint of docs/configuration.md: not a security
// boundary). With tokens, a login form exchanges a token for a session;
// the session cookie (HttpOnly, SameSite=Strict, Secure over TLS) holds a
// random id, never the token. Every POST carries the session's CSRF token,
// or is refused with 403 E-PERM. Templates are html/template; bodies and
// every other envelope field are rendered as text, and a Content Security
// Policy allows only the page's own script. See docs/web.md.
//
// It does not: sign envelopes (the relay holds no key for the person at
// the page; compose produces unsigned envelopes, which a signing tool can
// sign before pasting), verify signatures in the paste preview (the
// relay's Verifier pins keys on first use, so checking happens only when
// the envelopes are sent), persist sessions across relay restarts, or
// push updates to the agent and groups pages (only group and thread views
// are live).
package web
