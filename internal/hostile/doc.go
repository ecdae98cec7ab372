// Package hostile is the relay's hostile test suite for the trust
// boundary (issue 12, docs/security.md): each test starts a real
// `crosstalk relay --config` process with two token principals, attacks
// it as one token holder would attack another — post, ACK, pin or revoke
// as someone else, lookalike and invisible names — and checks the answer,
// the ledger and the trust store.
//
// It has no API: everything is in its test files. Input bounds (sizes,
// deadlines, streams) are tested where they are enforced.
package hostile
