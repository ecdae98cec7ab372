// Package limits holds the relay's bounds tests (issue 12, docs/security.md
// "Limits"): each attack on a bound — an oversize POST, a body sent one
// byte at a time, more streams than a principal may hold, an agent stream
// over many groups, a folder file appended to after ingest — runs against
// a real relay with bearer tokens: the production ledger (SQLite), relay,
// API, web pages and HTTP server (api.NewHTTPServer), in-process on
// loopback. It has no code besides its tests.
package limits
